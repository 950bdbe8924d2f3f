"""Units of issue 15's runner side: seeds per replicate, the inline trace, custom ids, the new
endpoint keys, the manifest's served history, and the dry run's batch price."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from cotaudit.errors import UsageError
from runner.batch.custom_ids import ANTHROPIC_CUSTOM_ID, custom_id_for
from runner.cache import CachedResponse
from runner.commands.run import estimate
from runner.config import config_from_mapping
from runner.manifest import served_history
from runner.providers.anthropic import AnthropicProvider
from runner.providers.openai import OpenAIProvider
from runner.providers.reasoning import split_inline_think
from runner.request_spec import replicate_seed


def test_sampled_replicates_get_distinct_seeds_and_t0_keeps_the_endpoints() -> None:
    assert [replicate_seed(7, 0.7, k) for k in range(4)] == [7, 8, 9, 10]
    assert [replicate_seed(7, 0.0, k) for k in range(3)] == [7, 7, 7]
    assert replicate_seed(None, 0.7, 3) is None


@pytest.mark.parametrize(
    ("text", "trace", "answer"),
    [
        ("<think>\nA then B.\n</think>\n\nSo True.", "A then B.", "So True."),
        ("  <THINK>x</THINK>y", "x", "y"),
        ("<think>cut off by the limit", "cut off by the limit", ""),
        ("No trace. <think>not a trace</think>", None, "No trace. <think>not a trace</think>"),
        # The template opened the block in the prompt: the answer starts inside it.
        ("Okay, 2+2=4.\n</think>\n\nThe answer is 4.", "Okay, 2+2=4.", "The answer is 4."),
        ("a</think>b</think>c", None, "a</think>b</think>c"),  # not one block: the answer's
        ("", None, ""),
        # An empty block (Qwen3 with thinking off, no parser) is no trace, as an empty
        # reasoning_content is: None, not "".
        ("<think>\n\n</think>\n\nAns", None, "Ans"),
        ("\n</think>\n\nAns", None, "Ans"),
        ("<think>  ", None, ""),
    ],
)
def test_a_leading_think_block_is_the_trace(text: str, trace: str | None, answer: str) -> None:
    assert split_inline_think(text) == (trace, answer)


def test_custom_ids_fit_each_api_and_are_deterministic() -> None:
    rid = "gpt4o/g11-00001/substitution/P3/2"
    assert custom_id_for(rid, "openai") == rid
    mapped = custom_id_for(rid, "anthropic")
    assert ANTHROPIC_CUSTOM_ID.match(mapped) and mapped == custom_id_for(rid, "anthropic")
    assert custom_id_for("plain_id-1", "anthropic") == "plain_id-1"
    long = "x" * 65
    assert custom_id_for(long, "anthropic") != long and len(custom_id_for(long, "anthropic")) <= 64
    assert custom_id_for(rid + "0", "anthropic") != mapped


def endpoint(tmp_path: Path, **keys: Any) -> Any:
    table = {"name": "e", "provider": "openai", "model": "m", **keys}
    return config_from_mapping(
        {"run_dir": "r", "task": {"kind": "prompts", "path": "p.jsonl"}, "endpoints": [table]},
        config_dir=tmp_path,
    ).endpoints[0]


@pytest.mark.parametrize(
    "base_url", ["http://127.0.0.1:11434/v1", "http://gpu-box:8000/v1", "https://localhost/v1"]
)
def test_a_self_hosted_server_needs_no_key_variable(tmp_path: Path, base_url: str) -> None:
    ep = endpoint(tmp_path, base_url=base_url)
    assert ep.api_key_env is None
    assert "authorization" not in OpenAIProvider(ep).route.headers


@pytest.mark.parametrize("base_url", [None, "https://api.example.com/v1"])
def test_a_remote_https_api_still_needs_one(tmp_path: Path, base_url: str | None) -> None:
    keys = {} if base_url is None else {"base_url": base_url}
    with pytest.raises(UsageError, match="api_key_env"):
        endpoint(tmp_path, **keys)


@pytest.mark.parametrize(
    ("keys", "match"),
    [
        ({"max_tokens_param": "max_new_tokens"}, "max_tokens_param"),
        ({"reasoning_effort": "extreme"}, "reasoning_effort"),
        ({"omit_sampling": "yes"}, "omit_sampling"),
        ({"extra_body": {"temperature": 1}}, "runner sends itself"),
        ({"extra_body": "top_k=2"}, "extra_body"),
        ({"thinking_budget": 2048}, "Anthropic setting"),
        ({"omit_sampling": True, "top_p": 0.9}, "top_p"),
    ],
)
def test_bad_reasoning_keys_are_named(tmp_path: Path, keys: dict[str, Any], match: str) -> None:
    with pytest.raises(UsageError, match=match):
        endpoint(tmp_path, base_url="http://127.0.0.1:1/v1", **keys)


def test_anthropic_thinking_budget_must_fit_below_max_tokens(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="thinking_budget"):
        endpoint(tmp_path, provider="anthropic", base_url="http://127.0.0.1:1/v1", max_tokens=1024,
                 thinking_budget=1024)  # fmt: skip
    with pytest.raises(UsageError, match="OpenAI-protocol"):
        endpoint(tmp_path, provider="anthropic", base_url="http://127.0.0.1:1/v1",
                 reasoning_effort="low")  # fmt: skip


def test_reasoning_keys_shape_the_body_and_only_output_ones_the_cache_key(
    tmp_path: Path,
) -> None:
    from runner.preflight import ping_spec

    plain = endpoint(tmp_path, base_url="http://127.0.0.1:1/v1")
    reasoning = endpoint(
        tmp_path,
        base_url="http://127.0.0.1:1/v1",
        max_tokens_param="max_completion_tokens",
        omit_sampling=True,
        reasoning_effort="high",
        extra_body={"top_k": 20},
    )
    body = OpenAIProvider(reasoning).build_body(ping_spec(reasoning))
    assert "max_tokens" not in body and body["max_completion_tokens"] == 512
    assert "temperature" not in body and "top_p" not in body
    assert body["reasoning_effort"] == "high" and body["top_k"] == 20
    assert ping_spec(plain).cache_key != ping_spec(reasoning).cache_key
    # The token field alone changes no output: the same cache key.
    renamed = endpoint(
        tmp_path, base_url="http://127.0.0.1:1/v1", max_tokens_param="max_completion_tokens"
    )
    assert ping_spec(plain).cache_key == ping_spec(renamed).cache_key
    assert plain.output_identity() == renamed.output_identity()  # and the same plan hash
    revised = endpoint(tmp_path, base_url="http://127.0.0.1:1/v1", revision="q4")
    assert ping_spec(plain).cache_key != ping_spec(revised).cache_key
    thinking = endpoint(
        tmp_path,
        provider="anthropic",
        base_url="http://127.0.0.1:1/v1",
        max_tokens=4096,
        thinking_budget=2048,
    )
    body = AnthropicProvider(thinking).build_body(ping_spec(thinking))
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert "temperature" not in body
    assert "thinking" not in AnthropicProvider(thinking).build_body(ping_spec(thinking), 1)


def test_old_cache_entries_still_decode() -> None:
    old = orjson.dumps({"text": "t", "finish_reason": "stop", "usage": {}})
    assert CachedResponse.from_bytes(old) == CachedResponse("t", "stop", {})
    new = CachedResponse("t", "stop", {}, "m", "fp_1", "trace", 3)
    assert CachedResponse.from_bytes(new.to_bytes()) == new


def test_the_manifest_adds_a_served_entry_only_when_it_changes() -> None:
    found = {"served_model": "a", "system_fingerprint": "fp_1", "listed": ["a"]}
    first = served_history(None, {"e": found}, "t1")
    assert first == {"e": [{**found, "checked_at": "t1"}]}
    same = served_history({"served": first}, {"e": found}, "t2")
    assert same == first
    moved = served_history({"served": first}, {"e": {**found, "served_model": "b"}}, "t3")
    assert [x["served_model"] for x in moved["e"]] == ["a", "b"]
    assert served_history({"served": first}, None, "t4") == first  # --no-preflight keeps it


def test_dry_run_prices_batch_rates_beside_online(tmp_path: Path) -> None:
    (tmp_path / "p.jsonl").write_bytes(
        b"".join(orjson.dumps({"id": f"q{i}", "prompt": "x" * 400}) + b"\n" for i in range(10))
    )
    prices = {"price_input_per_mtok": 2.0, "price_output_per_mtok": 8.0, "api_key_env": "K"}
    config = config_from_mapping(
        {
            "run_dir": "r",
            "task": {"kind": "prompts", "path": "p.jsonl"},
            "endpoints": [
                {"name": "on", "provider": "openai", "model": "m", **prices},
                {"name": "off", "provider": "openai", "model": "m", "mode": "batch", **prices},
                {
                    "name": "cheap",
                    "provider": "anthropic",
                    "model": "m",
                    "mode": "batch",
                    "batch_discount": 0.6,
                    **prices,
                },
            ],
        },
        config_dir=tmp_path,
    )
    on, off, cheap = estimate(config, None)
    # 10 requests x (100 input tokens x 2 + 512 output tokens x 8) per million.
    assert on.cost == pytest.approx(10 * (100 * 2 + 512 * 8) / 1e6)
    assert off.batch_cost == pytest.approx(on.cost / 2)
    assert cheap.batch_cost == pytest.approx(on.cost * 0.4)
    assert "online 0.04" in off.line() and "at batch rates (50% off" in off.line()
    assert "cost <= 0.04 online (0.02 at batch rates, 50% off)" in on.line()
    assert "24 h batch window" in off.line() and "60% off" in cheap.line()


def test_the_key_goes_only_to_the_configured_host(tmp_path: Path) -> None:
    from runner.providers.api_client import ApiClient
    from runner.providers.base import PermanentError

    ep = endpoint(tmp_path, provider="anthropic", base_url="http://127.0.0.1:9/v1")
    client = ApiClient(AnthropicProvider(ep))
    assert client.url("/messages/batches") == "http://127.0.0.1:9/v1/messages/batches"
    same = "http://127.0.0.1:9/v1/messages/batches/b1/results"
    assert client.url(same) == same
    for other in (
        "http://evil.example/results",
        "https://127.0.0.1:9/v1/x",
        "http://127.0.0.1:10/r",
    ):
        with pytest.raises(PermanentError, match="another host"):
            client.url(other)


@pytest.mark.parametrize(
    ("keys", "reads"),
    [
        ({"base_url": "http://127.0.0.1:8000/v1"}, True),  # vLLM, llama.cpp, Ollama
        ({"base_url": "https://gpu-box.example/v1", "api_key_env": "K"}, True),
        ({"api_key_env": "K"}, False),  # OpenAI's own API (the default base_url)
        ({"base_url": "https://API.openai.com:443/v1", "api_key_env": "K"}, False),
        ({"provider": "anthropic", "api_key_env": "K"}, False),  # blocks, never inline
        ({"provider": "anthropic", "base_url": "http://127.0.0.1:1/v1"}, False),
        ({"provider": "local"}, True),
        ({"api_key_env": "K", "inline_think": True}, True),
        ({"base_url": "http://127.0.0.1:8000/v1", "inline_think": False}, False),
    ],
)
def test_inline_think_auto_reads_a_think_block_on_self_hosted_servers_only(
    tmp_path: Path, keys: dict[str, Any], reads: bool
) -> None:
    assert endpoint(tmp_path, **keys).reads_inline_think is reads


def test_inline_think_enters_the_cache_key_only_where_it_changes_the_reading(
    tmp_path: Path,
) -> None:
    # The cache keeps answers as read (text and trace apart): a reading other than the one
    # "auto" gives an endpoint gets entries of its own. "auto", and a value equal to what it
    # gives, keep the keys (and plan hash) an endpoint had before the key existed.
    from runner.preflight import ping_spec

    def key_and_hash(**keys: Any) -> tuple[str, Any]:
        ep = endpoint(tmp_path, **keys)
        return ping_spec(ep).cache_key, ep.output_identity()

    vllm = {"base_url": "http://127.0.0.1:8000/v1"}
    assert key_and_hash(**vllm) == key_and_hash(**vllm, inline_think="auto")
    assert key_and_hash(**vllm) == key_and_hash(**vllm, inline_think=True)
    assert key_and_hash(**vllm)[0] != key_and_hash(**vllm, inline_think=False)[0]
    hosted = {"provider": "anthropic", "api_key_env": "K"}
    assert key_and_hash(**hosted) == key_and_hash(**hosted, inline_think=False)
    assert key_and_hash(**hosted)[1] != key_and_hash(**hosted, inline_think=True)[1]


def test_stop_is_still_sent_under_omit_sampling_and_a_refusal_names_it(tmp_path: Path) -> None:
    # PROVIDERS.md names temperature and top_p as what reasoning models refuse, not stop: a
    # configured stop is sent (dropping it would change the answers the records claim). A
    # server that refuses it gets a preflight message naming the key.
    from runner.preflight import advice, ping_spec
    from runner.providers.base import BadRequest

    ep = endpoint(tmp_path, base_url="http://127.0.0.1:1/v1", omit_sampling=True, stop="END")
    body = OpenAIProvider(ep).build_body(ping_spec(ep))
    assert body["stop"] == ["END"] and "temperature" not in body
    refusal = BadRequest(
        "HTTP 400: Unsupported parameter: 'stop' is not supported with this model.",
        status=400,
        body_excerpt='{"error": {"message": "Unsupported parameter: \'stop\' is not '
        'supported with this model.", "param": "stop"}}',
    )
    message = advice(ep, "http://127.0.0.1:1/v1", refusal)
    assert message is not None and "remove the endpoint's stop" in message
