"""Configured keys never survive into a message, in any of the forms a server may echo."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from cotaudit.errors import UsageError
from runner.config import config_from_mapping
from runner.providers.base import classify_status
from runner.redaction import REDACTED, forget_keys, redact, register_key

KEY = "sk-proj-Abc/123+xyz=789-secret"


@pytest.fixture(autouse=True)
def _key() -> Iterator[None]:
    forget_keys()
    register_key(KEY)
    yield
    forget_keys()


@pytest.mark.parametrize(
    "form",
    [
        KEY,
        f"Bearer {KEY}",
        quote(KEY, safe=""),
        base64.b64encode(KEY.encode()).decode(),
        KEY.replace("/", "\\/"),  # JSON's optional escape of '/'
    ],
)
def test_every_form_of_a_registered_key_is_redacted(form: str) -> None:
    text = redact(f"HTTP 401: invalid credentials {form} (request id 7)")
    assert KEY not in text and form not in text and REDACTED in text
    assert text.endswith("(request id 7)")


def test_a_key_cut_short_at_the_end_of_an_excerpt_is_redacted() -> None:
    assert redact(f"echo: Bearer {KEY[:12]}") == f"echo: Bearer {REDACTED}"
    assert redact("ordinary text ending in sk") == "ordinary text ending in sk"  # too short


def test_an_error_built_from_an_echoing_body_carries_no_key() -> None:
    body = ('{"error": {"message": "bad key: Bearer ' + KEY + '"}}').encode()
    error = classify_status(401, body, {})
    record = error.to_record(1)
    assert KEY not in str(record) and REDACTED in record["message"] and REDACTED in record["body"]


def test_short_values_are_not_treated_as_keys() -> None:
    register_key("abc")
    assert redact("abc abc") == "abc abc"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://api.example.com/v1?api-key=sk-123", "credential in its query string"),
        ("https://api.example.com/v1?key=sk-123", "credential in its query string"),
        ("https://api.example.com/v1?access_token=x", "credential in its query string"),
        ("https://api.example.com/v1?api-version=2024", "must not have a query string"),
        ("https://user:pw@api.example.com/v1", "must not carry credentials"),
    ],
)
def test_a_base_url_carrying_a_key_is_refused_without_showing_it(url: str, expected: str) -> None:
    with pytest.raises(UsageError) as info:
        config_from_mapping(
            {
                "run_dir": "r",
                "task": {"kind": "prompts", "path": "p.jsonl"},
                "endpoints": [
                    {
                        "name": "e",
                        "provider": "openai",
                        "model": "m",
                        "api_key_env": "K",
                        "base_url": url,
                    }
                ],
            },
            config_dir=Path("/nonexistent"),
        )
    assert expected in str(info.value)
    assert "sk-123" not in str(info.value) and "pw" not in str(info.value)
