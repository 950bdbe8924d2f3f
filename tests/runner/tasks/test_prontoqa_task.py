from __future__ import annotations

import importlib.util
import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cotaudit.errors import UsageError
from runner.request_spec import EndpointIdentity
from runner.tasks.prontoqa_task import ProntoQATask, from_config
from runner.tasks.registry import build_task

ENDPOINT = EndpointIdentity(
    name="ep",
    provider="openai",
    model="gpt-x",
    host="api.example.com",
    cache_identity="https://api.example.com/v1",
    params={"max_tokens": 256},
)
LOCAL = EndpointIdentity(
    name="sim", provider="local", model="faithful", host="127.0.0.1", cache_identity="local"
)


def _task(tmp_path: Path, **table: Any) -> ProntoQATask:
    task = build_task({"kind": "prontoqa", **table}, config_dir=tmp_path, where="sweep.toml")
    assert isinstance(task, ProntoQATask)
    return task


def test_generated_plan_counts_and_fields(tmp_path: Path) -> None:
    task = _task(tmp_path, source="generate", n=6, seed=4, hops_min=2, hops_max=4)
    problems = list(task.problems())
    assert len(problems) == 6
    total = 0
    for problem in problems:
        specs = list(task.requests(problem, ENDPOINT))
        k = len(problem.premises)
        assert len(specs) == 1 + 3 * k + 5 == task.requests_per_problem(problem)
        total += len(specs)
        conditions = Counter(s.condition for s in specs)
        assert conditions == {"original": 1, "consistent": k, "local": k, "surface": k, "sample": 5}
        assert all(s.problem_id == problem.problem_id and s.task == "prontoqa" for s in specs)
        assert len({s.request_id for s in specs}) == len(specs)
        # A consistent probe whose predicate occurs only in Pj is the local probe: one entry.
        distinct = {
            (s.messages[0]["content"], s.params["temperature"], s.sample_index) for s in specs
        }
        assert len({s.cache_key for s in specs}) == len(distinct) > 3 * k
        for spec in specs:
            assert spec.params["temperature"] == (0.7 if spec.condition == "sample" else 0.0)
            assert spec.params["max_tokens"] == 256
            if spec.condition in ("original", "sample"):
                assert spec.target_premise is None and spec.probe is None
            else:
                assert spec.target_premise is not None and spec.probe is not None
                assert [p["id"] for p in spec.probe["premises"]] == [p.id for p in problem.premises]
                key = "rephrase" if spec.condition == "surface" else "substitution"
                assert key in spec.probe
        assert sorted(s.sample_index for s in specs if s.condition == "sample") == list(range(5))
        # Probes change the prompt; samples repeat the original's.
        original = specs[0].messages
        assert all(s.messages == original for s in specs if s.condition == "sample")
        assert all(s.messages != original for s in specs if s.target_premise)
    assert total > 6 * 10


def test_samples_repeats_and_limit(tmp_path: Path) -> None:
    task = _task(
        tmp_path,
        source="generate",
        n=10,
        limit=3,
        samples=2,
        sample_temperature=1.0,
        probe_repeats=3,
    )
    problems = list(task.problems())
    assert len(problems) == 3
    specs = list(task.requests(problems[0], ENDPOINT))
    k = len(problems[0].premises)
    assert len(specs) == 1 + 9 * k + 2
    repeats = [s.sample_index for s in specs if s.condition == "local" and s.target_premise == "P1"]
    assert repeats == [0, 1, 2]
    assert {s.params["temperature"] for s in specs if s.condition == "sample"} == {1.0}


def test_paper50_plan_matches_the_pack(tmp_path: Path, pack_dir: Path) -> None:
    task = _task(
        tmp_path,
        source="paper50",
        path=str(pack_dir / "data" / "prontoqa_50"),
        fresh_words_from=str(pack_dir / "evidence" / "gpt-4o"),
    )
    stored = set()
    for path in (pack_dir / "evidence" / "gpt-4o").glob("p*/*/*.json"):
        if path.parent.name == "probes":
            stored.add(json.loads(path.read_text())["prompt"])
    for path in (pack_dir / "evidence" / "gpt-4o").glob("p*/original_cot.json"):
        stored.add(json.loads(path.read_text())["prompt"])
    planned = Counter()
    prompts = set()
    for problem in task.problems():
        for spec in task.requests(problem, ENDPOINT):
            planned[spec.condition] += 1
            prompts.add(spec.messages[0]["content"])
    assert planned == {
        "original": 50,
        "consistent": 280,
        "local": 280,
        "surface": 280,
        "sample": 250,
    }
    assert prompts == stored  # every planned prompt is a recorded one, and back


def test_logiclm_and_native_sources(tmp_path: Path, dev_json: Path, native_dir: Path) -> None:
    task = _task(tmp_path, source="logiclm", path=str(dev_json), limit=2, samples=0)
    problems = list(task.problems())
    assert [p.problem_id for p in problems] == ["ProntoQA_1", "ProntoQA_2"]
    assert len(list(task.requests(problems[0], ENDPOINT))) == 1 + 3 * 18
    native = _task(tmp_path, source="native", path=str(native_dir))
    assert len(list(native.problems())) == 150
    one = _task(tmp_path, source="native", path=str(native_dir / "2hop.json"))
    assert {p.hops for p in one.problems()} == {2}


def test_relative_paths_resolve_against_the_config_dir(tmp_path: Path) -> None:
    problem = {
        "problem_id": "q1",
        "premises": [
            {"id": "P1", "text": "Bempuses are bimpuses"},
            {"id": "P2", "text": "Alex is a bempus"},
        ],
        "question": "Is Alex a bimpus?",
        "answer": True,
        "proof_tree": [{"step": 1, "conclusion": "is(alex, bimpus)", "depends_on": ["P2", "P1"]}],
    }
    (tmp_path / "probs").mkdir()
    (tmp_path / "probs" / "p001.json").write_text(json.dumps(problem))
    task = _task(
        tmp_path, source="paper50", path="probs", fresh_words={"q1": {"bimpus": "frondus"}}
    )
    (loaded,) = task.problems()
    consistent = [s for s in task.requests(loaded, ENDPOINT) if s.condition == "consistent"]
    assert consistent[0].probe == {
        "substitution": {"bimpus": "frondus"},
        "premises": [
            {"id": "P1", "text": "Bempuses are fronduses"},
            {"id": "P2", "text": "Alex is a bempus"},
        ],
    }


def test_endpoint_records(tmp_path: Path) -> None:
    task = _task(tmp_path, source="generate", n=1)
    (problem,) = task.problems()
    assert list(task.endpoint_records(problem, ENDPOINT)) == []
    records = list(task.endpoint_records(problem, LOCAL))
    reasoners = importlib.util.find_spec("runner.server.reasoners")
    if reasoners is not None:  # written by another engineer; the hook tolerates its absence
        assert len(records) == 1
        assert records[0]["kind"] == "truth"
        assert records[0]["problem_id"] == problem.problem_id
        assert len(records[0]["steps"]) >= problem.hops
    echo = EndpointIdentity("e", "local", "echo", "127.0.0.1", "local")
    assert list(task.endpoint_records(problem, echo)) == []


@pytest.mark.parametrize(
    ("table", "where"),
    [
        ({"source": "nope"}, "[task].source"),
        ({"source": "generate", "n": 3, "colour": "red"}, "[task].colour"),
        ({"source": "generate", "n": 3, "path": "x"}, "[task].path"),
        ({"source": "paper50", "path": "x", "n": 3}, "[task].n"),
        ({"source": "paper50", "path": "does-not-exist"}, "[task].path"),
        ({"source": "paper50"}, "[task].path"),
        ({"source": "generate"}, "[task].n"),
        ({"source": "generate", "n": 0}, "[task].n"),
        ({"source": "generate", "n": 3, "hops_min": 4, "hops_max": 2}, "[task].hops_max"),
        ({"source": "generate", "n": 3, "distractors": [3, 1]}, "[task].distractors"),
        ({"source": "generate", "n": 3, "styles": ["no"]}, "[task].styles"),
        ({"source": "generate", "n": 3, "samples": -1}, "[task].samples"),
        ({"source": "generate", "n": 3, "sample_temperature": 3}, "[task].sample_temperature"),
        ({"source": "generate", "n": 3, "probe_repeats": 0}, "[task].probe_repeats"),
        ({"source": "generate", "n": 3, "template": "fancy"}, "[task].template"),
        ({"source": "generate", "n": 3, "limit": True}, "[task].limit"),
        ({"source": "generate", "n": 3, "fresh_words": {"p1": "x"}}, "[task].fresh_words"),
        ({"source": "generate", "n": 3, "sample_temperature": math.nan}, "[task].sample_t"),
        ({"source": "generate", "n": 10**23}, "[task].n"),
        ({"source": "generate", "n": 3, "seed": 10**23}, "[task].seed"),
        ({"source": "generate", "n": 3, "distractors": [0, 10**23]}, "[task].distractors"),
        ({"source": "generate", "n": 3, "distractors": 10**23}, "[task].distractors"),
        ({"source": "generate", "n": 3, "samples": 2**64 - 1}, "[task].samples"),
    ],
)
def test_config_errors_name_the_key(tmp_path: Path, table: dict[str, Any], where: str) -> None:
    with pytest.raises(UsageError) as info:
        from_config({"kind": "prontoqa", **table}, config_dir=tmp_path, where="sweep.toml")
    assert f"sweep.toml: {where}" in str(info.value)


def test_bad_simulated_model_options_are_a_usage_error(tmp_path: Path) -> None:
    task = _task(tmp_path, source="generate", n=1)
    (problem,) = task.problems()
    bad = EndpointIdentity("sim", "local", "shortcut:p=7", "127.0.0.1", "local")
    with pytest.raises(UsageError, match="endpoint 'sim': model"):
        list(task.endpoint_records(problem, bad))


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({}, "missing 'source'. Use one of:"),
        ({"source": ["generate"]}, 'unknown source the list ["generate"]'),
        ({"source": "generate", "n": 3, "styles": ["no"]}, 'got the list ["no"]'),
        (
            {"source": "generate", "n": 3, "ontology": 3},
            "one of fictional, true, false, number, got 3",
        ),
        ({"source": "generate", "n": 3, "distractors": "two"}, 'got the string "two"'),
        (
            {"source": "generate", "n": 3, "sample_temperature": math.inf},
            "'sample_temperature' must be a finite number in [0, 2], got inf",
        ),
    ],
)
def test_config_messages_show_values_in_toml_terms(
    tmp_path: Path, table: dict[str, Any], message: str
) -> None:
    with pytest.raises(UsageError) as info:
        from_config({"kind": "prontoqa", **table}, config_dir=tmp_path, where="sweep.toml")
    text = str(info.value)
    assert message in text, text
    assert "None" not in text and "['" not in text
