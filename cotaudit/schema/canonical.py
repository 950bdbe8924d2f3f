"""Canonical JSON and hashing: the bytes every cache key, certificate and seal is computed over."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson


def canonical_json(value: Any) -> bytes:
    """Canonical JSON bytes: sorted keys, no insignificant whitespace (hash input)."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def sha256_hex(data: bytes | str) -> str:
    """SHA-256 hex digest of bytes, or of a string encoded as UTF-8."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()
