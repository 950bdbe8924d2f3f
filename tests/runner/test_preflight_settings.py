"""Preflight's ping carries the settings that decide whether a server accepts the sweep's
requests (the endpoint's max_tokens under its field name, thinking, reasoning_effort), so a
config whose every request would be refused fails preflight, naming the endpoint, the
server's complaint and the key to change; against the local server over loopback."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from cotaudit.errors import UsageError
from runner.config import SweepConfig, config_from_mapping
from runner.engine import run_sweep
from runner.preflight import PING_PROMPT, ping_spec, run_preflight
from runner.providers import make_provider
from runner.server.lifecycle import ServerThread
from runner.server.server_limits import RateLimitSpec
from runner.server.settings import ServerConfig
from runner.server.validation import check_anthropic, check_openai
from runner.transport import Route, default_transport

TASK = {"kind": "prontoqa", "source": "generate", "n": 1, "seed": 5, "hops_min": 2, "hops_max": 2}


def config(tmp_path: Path, base_url: str, **endpoint: Any) -> SweepConfig:
    return config_from_mapping(
        {
            "run_dir": "run",
            "cache_dir": "cache",
            "task": TASK,
            "endpoints": [
                {
                    "name": "ep",
                    "base_url": base_url,
                    "requests_per_minute": 60000,
                    "tokens_per_minute": 1e9,
                    **endpoint,
                }
            ],
        },
        config_dir=tmp_path,
    )


class Recording:
    """The run's transport, keeping the bodies it posts (to read what preflight sent)."""

    def __init__(self) -> None:
        self.inner = default_transport(1)
        self.sent: list[Any] = []

    async def post(self, route: Route, body: bytes, *, timeout_s: float | None = None) -> Any:
        self.sent.append(orjson.loads(body))
        return await self.inner.post(route, body, timeout_s=timeout_s)

    async def close(self) -> None:
        await self.inner.close()


async def preflight(cfg: SweepConfig) -> list[Any]:
    """Preflight ``cfg``; the bodies of its pings."""
    providers = {ep.name: make_provider(ep) for ep in cfg.endpoints}
    transport = Recording()
    try:
        await run_preflight(cfg, providers, transport, announce=False)
    finally:
        await transport.close()
    return transport.sent


async def refusal(cfg: SweepConfig) -> str:
    with pytest.raises(UsageError) as info:
        await preflight(cfg)
    message = str(info.value)
    assert message.count("endpoint 'ep'") == 1 and "--no-preflight" in message
    return message


THINKING_WITHOUT_IT = {
    "provider": "anthropic",
    "model": "echo:reasoning=false",
    "max_tokens": 2048,
    "thinking_budget": 1024,
}
# One per refusal: (endpoint keys, the server's words, the fix the message gives).
REFUSED = [
    pytest.param(
        {"provider": "openai", "model": "echo:max_output=1000", "max_tokens": 2048},
        "max_tokens is too large: 2048",
        "lower the endpoint's max_tokens",
        id="openai-max_tokens-above-the-model-limit",
    ),
    pytest.param(
        {
            "provider": "openai",
            "model": "echo:max_output=1000",
            "max_tokens": 2048,
            "max_tokens_param": "max_completion_tokens",
        },
        "max_completion_tokens is too large: 2048",
        "lower the endpoint's max_tokens",
        id="openai-max_completion_tokens-above-the-model-limit",
    ),
    pytest.param(
        {"provider": "anthropic", "model": "echo:max_output=1000", "max_tokens": 2048},
        "max_tokens: 2048 > 1000, which is the maximum allowed number of output tokens",
        "lower the endpoint's max_tokens",
        id="anthropic-max_tokens-above-the-model-limit",
    ),
    pytest.param(
        THINKING_WITHOUT_IT,
        "does not support extended thinking",
        "remove the endpoint's thinking_budget",
        id="anthropic-thinking-on-a-model-without-it",
    ),
    pytest.param(
        {"provider": "openai", "model": "echo:reasoning=false", "reasoning_effort": "low"},
        "'reasoning_effort' is not supported with this model",
        "remove it from the endpoint",
        id="openai-reasoning_effort-on-a-model-without-it",
    ),
]


@pytest.mark.parametrize(("keys", "complaint", "fix"), REFUSED)
async def test_a_config_the_server_refuses_fails_preflight_naming_why(
    tmp_path: Path, local_server: ServerThread, keys: dict[str, Any], complaint: str, fix: str
) -> None:
    message = await refusal(config(tmp_path, local_server.base_url, **keys))
    assert complaint in message and fix in message


async def test_the_sweep_would_have_failed_every_request_without_preflight(
    tmp_path: Path, local_server: ServerThread
) -> None:
    # What preflight saves: the same config run without it is one refusal per request.
    cfg = config(tmp_path, local_server.base_url, **THINKING_WITHOUT_IT)
    summary = await run_sweep(cfg, progress=False, preflight=False)
    assert summary.planned > 0 and summary.errors == summary.planned
    assert summary.error_types == {"BadRequest": summary.planned}


async def test_max_tokens_above_the_keys_tokens_per_minute_fails_preflight(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread]
) -> None:
    # OpenAI admits prompt + max_tokens against the minute's token budget: a request larger
    # than all of it is a 429 no wait cures ("Request too large"), for every request.
    server = make_server(ServerConfig(rate_limit=RateLimitSpec(tokens_per_minute=1000)))
    message = await refusal(config(tmp_path, server.base_url, provider="openai", model="echo",
                                   max_tokens=2048))  # fmt: skip
    assert "Request too large" in message and "lower the endpoint's max_tokens" in message


async def test_thinking_passes_preflight_and_the_ping_carries_it(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread]
) -> None:
    # The ping is sent as the sweep's requests are: thinking on (budget below max_tokens),
    # no temperature; its answer is the model's short trace and a word, not max_tokens.
    server = make_server(ServerConfig())
    cfg = config(tmp_path, server.base_url, provider="anthropic", model="thinker",
                 max_tokens=4096, thinking_budget=2048)  # fmt: skip
    [body] = await preflight(cfg)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] == 4096 and "temperature" not in body
    assert body["messages"] == [{"role": "user", "content": PING_PROMPT}]
    transport = default_transport(1)
    try:
        ep = cfg.endpoints[0]
        result = await make_provider(ep).complete(ping_spec(ep), transport)
    finally:
        await transport.close()
    assert result.reasoning and result.usage["output_tokens"] < 200
    summary = await run_sweep(cfg, progress=False, preflight=True)
    assert summary.errors == 0 and summary.planned > 0


def test_a_failed_preflight_exits_2_and_writes_nothing(
    tmp_path: Path, local_server: ServerThread
) -> None:
    from cotaudit.cli import main

    (tmp_path / "sweep.toml").write_text(
        f"""run_dir = "run"
cache_dir = "cache"
[task]
kind = "prontoqa"
source = "generate"
n = 1
[[endpoints]]
name = "ep"
provider = "anthropic"
model = "echo:max_output=1000"
base_url = "{local_server.base_url}"
max_tokens = 2048
"""
    )
    assert main(["run", str(tmp_path / "sweep.toml"), "--quiet"]) == 2
    assert not (tmp_path / "run" / "results.jsonl").exists()


def test_the_local_server_refuses_what_a_models_limits_refuse() -> None:
    from runner.server.protocol import BadRequest

    plain = {"messages": [{"role": "user", "content": "hi"}]}
    check_openai({**plain, "model": "echo:max_output=10", "max_tokens": 10})
    check_openai({**plain, "model": "echo", "max_tokens": 100_000, "reasoning_effort": "low"})
    with pytest.raises(BadRequest, match="too large") as info:
        check_openai({**plain, "model": "echo:max_output=10", "max_tokens": 11})
    assert (info.value.param, info.value.code) == ("max_tokens", "invalid_value")
    with pytest.raises(BadRequest, match="reasoning_effort") as info:
        check_openai({**plain, "model": "echo:reasoning=false", "reasoning_effort": "none"})
    assert info.value.code == "unsupported_parameter"
    thinking = {"type": "enabled", "budget_tokens": 1024}
    assert check_anthropic({**plain, "model": "echo", "max_tokens": 2048, "thinking": thinking})
    assert check_anthropic({**plain, "model": "echo:reasoning=false", "max_tokens": 2048}) == "off"
    with pytest.raises(BadRequest, match="extended thinking"):
        check_anthropic(
            {**plain, "model": "echo:reasoning=false", "max_tokens": 2048, "thinking": thinking}
        )
    with pytest.raises(BadRequest, match="maximum allowed"):
        check_anthropic({**plain, "model": "echo:max_output=10", "max_tokens": 11})
