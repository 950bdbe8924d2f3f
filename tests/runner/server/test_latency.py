"""Latency specs parse, sample from the right distribution, and delay server answers."""

from __future__ import annotations

import math
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


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # What was typed and which value is wrong, not the parsed internals ("-1.0, 0.0").
        ("fixed:-1", "latency 'fixed:-1': SECONDS must be finite and >= 0, got -1"),
        ("-0.5", "latency '-0.5': SECONDS must be finite and >= 0, got -0.5"),
        ("lognormal:nan,0.5", "latency 'lognormal:nan,0.5': MEDIAN must be finite and >= 0"),
        ("uniform:0.1,inf", "latency 'uniform:0.1,inf': HIGH must be finite and >= 0, got inf"),
        ("uniform:a,1", "latency 'uniform:a,1': LOW 'a' is not a number"),
        ("uniform:0.5,0.1", "latency 'uniform:0.5,0.1': LOW 0.5 is above HIGH 0.1"),
        ("lognormal:300,600", "latency 'lognormal:300,600': SIGMA must be <= 10, got 600"),
        ("bogus", "cannot read latency 'bogus'"),
        ("fixed:1,2", "cannot read latency 'fixed:1,2'"),
    ],
)
def test_a_refusal_quotes_the_spec_as_typed_and_names_the_value(text: str, message: str) -> None:
    with pytest.raises(UsageError) as info:
        LatencySpec.parse(text)
    assert info.value.what.startswith(message), info.value.what
    assert info.value.where == "--latency"
    assert info.value.fix  # what to give instead


def test_a_sigma_that_could_overflow_is_refused_where_the_spec_is_made() -> None:
    # lognormal:0.3,1000 used to be accepted and then overflowed in most draws: every such
    # request was a 500 (OverflowError in math.exp).
    with pytest.raises(UsageError, match="SIGMA must be <= 10"):
        LatencySpec("lognormal", 0.3, 1000.0)
    sampler = LatencySampler(LatencySpec("lognormal", 0.3, 10.0), seed=1)
    assert all(math.isfinite(sampler.sample()) for _ in range(10_000))
