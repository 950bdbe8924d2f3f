"""A provider's error answer keeps the API's own name for the error (OpenAI's ``error.type``
and ``error.code``, Anthropic's ``error.type``) in the error's message, so in the record's
``error.message`` and in every terminal line that quotes it, never with a key in it."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from cotaudit import cli
from runner.config import EndpointConfig
from runner.providers import make_provider
from runner.providers.base import (
    BadRequest,
    ProviderError,
    QuotaExhausted,
    RateLimited,
    classify_status,
    error_kind,
)
from runner.redaction import REDACTED, register_key
from runner.server.faults import FaultSpec
from runner.server.lifecycle import running_server
from runner.server.settings import ServerConfig
from runner.transport import default_transport
from tests.runner.test_providers import CannedServer, _spec
from tests.runner.test_run_setup import write_prompts

KEY = "sk-h2-canary-0123456789abcdef"

# OpenAI's answer as it sends it: indented, the message first and long, so that the body's
# 300-character excerpt ends before the type and the code.
OPENAI_CONTEXT = orjson.dumps(
    {
        "error": {
            "message": "This model's maximum context length is 128000 tokens. However, your "
            "messages resulted in 210344 tokens (200344 in the messages, 10000 in the "
            "completion). Please reduce the length of the messages or completion, or use a "
            "model with a longer context window.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    },
    option=orjson.OPT_INDENT_2,
)
ANTHROPIC_RATE = orjson.dumps(
    {
        "type": "error",
        "error": {
            "type": "rate_limit_error",
            "message": "Number of request tokens has exceeded your per-minute rate limit",
        },
    }
)


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        (OPENAI_CONTEXT, "invalid_request_error, code context_length_exceeded"),
        (ANTHROPIC_RATE, "rate_limit_error"),
        (
            b'{"error": {"type": "insufficient_quota", "code": "insufficient_quota"}}',
            "insufficient_quota",
        ),
        (b'{"error": {"code": "model_not_found", "type": null}}', "code model_not_found"),
        # vLLM and Mistral: the fields on the body itself; the numeric code is the status.
        (
            b'{"object": "error", "message": "m", "type": "BadRequestError", "code": 400}',
            "BadRequestError",
        ),
        # Google's OpenAI-compatible answers name it in "status".
        (
            b'{"error": {"code": 400, "message": "m", "status": "INVALID_ARGUMENT"}}',
            "INVALID_ARGUMENT",
        ),
        (b'{"error": "bad"}', ""),
        (b'{"type": "error", "error": "overloaded"}', ""),
        (b"<html>502 Bad Gateway</html>", ""),
        (b"[1, 2]", ""),
        (b'{"error": {"type": "a\\nb  c", "code": true}}', "a b c"),
    ],
)
def test_error_kind_reads_the_apis_type_and_code(body: bytes, kind: str) -> None:
    assert error_kind(body) == kind


def test_the_type_and_code_reach_the_record_past_the_excerpt() -> None:
    error = classify_status(400, OPENAI_CONTEXT, {})
    assert isinstance(error, BadRequest)
    assert "context_length_exceeded" not in error.body_excerpt  # the excerpt ends before it
    record = error.to_record(attempts=1)
    assert record["type"] == "BadRequest"  # the schema's field: the provider error class
    assert record["message"].startswith(
        "HTTP 400 (invalid_request_error, code context_length_exceeded): This model's maximum"
    )
    rate = classify_status(429, ANTHROPIC_RATE, {})
    assert isinstance(rate, RateLimited)
    assert rate.message == (
        "HTTP 429 (rate_limit_error): Number of request tokens has exceeded your per-minute "
        "rate limit"
    )


def test_a_quota_named_only_past_the_excerpt_is_still_a_quota() -> None:
    body = orjson.dumps(
        {"error": {"message": "Try later. " * 40, "type": "insufficient_quota", "code": None}},
        option=orjson.OPT_INDENT_2,
    )
    error = classify_status(429, body, {})
    assert isinstance(error, QuotaExhausted), error.message
    assert error.message.startswith("HTTP 429 (insufficient_quota): Try later.")


def test_a_key_echoed_in_the_type_or_code_is_redacted() -> None:
    register_key(KEY)
    body = orjson.dumps({"error": {"message": "no", "type": f"Bearer {KEY}", "code": KEY}})
    record = classify_status(401, body, {}).to_record(1)
    assert KEY not in str(record) and REDACTED in record["message"]


async def test_openais_answer_as_sent_keeps_its_type_and_code(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("H2_OPENAI_KEY", KEY)
    async with CannedServer([(400, OPENAI_CONTEXT, {})]) as base_url:
        ep = EndpointConfig("o", "openai", "gpt-x", base_url=base_url, api_key_env="H2_OPENAI_KEY")
        transport = default_transport(1)
        try:
            with pytest.raises(BadRequest) as raised:
                await make_provider(ep).complete(_spec(ep), transport)
        finally:
            await transport.close()
    message = raised.value.to_record(1)["message"]
    assert "(invalid_request_error, code context_length_exceeded)" in message


@pytest.mark.parametrize(
    ("provider", "model", "cls", "kind"),
    [
        ("openai", "fail-400", BadRequest, "(invalid_request_error)"),
        ("openai", "fail-401", ProviderError, "(invalid_request_error, code invalid_api_key)"),
        ("anthropic", "fail-400", BadRequest, "(invalid_request_error)"),
        ("anthropic", "fail-429", RateLimited, "(rate_limit_error)"),
        ("anthropic", "fail-529", ProviderError, "(overloaded_error)"),
    ],
)
async def test_the_local_servers_error_answers_keep_their_type_without_the_key(
    monkeypatch: pytest.MonkeyPatch,
    provider: str,
    model: str,
    cls: type[ProviderError],
    kind: str,
) -> None:
    # The server echoes the request's credential headers into its error bodies.
    monkeypatch.setenv("H2_KEY", KEY)
    config = ServerConfig(faults=FaultSpec(echo_credentials=True))
    async with running_server(config) as server:
        ep = EndpointConfig("e", provider, model, base_url=server.base_url, api_key_env="H2_KEY")
        transport = default_transport(1)
        try:
            with pytest.raises(cls) as raised:
                await make_provider(ep).complete(_spec(ep), transport)
        finally:
            await transport.close()
    record = raised.value.to_record(1)
    assert record["message"].startswith(f"HTTP {record['status']} {kind}: "), record
    assert KEY not in str(record) and REDACTED in record["message"], record


def test_the_preflight_line_quotes_the_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from runner.server.lifecycle import start_server_thread

    server = start_server_thread(ServerConfig())
    try:
        write_prompts(tmp_path, 2)
        (tmp_path / "sweep.toml").write_text(
            'run_dir = "run"\ncache_dir = "cache"\n'
            '[task]\nkind = "prompts"\npath = "prompts.jsonl"\n'
            f'[[endpoints]]\nname = "claude"\nprovider = "anthropic"\nmodel = "fail-400"\n'
            f'base_url = "{server.base_url}"\n'
        )
        assert cli.main(["run", str(tmp_path / "sweep.toml"), "--no-progress"]) == 2
    finally:
        server.stop()
    err = capsys.readouterr().err
    assert "endpoint 'claude': request refused (HTTP 400 (invalid_request_error): " in err, err
