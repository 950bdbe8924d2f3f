"""Keys out of everything written or printed: every configured API key, in every common form.

A server or a proxy may echo the ``Authorization`` or ``x-api-key`` header into an error
body; that body becomes an error's message and excerpt, a record's ``error`` field, a line on
standard error. :func:`redact` replaces, in any text, each key the run has read
(:func:`register_key`, called where a key is read from its environment variable) in each form
a server could echo it: the bare value (which covers ``Bearer <key>``), its URL-encoded,
JSON-escaped and base64 forms, and a key cut short at the end of a text (an excerpt cut
mid-key).

The keys live in this process only, in a module-level set: the one place every message
builder can reach without threading the config through, and never written anywhere.
"""

from __future__ import annotations

import base64
import json
from urllib.parse import quote

REDACTED = "[REDACTED]"
# A key cut at the end of an excerpt is redacted when at least this many of its characters
# remain: shorter tails are too likely to be ordinary text (and reveal little of a key).
MIN_TAIL_CHARS = 6
# Values this short are not treated as keys: redacting "abc" everywhere would garble messages
# and a 3-character "key" protects nothing.
MIN_KEY_CHARS = 8

_KEYS: set[str] = set()
_FORMS: list[str] = []  # every form of every key, longest first


def _forms(key: str) -> set[str]:
    raw = key.encode("utf-8")
    forms = {
        key,
        quote(key, safe=""),
        json.dumps(key)[1:-1],
        json.dumps(key)[1:-1].replace("/", "\\/"),  # JSON may escape '/' too
        base64.b64encode(raw).decode("ascii"),
        base64.urlsafe_b64encode(raw).decode("ascii"),
        base64.b64encode(raw).decode("ascii").rstrip("="),
    }
    return {form for form in forms if len(form) >= MIN_KEY_CHARS}


def register_key(key: str | None) -> None:
    """Remember ``key`` (a configured API key) so that :func:`redact` removes it."""
    if key is None:
        return
    key = key.strip()
    if len(key) < MIN_KEY_CHARS or key in _KEYS:
        return
    _KEYS.add(key)
    _FORMS[:] = sorted({form for k in _KEYS for form in _forms(k)}, key=len, reverse=True)


def forget_keys() -> None:
    """Forget every registered key (tests)."""
    _KEYS.clear()
    _FORMS.clear()


def redact(text: str) -> str:
    """``text`` with every registered key, in every form, replaced by ``[REDACTED]``."""
    if not _FORMS or not text:
        return text
    for form in _FORMS:
        if form in text:
            text = text.replace(form, REDACTED)
    return _redact_cut_tail(text)


def _redact_cut_tail(text: str) -> str:
    """A text that ends with the start of a key (an excerpt cut mid-key) loses that start."""
    for form in _FORMS:
        for size in range(min(len(form) - 1, len(text)), MIN_TAIL_CHARS - 1, -1):
            if text.endswith(form[:size]):
                return text[: len(text) - size] + REDACTED
    return text


def redact_bytes(data: bytes) -> bytes:
    """:func:`redact` for a body as bytes (decoded as UTF-8, undecodable bytes replaced)."""
    if not _FORMS:
        return data
    return redact(data.decode("utf-8", "replace")).encode("utf-8")
