"""Reasoning models through the runner: endpoint keys on the wire, the trace kept apart from
the answer in every form the local ``thinker`` returns it (issue 15)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cotaudit.errors import UsageError
from cotaudit.schema import read_records
from runner.config import config_from_mapping
from runner.engine import run_sweep
from runner.server.lifecycle import ServerThread
from runner.server.settings import ServerConfig

TASK = {"kind": "prontoqa", "source": "generate", "n": 2, "seed": 5, "hops_min": 2, "hops_max": 3}


@pytest.fixture(scope="module")
def server() -> Any:
    from runner.server.lifecycle import start_server_thread

    handle = start_server_thread(ServerConfig())
    yield handle
    handle.stop()


def config_for(tmp_path: Path, run: str, endpoint: dict[str, Any]) -> Any:
    return config_from_mapping(
        {
            "run_dir": run,
            "cache_dir": "cache",
            "task": TASK,
            "endpoints": [
                {
                    "name": "r",
                    "max_concurrency": 4,
                    "max_tokens": 2048,
                    "requests_per_minute": 60000,
                    "tokens_per_minute": 1e9,
                    **endpoint,
                }
            ],
        },
        config_dir=tmp_path,
    )


async def originals(config: Any, **kwargs: Any) -> list[dict[str, Any]]:
    summary = await run_sweep(config, progress=False, **kwargs)
    assert summary.errors == 0, summary
    records = [r for r in read_records(config.run_dir / "results.jsonl") if r["kind"] == "response"]
    assert records
    return [r for r in records if r["condition"] == "original"]


@pytest.mark.parametrize("form", ["reasoning_content", "reasoning", "inline"])
async def test_openai_protocol_traces_are_kept_apart_from_the_answer(
    tmp_path: Path, server: ServerThread, form: str
) -> None:
    config = config_for(
        tmp_path,
        "run",
        {"provider": "openai", "model": f"thinker:form={form}", "base_url": server.base_url},
    )
    for record in await originals(config):
        assert record["reasoning"], record["request_id"]
        assert "<think>" not in record["text"] and "</think>" not in record["text"]
        assert "Step 1:" in record["text"] or "answer" in record["text"].lower()
        assert record["reasoning"] not in record["text"]
        assert "reasoning_withheld" not in record  # written only where the text was withheld
        if form == "inline":
            assert record["reasoning_tokens"] is None  # an inline trace is not counted apart
        else:
            assert record["reasoning_tokens"] > 0
    # The cache keeps the trace: a rerun's records have it too.
    rerun = config_for(
        tmp_path,
        "rerun",
        {"provider": "openai", "model": f"thinker:form={form}", "base_url": server.base_url},
    )
    first = {r["request_id"].split("/", 1)[1]: r for r in await originals(config)}
    for record in await originals(rerun):
        assert record["cached"]
        assert record["reasoning"] == first[record["request_id"].split("/", 1)[1]]["reasoning"]


async def test_a_hidden_trace_is_counted_but_has_no_text(
    tmp_path: Path, server: ServerThread
) -> None:
    config = config_for(
        tmp_path,
        "run",
        {"provider": "openai", "model": "thinker:form=hidden", "base_url": server.base_url},
    )
    for record in await originals(config):
        assert record["reasoning"] is None and record["reasoning_tokens"] > 0
        assert record["reasoning_withheld"] is True
    # The cache keeps it: a rerun's records say so too.
    rerun = config_for(
        tmp_path,
        "rerun",
        {"provider": "openai", "model": "thinker:form=hidden", "base_url": server.base_url},
    )
    for record in await originals(rerun):
        assert record["cached"] and record["reasoning_withheld"] is True


async def test_anthropic_thinking_blocks_become_the_reasoning(
    tmp_path: Path, server: ServerThread
) -> None:
    base = {"provider": "anthropic", "model": "thinker", "base_url": server.base_url}
    thinking = await originals(config_for(tmp_path, "on", {**base, "thinking_budget": 1024}))
    for record in thinking:
        assert record["reasoning"] and record["text"]
        assert record["reasoning"] not in record["text"]
    # Thinking off (no budget): the answer alone, and other cache entries.
    plain = await originals(config_for(tmp_path, "off", base))
    assert all(r["reasoning"] is None and "reasoning_withheld" not in r for r in plain)
    assert not any("reasoning_withheld" in r for r in thinking)
    assert {r["cache_key"] for r in plain}.isdisjoint({r["cache_key"] for r in thinking})
    redacted = await originals(
        config_for(
            tmp_path, "hidden", {**base, "model": "thinker:form=hidden", "thinking_budget": 1024}
        )
    )
    # Redacted thinking: no text either, but the record says the model reasoned (thinking off
    # above says nothing).
    assert all(r["reasoning"] is None and r["reasoning_withheld"] is True for r in redacted)


async def test_strict_reasoning_models_get_a_preflight_message_naming_the_key(
    tmp_path: Path, server: ServerThread
) -> None:
    base = {
        "provider": "openai",
        "model": "thinker:strict_params=true",
        "base_url": server.base_url,
    }
    with pytest.raises(UsageError) as info:
        await originals(config_for(tmp_path, "a", base), preflight=True)
    assert 'max_tokens_param = "max_completion_tokens"' in str(info.value)
    with pytest.raises(UsageError) as info:
        await originals(
            config_for(tmp_path, "b", {**base, "max_tokens_param": "max_completion_tokens"}),
            preflight=True,
        )
    assert "omit_sampling = true" in str(info.value)
    fixed = config_for(
        tmp_path,
        "c",
        {
            **base,
            "max_tokens_param": "max_completion_tokens",
            "omit_sampling": True,
            "reasoning_effort": "low",
        },
    )
    for record in await originals(fixed, preflight=True):
        assert record["reasoning"]


async def test_extra_body_and_reasoning_effort_reach_the_server(
    tmp_path: Path, server: ServerThread
) -> None:
    base = {"provider": "openai", "model": "thinker", "base_url": server.base_url}
    thinking = await originals(config_for(tmp_path, "on", base))
    assert all(r["reasoning"] for r in thinking)
    # vLLM's switch for Qwen3-style hybrids, passed through verbatim: the server answers
    # without thinking, and the cache keeps the two apart.
    off = await originals(
        config_for(
            tmp_path,
            "extra",
            {**base, "extra_body": {"chat_template_kwargs": {"enable_thinking": False}}},
        )
    )
    assert all(r["reasoning"] is None for r in off)
    assert {r["cache_key"] for r in off}.isdisjoint({r["cache_key"] for r in thinking})
    effort_off = await originals(config_for(tmp_path, "none", {**base, "reasoning_effort": "none"}))
    assert all(r["reasoning"] is None for r in effort_off)


async def test_inline_think_decides_whether_a_think_block_is_read_as_the_trace(
    tmp_path: Path, server: ServerThread
) -> None:
    # The thinker's inline form puts <think>...</think> at the start of the answer on both
    # routes. On an OpenAI-compatible server it is read as the trace ("auto"); on Anthropic
    # (its thinking comes in blocks) it is the answer's own text unless the endpoint says.
    openai = {"provider": "openai", "model": "thinker:form=inline", "base_url": server.base_url}
    read = await originals(config_for(tmp_path, "auto", openai))
    assert all(r["reasoning"] and "<think>" not in r["text"] for r in read)
    kept = await originals(config_for(tmp_path, "off", {**openai, "inline_think": False}))
    assert all(r["reasoning"] is None and r["text"].startswith("<think>") for r in kept)
    # Read otherwise, cached apart; "auto" and its equal share entries.
    assert {r["cache_key"] for r in kept}.isdisjoint({r["cache_key"] for r in read})
    same = await originals(config_for(tmp_path, "on", {**openai, "inline_think": True}))
    assert all(r["cached"] for r in same)
    assert [r["reasoning"] for r in same] == [r["reasoning"] for r in read]

    anthropic = {
        "provider": "anthropic",
        "model": "thinker:form=inline",
        "base_url": server.base_url,
        "thinking_budget": 1024,
    }
    whole = await originals(config_for(tmp_path, "a-auto", anthropic))
    assert all(r["reasoning"] is None and r["text"].startswith("<think>") for r in whole)
    split = await originals(config_for(tmp_path, "a-on", {**anthropic, "inline_think": True}))
    assert all(r["reasoning"] and "<think>" not in r["text"] for r in split)
    assert not any(r["cached"] for r in split)
