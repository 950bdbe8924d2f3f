"""Reading a reasoning model's trace apart from its answer text.

Servers return the trace in one of three places (``../shared/PROVIDERS.md``, docs/servers.md):
a field beside ``content`` (``reasoning_content``: vLLM's and SGLang's reasoning parsers,
DeepSeek; ``reasoning``: newer servers), Anthropic ``thinking`` blocks, or inline, as a
``<think>...</think>`` block at the start of the answer (a server without a reasoning parser).
The inline form is cut out of the answer text here, so ``text`` is the visible answer on every
server, and ``reasoning`` the trace.
"""

from __future__ import annotations

import re

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
_LEADING = re.compile(r"\A\s*<think>", re.IGNORECASE)


def split_inline_think(text: str) -> tuple[str | None, str]:
    """``(trace, answer)`` of a text that may start with ``<think>...</think>``.

    Only a leading block counts (a ``<think>`` later in an answer is the answer's own text).
    A block that never closes (the token limit ended the trace) is all trace and no answer.
    The answer loses the whitespace that separated it from the block; the trace is stripped.
    """
    start = _LEADING.match(text)
    if start is None:
        return None, text
    rest = text[start.end() :]
    end = rest.lower().find(THINK_CLOSE)
    if end < 0:
        return rest.strip(), ""
    return rest[:end].strip(), rest[end + len(THINK_CLOSE) :].lstrip()
