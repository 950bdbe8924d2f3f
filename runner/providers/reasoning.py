"""Reading a reasoning model's trace apart from its answer text.

Servers return the trace in one of three places (``../shared/PROVIDERS.md``, docs/servers.md):
a field beside ``content`` (``reasoning_content``: vLLM's and SGLang's reasoning parsers,
DeepSeek; ``reasoning``: newer servers), Anthropic ``thinking`` blocks, or inline, as a
``<think>...</think>`` block at the start of the answer (a server without a reasoning parser).
Chat templates that open the block in the prompt (DeepSeek-R1's since its update, Qwen3's
thinking models) make such a server return the trace without its ``<think>``: the answer then
starts with the trace and the one ``</think>`` ends it. The inline forms are cut out of the
answer text here, so ``text`` is the visible answer on every server, and ``reasoning`` the
trace. Only where the endpoint reads them (``inline_think``, docs/configuration.md): a hosted
API's answer that mentions a ``</think>`` is the answer's own text.
"""

from __future__ import annotations

import re

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
_LEADING = re.compile(r"\A\s*<think>", re.IGNORECASE)


def split_inline_think(text: str) -> tuple[str | None, str]:
    """``(trace, answer)`` of a text that may start with ``<think>...</think>``, or with a
    trace whose ``<think>`` the prompt's template wrote (``trace</think>answer``).

    Only a leading block counts (a ``<think>`` later in an answer is the answer's own text);
    without a leading ``<think>``, a text with exactly one ``</think>`` and no ``<think>`` at
    all is the template's form. A block that never closes (the token limit ended the trace)
    is all trace and no answer; without its opening tag it cannot be told from an answer, and
    is kept as the answer. The answer loses the whitespace that separated it from the block;
    the trace is stripped, and an empty one (``<think>\n\n</think>``: a hybrid model with
    thinking off) is None, as a trace field that is absent or empty is.
    """
    start = _LEADING.match(text)
    if start is None:
        lowered = text.lower()
        if lowered.count(THINK_CLOSE) != 1 or THINK_OPEN in lowered:
            return None, text
        end = lowered.find(THINK_CLOSE)
        return text[:end].strip() or None, text[end + len(THINK_CLOSE) :].lstrip()
    rest = text[start.end() :]
    end = rest.lower().find(THINK_CLOSE)
    if end < 0:
        return rest.strip() or None, ""
    return rest[:end].strip() or None, rest[end + len(THINK_CLOSE) :].lstrip()
