"""Latency specs parse, sample from the right distribution, and delay server answers."""

from __future__ import annotations

import statistics

import aiohttp
import pytest

from cotaudit.errors import UsageError
from runner.server.latency import LatencySampler, LatencySpec
from runner.server.lifecycle import running_server
from runner.server.settings import ServerConfig
from tests.runner.server.helpers import openai_body


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("0.05", LatencySpec("fixed", 0.05)),
        ("fixed:0.1", LatencySpec("fixed", 0.1)),
        ("uniform:0.01,0.05", LatencySpec("uniform", 0.01, 0.05)),
        ("lognormal:0.2,0.5", LatencySpec("lognormal", 0.2, 0.5)),
    ],
)
def test_parse_accepts_each_form(text: str, spec: LatencySpec) -> None:
    assert LatencySpec.parse(text) == spec


@pytest.mark.parametrize(
    "text", ["slow", "uniform:0.1", "fixed:-1", "gamma:1,2", "uniform:0.5,0.1"]
)
def test_parse_rejects_bad_specs_with_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError):
        LatencySpec.parse(text)


def test_uniform_samples_stay_in_bounds_and_are_seeded() -> None:
    spec = LatencySpec("uniform", 0.01, 0.03)
    sampler = LatencySampler(spec, seed=5)
    draws = [sampler.sample() for _ in range(2000)]
    assert all(0.01 <= d <= 0.03 for d in draws)
    again = LatencySampler(spec, seed=5)
    assert [again.sample() for _ in range(10)] == draws[:10]
    other = LatencySampler(spec, seed=6)
    assert [other.sample() for _ in range(10)] != draws[:10]
    assert statistics.fmean(draws) == pytest.approx(0.02, abs=0.001)


def test_lognormal_has_the_given_median_and_spread() -> None:
    sampler = LatencySampler(LatencySpec("lognormal", 0.2, 0.5), seed=3)
    draws = [sampler.sample() for _ in range(20_000)]
    assert statistics.median(draws) == pytest.approx(0.2, rel=0.03)
    # Log-scale sd is sigma: the 84th percentile sits near median * e^sigma.
    assert sorted(draws)[int(0.8413 * len(draws))] == pytest.approx(0.2 * 2.71828**0.5, rel=0.05)


def test_zero_latency_is_detected_so_the_server_skips_sleeping() -> None:
    assert LatencySpec().is_zero
    assert LatencySpec("lognormal", 0.0, 1.0).is_zero
    assert not LatencySpec("uniform", 0.0, 0.1).is_zero


async def test_server_sleeps_the_sampled_latency_before_answering() -> None:
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    spec = LatencySpec("uniform", 0.5, 2.0)
    config = ServerConfig(latency=spec, latency_seed=9, sleep=fake_sleep)
    async with running_server(config) as server, aiohttp.ClientSession() as client:
        for _ in range(5):
            async with client.post(server.base_url + "/chat/completions", json=openai_body()) as r:
                assert r.status == 200
    reference = LatencySampler(spec, seed=9)
    assert slept == [reference.sample() for _ in range(5)]
