"""cotaudit evaluate + verify on a small stream: holds, then one changed byte is caught."""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson
import pytest

from cotaudit.cli import main
from tests.evaluator.test_pipeline import records, write_stream


@pytest.fixture
def evaluated(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    write_stream(run / "results.jsonl", records())
    assert main(["evaluate", str(run), "--n-boot", "20", "--no-figures"]) == 0
    return run


def test_verify_holds_on_an_untouched_run(
    evaluated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", str(evaluated)]) == 0
    out = capsys.readouterr().out
    assert "every file, certificate (6) and number" in out
    manifest = (evaluated / "eval" / "evaluation.json").read_bytes()
    assert f"root {hashlib.sha256(manifest).hexdigest()}" in out


def test_one_changed_byte_in_a_certificate_fails_verify(
    evaluated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = evaluated / "eval" / "certificates.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    cert = orjson.loads(lines[3])
    assert b'"verdict":"GROUNDED"' in lines[3] or b'"verdict":"INSENSITIVE"' in lines[3]
    lines[3] = lines[3].replace(b'"cot_step":', b'"cot_step": ', 1)  # whitespace only: same JSON
    path.write_bytes(b"".join(lines))
    capsys.readouterr()
    # The certificates still hold, but the file is not the one the evaluation wrote.
    assert main(["verify", str(evaluated)]) == 1
    err = capsys.readouterr().err
    assert err.count("FAIL") == 1 and "certificates.jsonl: changed since the evaluation" in err
    assert "verify: 1 failure\n" in err
    lines[3] = lines[3].replace(b"GROUNDED", b"GROUNDEE").replace(b"INSENSITIVE", b"INSENSITIVF")
    path.write_bytes(b"".join(lines))
    assert main(["verify", str(evaluated)]) == 1
    err = capsys.readouterr().err
    assert cert["id"] in err and "seal" in err
    # The file's hash, then the seal and the recomputation of that certificate only.
    assert err.count("FAIL") == 3 and err.count(cert["id"]) == 2
    assert "verify: 3 failures\n" in err


def test_one_changed_byte_in_a_raw_output_fails_verify(
    evaluated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stream = evaluated / "results.jsonl"
    data = stream.read_bytes()
    # Change one byte of the surface P2 output's text (not its meaning: 'Since' -> 'since').
    marker = b'"request_id":"ep/q1/surface/P2/0"'
    at = data.index(marker)
    text_at = data.index(b'"text":"Step 1: Since', at) + len(b'"text":"Step 1: ')
    stream.write_bytes(data[:text_at] + b"s" + data[text_at + 1 :])
    capsys.readouterr()
    assert main(["verify", str(evaluated)]) == 1
    err = capsys.readouterr().err
    assert "ep/q1/surface/P2/0 does not match its hash" in err
    assert "ep/q1/S1/P2" in err and "ep/q1/S2/P2" in err
    assert "ep/q1/S1/P1" not in err  # certificates of other premises did not use that output


def test_verify_without_evaluation_exits_2(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    write_stream(run / "results.jsonl", records())
    assert main(["verify", str(run)]) == 2


def test_evaluate_stdin_needs_out_and_reads_the_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io
    import sys

    data = b"".join(orjson.dumps(r) + b"\n" for r in records()) + b'{"kind": "resp'
    assert main(["evaluate", "-", "--n-boot", "0", "--no-figures"]) == 2
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    out = tmp_path / "out"
    assert main(["evaluate", "-", "--out", str(out), "--n-boot", "0", "--no-figures"]) == 0
    report = orjson.loads((out / "report.json").read_bytes())
    assert report["models"]["ep"]["certificates"]["total"] == 6
    assert (out / "report.md").read_text().startswith("# cotaudit evaluation")
    assert (out / "rows.csv").read_text().splitlines()[0].startswith("model,row,precision")


def test_verify_recomputes_with_the_recorded_options(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    write_stream(run / "results.jsonl", records())
    args = ["--n-boot", "0", "--no-figures", "--cascade-mode", "dag_parent", "--first-repeat"]
    assert main(["evaluate", str(run), *args]) == 0
    report = orjson.loads((run / "eval" / "report.json").read_bytes())
    assert report["options"]["cascade_mode"] == "dag_parent"
    assert report["options"]["majority"] is False
    assert main(["verify", str(run)]) == 0


def test_extra_records_add_the_self_consistency_row(tmp_path: Path) -> None:
    from evaluator.commands.evaluate import evaluate
    from evaluator.pipeline import EvaluateOptions

    run = tmp_path / "run"
    run.mkdir()
    write_stream(run / "results.jsonl", records())
    summary = {
        "kind": "sample_summary",
        "schema": 1,
        "endpoint": "ep",
        "problem_id": "q1",
        "model": {"provider": "local", "model": "faithful", "host": "127.0.0.1:1"},
        "n_samples": 5,
        "temperature": 0.7,
        "steps": [
            {
                "cot_step": 1,
                "majority_conclusion": "is(alex, bimpus)",
                "agreement": 1.0,
                "n_valid": 5,
                "n_unique": 1,
                "consistent": True,
            },
            {
                "cot_step": 2,
                "majority_conclusion": "is(alex, bompus)",
                "agreement": 0.6,
                "n_valid": 5,
                "n_unique": 2,
                "consistent": False,
            },
        ],
        "source_sha256": "0" * 64,
    }
    options = EvaluateOptions(n_boot=0)
    plain = evaluate(run / "results.jsonl", tmp_path / "a", options, figures=False)
    assert "self_consistency_full" not in plain["models"]["ep"]["rows"]
    report = evaluate(
        run / "results.jsonl", tmp_path / "b", options, figures=False, extra_records=[summary]
    )
    row = report["models"]["ep"]["rows"]["self_consistency_full"]
    assert (row["tp"], row["fp"], row["fn"], row["tn"]) == (2, 1, 1, 2)
    # Certificates do not depend on the baseline: identical either way.
    a = (tmp_path / "a" / "certificates.jsonl").read_bytes()
    assert a == (tmp_path / "b" / "certificates.jsonl").read_bytes()


def test_verify_refuses_certificates_of_an_earlier_format_and_says_to_re_evaluate(
    evaluated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from evaluator.certificates import FORMAT_FIELD, seal

    path = evaluated / "eval" / "certificates.jsonl"
    old = []
    for line in path.read_bytes().splitlines():
        cert = orjson.loads(line)
        del cert[FORMAT_FIELD]  # what evaluate wrote before the format field existed
        old.append(orjson.dumps(seal(cert), option=orjson.OPT_SORT_KEYS))
    path.write_bytes(b"\n".join(old) + b"\n")
    capsys.readouterr()
    assert main(["verify", str(evaluated)]) == 2
    err = capsys.readouterr().err
    assert "format 1" in err and "cotaudit evaluate" in err
    assert main(["evaluate", str(evaluated), "--n-boot", "20", "--no-figures"]) == 0
    assert main(["verify", str(evaluated)]) == 0


def test_extra_records_give_the_same_evaluation_in_worker_processes(tmp_path: Path) -> None:
    # An extra record has no line of the stream: it travels to a worker as JSON all the same.
    from evaluator.commands.evaluate import evaluate
    from evaluator.pipeline import EvaluateOptions

    run = tmp_path / "run"
    run.mkdir()
    write_stream(run / "results.jsonl", records())
    summary = {
        "kind": "sample_summary",
        "schema": 1,
        "endpoint": "ep",
        "problem_id": "q1",
        "model": {"provider": "local", "model": "faithful", "host": "127.0.0.1:1"},
        "n_samples": 5,
        "temperature": 0.7,
        "steps": [
            {
                "cot_step": 1,
                "majority_conclusion": "is(alex, bimpus)",
                "agreement": 0.6,
                "n_valid": 5,
                "n_unique": 2,
                "consistent": False,
            }
        ],
        "source_sha256": "0" * 64,
    }
    options = EvaluateOptions(n_boot=0)
    reports = [
        evaluate(
            run / "results.jsonl",
            tmp_path / f"w{workers}",
            options,
            figures=False,
            extra_records=[summary],
            workers=workers,
        )
        for workers in (0, 2)
    ]
    assert "self_consistency_full" in reports[0]["models"]["ep"]["rows"]
    assert reports[0]["models"] == reports[1]["models"]
    for name in ("certificates.jsonl", "report.md"):
        assert (tmp_path / "w0" / name).read_bytes() == (tmp_path / "w2" / name).read_bytes()


DOCS = Path(__file__).resolve().parents[2] / "docs" / "certificates.md"


def test_docs_certificates_name_every_field_and_the_current_format(evaluated: Path) -> None:
    """docs/certificates.md is the published format: its field table names every top-level
    field a certificate has, and its "current" row is the format this code writes."""
    from evaluator.certificates import CERTIFICATE_FORMAT

    text = DOCS.read_text()
    documented: set[str] = set()
    for line in text.splitlines():
        if line.startswith("| `"):
            first_cell = line.split("|")[1]
            documented.update(part.strip("` ") for part in first_cell.split(","))
    lines = (evaluated / "eval" / "certificates.jsonl").read_bytes().splitlines()
    fields = set().union(*(orjson.loads(line).keys() for line in lines))
    assert fields - documented == set()
    assert f"| {CERTIFICATE_FORMAT} | current |" in text
    assert f"certificate format ({CERTIFICATE_FORMAT};" in text
