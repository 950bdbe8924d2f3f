"""import-evidence: the pack becomes our stream, byte for byte, or nothing is written."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from cotaudit.cli import main
from cotaudit.domain.problem import Problem
from cotaudit.errors import UsageError
from evaluator.source import iter_records
from runner.evidence_pack import import_evidence

PACK = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "grounding-audit-gpt4o"

PREMISES = [{"id": "P1", "text": "Bempuses are bimpuses"}, {"id": "P2", "text": "Alex is a bempus"}]
PROMPT = "Given the following premises:\n1. Bempuses are bimpuses\n2. Alex is a bempus\n\nQ é"
TEXT = "Step 1: Alex is a bimpus.\n\nAnswer: True \u2014 \u00e9"


def _output(text: str, **extra: Any) -> dict[str, Any]:
    base = {
        "raw_response": text,
        "model": "gpt-4o-2024-08-06",
        "temperature": 0,
        "timestamp": "2026-07-10T04:42:04+00:00",
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
        "problem_id": "p001",
        "prompt": PROMPT,
    }
    base.update(extra)
    return base


def make_pack(root: Path, *, with_summary: bool = True) -> Path:
    """A one-problem pack with the real layout (2 premises, all 6 probes)."""
    problems = root / "data" / "prontoqa_50"
    problems.mkdir(parents=True)
    (problems / "p001.json").write_text(
        json.dumps(
            {
                "problem_id": "p001",
                "premises": PREMISES,
                "question": "Is Alex a bimpus?",
                "answer": True,
                "proof_tree": [
                    {"step": 1, "conclusion": "is(alex, bimpus)", "depends_on": ["P2", "P1"]}
                ],
            }
        )
    )
    (problems / "proof_trees.json").write_text("{}")  # not a problem file: ignored
    pdir = root / "evidence" / "gpt-4o" / "p001"
    (pdir / "probes").mkdir(parents=True)
    (pdir / "original_cot.json").write_text(json.dumps(_output(TEXT, probe_type="original")))
    for pid, target in (("P1", "bimpus"), ("P2", "bempus")):
        for kind in ("semantic", "local"):
            out = _output(
                f"{kind} {pid} text",
                probe_type=kind,
                target_premise=pid,
                modified_premises=PREMISES,
                substitution={target: "zq" + target},
                original_text=None,
                rephrased_text=None,
            )
            (pdir / "probes" / f"{kind}_{pid}.json").write_text(json.dumps(out))
        out = _output(
            f"surface {pid} text",
            probe_type="surface",
            target_premise=pid,
            modified_premises=PREMISES,
            substitution=None,
            original_text="Bempuses are bimpuses",
            rephrased_text="Every bempus is a bimpus",
        )
        (pdir / "probes" / f"surface_{pid}.json").write_text(json.dumps(out))
    if with_summary:
        sc = root / "baselines" / "self_consistency" / "gpt-4o"
        sc.mkdir(parents=True)
        summary = {
            "problem_id": "p001",
            "model": "gpt-4o-2024-08-06",
            "n_samples": 5,
            "temperature": 0.7,
            "step_verdicts": {
                "1": {
                    "consistent": True,
                    "agreement": 1.0,
                    "majority_conclusion": "is(alex, bimpus)",
                    "n_valid": 5,
                    "n_unique": 1,
                }
            },
        }
        (sc / "p001_samples.json").write_text(json.dumps(summary))
    return root


def test_fake_pack_maps_every_field(tmp_path: Path) -> None:
    pack = make_pack(tmp_path / "pack")
    result = import_evidence(pack, "gpt-4o", tmp_path / "run")
    assert (result.problems, result.responses, result.summaries) == (1, 7, 1)
    records = list(iter_records(tmp_path / "run" / "results.jsonl"))
    assert [r["kind"] for r in records] == ["problem"] + ["response"] * 7 + ["sample_summary"]
    problem = Problem.from_record(records[0])
    assert problem.proof[0].depends_on == ("P2", "P1")
    original = records[1]
    assert original["text"] == TEXT  # non-ASCII kept exactly
    assert original["messages"] == [{"role": "user", "content": PROMPT}]
    assert original["model"] == {
        "provider": "openai",
        "model": "gpt-4o-2024-08-06",
        "host": "api.openai.com",
    }
    assert original["started_at"] == original["finished_at"] == "2026-07-10T04:42:04+00:00"
    assert original["error"] is None and original["latency_s"] is None
    assert original["request_id"] == "gpt-4o/p001/original/-/0"
    conditions = [(r["condition"], r["target_premise"]) for r in records[1:8]]
    assert conditions == [
        ("original", None),
        ("consistent", "P1"),
        ("local", "P1"),
        ("surface", "P1"),
        ("consistent", "P2"),
        ("local", "P2"),
        ("surface", "P2"),
    ]
    assert records[2]["probe"]["substitution"] == {"bimpus": "zqbimpus"}
    assert records[2]["probe"]["premises"] == PREMISES
    assert records[4]["probe"]["rephrase"] == {
        "from": "Bempuses are bimpuses",
        "to": "Every bempus is a bimpus",
    }
    assert len({r["cache_key"] for r in records[1:8]}) == 1  # same prompt in this fake pack
    summary = records[8]
    assert summary["steps"][0]["majority_conclusion"] == "is(alex, bimpus)"
    manifest = orjson.loads((tmp_path / "run" / "manifest.json").read_bytes())
    assert manifest["model"] == "gpt-4o" and manifest["responses"] == 7


def test_pack_without_summaries_has_no_summary_records(tmp_path: Path) -> None:
    pack = make_pack(tmp_path / "pack", with_summary=False)
    assert import_evidence(pack, "gpt-4o", tmp_path / "run").summaries == 0


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda p: (p / "evidence/gpt-4o/p001/probes/local_P2.json").write_text("{"), "local_P2"),
        (
            lambda p: (p / "evidence/gpt-4o/p001/original_cot.json").write_text(
                json.dumps({"model": "m"})
            ),
            "raw_response",
        ),
        (lambda p: (p / "data/prontoqa_50/p001.json").write_text('{"premises": []}'), "proof_tree"),
        (
            lambda p: (p / "evidence/gpt-4o/p001/original_cot.json").write_text(
                json.dumps(_output("tampered", sha256="0" * 64))
            ),
            "sha256",
        ),
    ],
)
def test_bad_pack_names_file_and_field_and_writes_nothing(
    tmp_path: Path, damage: Any, message: str
) -> None:
    pack = make_pack(tmp_path / "pack")
    damage(pack)
    out = tmp_path / "run"
    with pytest.raises(UsageError, match=message):
        import_evidence(pack, "gpt-4o", out)
    assert not out.exists()


def test_cli_exit_2_for_unknown_model_and_missing_pack(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = make_pack(tmp_path / "pack")
    out = tmp_path / "run"
    assert main(["import-evidence", str(pack), "--model", "claude", "--out", str(out)]) == 2
    assert "gpt-4o" in capsys.readouterr().err  # the message lists the models it has
    assert main(["import-evidence", str(tmp_path / "nope"), "--out", str(out)]) == 2
    assert not out.exists()


def test_refuses_to_overwrite_a_stream(tmp_path: Path) -> None:
    pack = make_pack(tmp_path / "pack")
    import_evidence(pack, "gpt-4o", tmp_path / "run")
    with pytest.raises(UsageError, match="already holds"):
        import_evidence(pack, "gpt-4o", tmp_path / "run")


def test_real_pack_imports_byte_identical(tmp_path: Path) -> None:
    if not PACK.is_dir():
        pytest.skip("the GPT-4o evidence pack (../shared/data/grounding-audit-gpt4o) is absent")
    result = import_evidence(PACK, "gpt-4o", tmp_path / "run")
    assert (result.problems, result.responses, result.summaries) == (50, 890, 50)
    for record in iter_records(result.stream):
        if record["kind"] != "response":
            continue
        source = orjson.loads((PACK / record["imported_from"]).read_bytes())
        assert record["text"] == source["raw_response"]
        assert record["messages"][0]["content"] == source["prompt"]
        assert hashlib.sha256(record["text"].encode()).hexdigest() == source["sha256"]


def test_iter_sample_summaries_for_replayed_runs(tmp_path: Path) -> None:
    from runner.evidence_pack import iter_sample_summaries

    pack = make_pack(tmp_path / "pack")
    (summary,) = iter_sample_summaries(pack, "gpt-4o", endpoint="replayed")
    assert summary["kind"] == "sample_summary"
    assert (summary["endpoint"], summary["problem_id"]) == ("replayed", "p001")
    assert summary["steps"][0]["agreement"] == 1.0
    assert list(iter_sample_summaries(pack, "no-such-model")) == []


def _import(pack: Path, out: Path, *extra: str) -> int:
    return main(["import-evidence", str(pack), "--out", str(out), *extra])


def test_a_pack_path_inside_or_around_the_pack_names_the_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = make_pack(tmp_path / "pack")
    out = tmp_path / "run"
    for inside in (pack / "evidence", pack / "evidence" / "gpt-4o", pack / "data"):
        assert _import(inside, out) == 2
        err = capsys.readouterr().err
        assert f"{inside}: this is inside the evidence pack {pack}, not its root" in err, err
        assert f"Give PACK_DIR {pack}." in err
    assert _import(tmp_path, out) == 2  # the directory that holds the pack
    assert f"Give PACK_DIR {pack}." in capsys.readouterr().err
    assert not out.exists()


def test_a_missing_pack_and_a_file_say_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert _import(tmp_path / "nope", out) == 2
    assert f"{tmp_path / 'nope'}: no such file or directory" in capsys.readouterr().err
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n", encoding="utf-8")
    assert _import(notes, out) == 2
    err = capsys.readouterr().err
    assert f"{notes}: this is a file, not the evidence pack's directory" in err, err
    assert "the directory holding data/ and evidence/" in err
    assert not out.exists()


@pytest.mark.parametrize("model", ["../evidence/gpt-4o", "", "gpt-4o/../gpt-4o", "."])
def test_model_is_one_of_the_packs_model_directories(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], model: str
) -> None:
    # "../evidence/gpt-4o" used to import, its endpoint named "../evidence/gpt-4o".
    pack = make_pack(tmp_path / "pack")
    out = tmp_path / "run"
    assert _import(pack, out, "--model", model) == 2
    err = capsys.readouterr().err
    assert f"pack has no evidence for model {model!r}" in err, err
    assert "Use --model with one of: gpt-4o." in err
    assert not out.exists()


def test_a_manifest_alone_in_out_is_not_written_over(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = make_pack(tmp_path / "pack")
    out = tmp_path / "mine"
    out.mkdir()
    (out / "manifest.json").write_text('{"mine": 1}\n', encoding="utf-8")
    assert _import(pack, out) == 2
    assert f"{out / 'manifest.json'}: run directory already holds a manifest.json" in (
        capsys.readouterr().err
    )
    assert (out / "manifest.json").read_text(encoding="utf-8") == '{"mine": 1}\n'
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json"]


def test_another_runs_directory_is_left_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = make_pack(tmp_path / "pack")
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.jsonl").write_bytes(b'{"kind": "problem", "problem_id": "x"}\n')
    (run / "manifest.json").write_bytes(b'{"kind": "manifest"}\n')
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    assert _import(pack, run) == 2
    assert "already holds a results.jsonl" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before


def test_out_inside_the_pack_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A results.jsonl at the pack's root would make replay (reproduce) read it, not the pack.
    pack = make_pack(tmp_path / "pack")
    before = sorted(p.relative_to(pack) for p in pack.rglob("*"))
    for out in (pack, pack / "imported"):
        assert _import(pack, out) == 2
        err = capsys.readouterr().err
        assert f"--out: {out} is inside the evidence pack {pack}" in err, err
    assert sorted(p.relative_to(pack) for p in pack.rglob("*")) == before


def _rewrite(path: Path, change: Any) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data), encoding="utf-8")


@pytest.mark.parametrize(
    ("file", "change", "message"),
    [
        (
            "evidence/gpt-4o/p001/probes/local_P1.json",
            lambda d: d.update(modified_premises=[1, 2]),
            "local_P1.json: modified_premises[0]: a modified premise is not an object",
        ),
        (
            "baselines/self_consistency/gpt-4o/p001_samples.json",
            lambda d: d["step_verdicts"]["1"].update(agreement="high"),
            "p001_samples.json: step_verdicts.1: malformed step summary",
        ),
        (
            "baselines/self_consistency/gpt-4o/p001_samples.json",
            lambda d: d.update(step_verdicts={"first": {"agreement": 1.0}}),
            "p001_samples.json: step_verdicts.first: malformed step summary",
        ),
        (
            "data/prontoqa_50/p001.json",
            lambda d: d["proof_tree"][0].update(depends_on=5),
            "p001.json: premises/proof_tree: malformed premise or proof step ('int' object is "
            "not iterable)",
        ),
        (
            "evidence/gpt-4o/p001/original_cot.json",
            lambda d: d["usage"].update(prompt_tokens="3"),
            'original_cot.json: usage.prompt_tokens: the string "3" is not a token count',
        ),
        (
            "evidence/gpt-4o/p001/probes/surface_P2.json",
            lambda d: d["usage"].update(completion_tokens=-4),
            "surface_P2.json: usage.completion_tokens: -4 is not a token count",
        ),
        (
            "evidence/gpt-4o/p001/probes/semantic_P1.json",
            lambda d: d["usage"].update(completion_tokens_details={"reasoning_tokens": 1.5}),
            "semantic_P1.json: usage.completion_tokens_details.reasoning_tokens: 1.5 is not a "
            "token count",
        ),
        (
            "evidence/gpt-4o/p001/original_cot.json",
            lambda d: d.update(usage=[3, 4]),
            "original_cot.json: usage: the list [3, 4] is not an object of token counts",
        ),
    ],
    ids=[
        "premise not an object",
        "agreement not a number",
        "step key",
        "depends_on",
        "usage string",
        "usage negative",
        "usage details fraction",
        "usage not an object",
    ],
)
def test_malformed_values_are_one_message_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], file: str, change: Any, message: str
) -> None:
    pack = make_pack(tmp_path / "pack")
    _rewrite(pack / file, change)
    out = tmp_path / "run"
    assert _import(pack, out) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert not out.exists()


def test_usage_is_kept_as_recorded_details_and_all(tmp_path: Path) -> None:
    pack = make_pack(tmp_path / "pack")
    usage = {
        "prompt_tokens": 3,
        "completion_tokens": 4,
        "total_tokens": 7,
        "completion_tokens_details": {"reasoning_tokens": 0},
    }
    _rewrite(pack / "evidence/gpt-4o/p001/original_cot.json", lambda d: d.update(usage=usage))
    _rewrite(pack / "evidence/gpt-4o/p001/probes/local_P1.json", lambda d: d.pop("usage"))
    import_evidence(pack, "gpt-4o", tmp_path / "run")
    records = {
        r["request_id"]: r
        for r in iter_records(tmp_path / "run" / "results.jsonl")
        if r["kind"] == "response"
    }
    assert records["gpt-4o/p001/original/-/0"]["usage"] == usage
    assert records["gpt-4o/p001/local/P1/0"]["usage"] is None
