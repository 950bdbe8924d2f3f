"""A record's ``params`` say what was sent: a temperature (and top_p) an endpoint does not send
(``omit_sampling``, Anthropic thinking) and a seed Anthropic has no field for are null, and
every other value is the body's. Request ids and cache keys stay what they were."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cotaudit.schema import read_records
from runner.config import EndpointConfig, config_from_mapping
from runner.engine import run_sweep
from runner.providers.anthropic import AnthropicProvider
from runner.providers.base import Provider
from runner.providers.openai import OpenAIProvider
from runner.request_spec import RequestSpec, make_spec
from runner.server.lifecycle import ServerThread

OPENAI = {"provider": "openai", "base_url": "http://x.test/v1", "model": "m"}
ANTHROPIC = {"provider": "anthropic", "base_url": "http://y.test/v1", "model": "c"}
ENDPOINTS = [
    pytest.param({**OPENAI, "seed": 4, "top_p": 0.9, "stop": ("END",)}, id="openai"),
    pytest.param(
        {**OPENAI, "seed": 4, "omit_sampling": True, "max_tokens_param": "max_completion_tokens"},
        id="openai-omit_sampling",
    ),
    pytest.param({**ANTHROPIC, "seed": 4, "top_p": 0.9, "stop": ("END",)}, id="anthropic"),
    pytest.param(
        {**ANTHROPIC, "seed": 4, "max_tokens": 4096, "thinking_budget": 2048},
        id="anthropic-thinking",
    ),
    pytest.param({**ANTHROPIC, "omit_sampling": True}, id="anthropic-omit_sampling"),
    pytest.param({"provider": "local", "model": "echo", "seed": 4}, id="local"),
]
# Each recorded param and the body fields that may carry it.
FIELDS = {
    "temperature": ("temperature",),
    "top_p": ("top_p",),
    "max_tokens": ("max_tokens", "max_completion_tokens"),
    "seed": ("seed",),
    "stop": ("stop", "stop_sequences"),
}


def sample(ep: EndpointConfig) -> RequestSpec:
    return make_spec(
        ep.identity(),
        task="t",
        problem_id="p",
        condition="sample",
        messages=[{"role": "user", "content": "Q?"}],
        temperature=0.7,
        sample_index=2,
    )


def provider(ep: EndpointConfig) -> Provider:
    cls = AnthropicProvider if ep.provider == "anthropic" else OpenAIProvider
    return cls(ep, base_url="http://127.0.0.1:1/v1")


@pytest.mark.parametrize("keys", ENDPOINTS)
def test_recorded_params_are_the_bodys(keys: dict[str, Any]) -> None:
    ep = EndpointConfig("e", **keys)
    spec = sample(ep)
    body = provider(ep).build_body(spec)
    params = spec.to_record()["params"]
    assert set(params) == set(FIELDS)
    for name, fields in FIELDS.items():
        sent = [body[f] for f in fields if f in body]
        assert sent == ([] if params[name] is None else [params[name]]), name


def test_a_temperature_or_seed_not_sent_keeps_its_cache_key() -> None:
    # The keys these specs had before their records said what was sent (computed then): an
    # existing cache and run directory keep answering them.
    openai = EndpointConfig(
        "o", "openai", "o3", base_url="http://x.test/v1", seed=4, omit_sampling=True,
        max_tokens_param="max_completion_tokens",
    )  # fmt: skip
    anthropic = EndpointConfig(
        "a", "anthropic", "claude", base_url="http://y.test/v1", seed=4, max_tokens=4096,
        thinking_budget=2048,
    )  # fmt: skip
    for ep, key in [
        (openai, "e7f5836d531cec68c225385ead2eda08b600647526fbcab1a2dbc47ed057813f"),
        (anthropic, "40e9fe49ba9981b62f7d7077034b05c3d409dbe9fd28d2811eee6c0e9cfbbdb7"),
    ]:
        spec = sample(ep)
        assert spec.params["temperature"] is None
        assert (spec.request_id, spec.cache_key) == (f"{ep.name}/p/sample/-/2", key)
    assert sample(openai).params["seed"] == 6  # sent: the seed of replicate 2 at T = 0.7
    assert sample(anthropic).params["seed"] is None  # the Messages API has no seed


async def test_a_runs_records_say_no_temperature_was_sent(
    tmp_path: Path, local_server: ServerThread
) -> None:
    task = {"kind": "prontoqa", "source": "generate", "n": 1, "seed": 5, "hops_min": 2}
    thinking = {"provider": "anthropic", "model": "thinker", "max_tokens": 4096}
    records = []
    for run, keys in [
        ("o", {"provider": "openai", "model": "echo", "omit_sampling": True}),
        ("a", {**thinking, "thinking_budget": 1024}),
    ]:
        config = config_from_mapping(
            {
                "run_dir": run,
                "cache_dir": "cache",
                "task": task,
                "endpoints": [
                    {
                        "name": run,
                        "base_url": local_server.base_url,
                        "requests_per_minute": 60000,
                        "tokens_per_minute": 1e9,
                        **keys,
                    }
                ],
            },
            config_dir=tmp_path,
        )
        summary = await run_sweep(config, progress=False)
        assert summary.errors == 0
        records += [
            r for r in read_records(config.run_dir / "results.jsonl") if r["kind"] == "response"
        ]
    assert {r["condition"] for r in records} >= {"original", "sample"}
    assert all(r["params"]["temperature"] is None for r in records)
