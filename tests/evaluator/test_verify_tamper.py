"""``cotaudit verify`` against someone who edits an evaluation and then reseals its manifest.

``evaluation.json`` lists every file's SHA-256, which anyone can recompute: each test here
edits the evaluation, writes the new hashes into the manifest (as a forger would), and checks
that verify still fails, naming what and where, from the recomputation itself.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import orjson
import pytest

from cotaudit.cli import main
from cotaudit.schema import canonical_json
from tests.evaluator.test_pipeline import records, write_stream

PACK_ROWS = {
    "main": {
        "A_consistent_full": {"f1": 0.5, "tp": 1, "fp": 2, "fn": 3, "tn": 4},
        "A_Ap_cascade_full": {"f1": 0.9, "tp": 9, "fp": 1, "fn": 1, "tn": 9},
    },
    "ablation": {"A+A'_cascade_filter": {"f1": 0.9}, "lower_bound_A_consistent_full": {"f1": 0.3}},
}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("verify-tamper") / "run"
    run.mkdir()
    write_stream(run / "results.jsonl", records())
    assert main(["evaluate", str(run), "--n-boot", "20", "--no-figures", "--quiet"]) == 0
    return run


@pytest.fixture
def run(pristine: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(pristine, copy)
    return copy


def _manifest(run: Path) -> dict[str, object]:
    data = orjson.loads((run / "eval" / "evaluation.json").read_bytes())
    assert isinstance(data, dict)
    return data


def _reseal(run: Path, **changes: object) -> None:
    """What a forger does after editing eval/: the manifest's ``files`` rewritten to the files
    as they are now (and any other manifest key changed)."""
    manifest = _manifest(run)
    manifest.update(changes)
    files = {}
    for path in sorted((run / "eval").iterdir()):
        if path.name != "evaluation.json":
            data = path.read_bytes()
            files[path.name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    manifest["files"] = files
    (run / "eval" / "evaluation.json").write_bytes(canonical_json(manifest))


def _verify(run: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["verify", str(run)])
    return code, capsys.readouterr().err


def test_resealing_an_untouched_evaluation_changes_nothing(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _reseal(run)
    assert _verify(run, capsys) == (0, "")


def test_reordered_certificates_fail_though_each_one_holds(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = run / "eval" / "certificates.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    first, second = orjson.loads(lines[0])["id"], orjson.loads(lines[1])["id"]
    lines[0], lines[1] = lines[1], lines[0]
    path.write_bytes(b"".join(lines))
    _reseal(run)
    code, err = _verify(run, capsys)
    assert code == 1
    assert err.count("FAIL") == 1
    assert f"certificates.jsonl:2 certificate {first}: out of order" in err
    assert f"before certificate {second} (line 1)" in err


@pytest.mark.parametrize("name", ["report.md", "rows.csv", "false_positives.csv"])
def test_a_file_every_evaluation_writes_removed_with_its_entry_fails(
    run: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    (run / "eval" / name).unlink()
    _reseal(run)
    code, err = _verify(run, capsys)
    assert code == 1
    assert f"eval/{name}: missing (every evaluation writes it)" in err


def test_an_edited_report_md_is_named_with_its_line(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = run / "eval" / "report.md"
    lines = path.read_text(encoding="utf-8").split("\n")
    number = next(i for i, line in enumerate(lines, start=1) if line.startswith("| ep |"))
    lines[number - 1] = lines[number - 1].replace("| ep |", "| ep (peer reviewed) |")
    path.write_text("\n".join(lines), encoding="utf-8")
    _reseal(run)
    code, err = _verify(run, capsys)
    assert code == 1
    assert (
        f"report.md: differs from the report rendered again from the stream, at line {number}: "
        in err
    )
    assert "'| ep (peer reviewed) |" in err and "rendered again '| ep |" in err


def test_a_published_pack_named_in_report_json_alone_fails(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = run / "eval" / "report.json"
    report = orjson.loads(path.read_bytes())
    report["published_pack"] = "/the/authors/pack"
    path.write_bytes(orjson.dumps(report))
    _reseal(run)
    code, err = _verify(run, capsys)
    assert code == 1
    assert "report.json: published_pack is not in the recomputed report" in err


def test_a_manifest_claiming_other_formats_fails(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _reseal(run, format=2, certificate_format=4)
    code, err = _verify(run, capsys)
    assert code == 1
    assert "evaluation.json: format is 2, but the evaluation it seals is of format 1" in err
    assert "certificate_format is 4, but the evaluation it seals is of certificate_format 3" in err


def test_stream_digests_removed_fail_and_no_line_is_named_wrongly(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (run / "eval" / "stream.digests").unlink()
    _reseal(run)
    code, err = _verify(run, capsys)
    assert code == 1 and err.count("FAIL") == 1
    assert "evaluation.json: lists no stream.digests, which every evaluation writes" in err
    stream = run / "results.jsonl"
    lines = stream.read_bytes().splitlines(keepends=True)
    stream.write_bytes(b"".join(lines[:-1]) + lines[-1].replace(b"}", b',"x":1}', 1))
    code, err = _verify(run, capsys)
    assert code == 1
    # Line 1 did not change: without the digests no line is named, the counts and roots are.
    assert "results.jsonl:1:" not in err
    assert f"results.jsonl: not the stream evaluated ({len(lines)} lines, root " in err
    assert "which lines changed cannot be told: " in err and "stream.digests is missing" in err


def test_missing_extra_records_fail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
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
        "steps": [],
        "source_sha256": "0" * 64,
    }
    options = EvaluateOptions(n_boot=0)
    evaluate(run / "results.jsonl", run / "eval", options, figures=False, extra_records=[summary])
    assert _verify(run, capsys)[0] == 0
    (run / "eval" / "extra_records.jsonl").unlink()
    _reseal(run)
    code, err = _verify(run, capsys)
    assert code == 1
    assert "extra_records.jsonl: missing (the evaluation fed these records" in err


@pytest.fixture
def with_pack(tmp_path: Path) -> tuple[Path, Path]:
    pack = tmp_path / "pack"
    (pack / "evidence" / "ep").mkdir(parents=True)
    (pack / "evidence" / "ep" / "final_report.json").write_bytes(orjson.dumps(PACK_ROWS))
    run = tmp_path / "run"
    run.mkdir()
    write_stream(run / "results.jsonl", records())
    args = ["--n-boot", "20", "--no-figures", "--quiet", "--published", str(pack)]
    assert main(["evaluate", str(run), *args]) == 0
    assert "published F1" in (run / "eval" / "report.md").read_text(encoding="utf-8")
    return run, pack


def test_a_pack_moved_away_leaves_report_md_checked_but_for_its_published_cells(
    with_pack: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run, pack = with_pack
    assert _verify(run, capsys) == (0, "")
    pack.rename(pack.with_name("moved"))
    code, err = _verify(run, capsys)
    assert code == 0, err
    assert "report.md checked without the published numbers of the evidence pack" in err
    path = run / "eval" / "report.md"
    lines = path.read_text(encoding="utf-8").split("\n")
    number = next(i for i, line in enumerate(lines, start=1) if "| A+A'+cascade, full |" in line)
    ours, published = lines[number - 1].split(" | 0.900 | ")
    # The published cells cannot be checked without the pack; our own numbers can.
    lines[number - 1] = f"{ours} | 0.990 | {published}"
    path.write_text("\n".join(lines), encoding="utf-8")
    _reseal(run)
    assert _verify(run, capsys)[0] == 0
    lines[number - 1] = lines[number - 1].replace(
        "| A+A'+cascade, full | ", "| A+A'+cascade, full | 0.999 "
    )
    path.write_text("\n".join(lines), encoding="utf-8")
    _reseal(run)
    code, err = _verify(run, capsys)
    assert code == 1
    assert (
        f"report.md: differs from the report rendered again from the stream, at line {number}: "
        in err
    )


def test_without_pack_takes_out_exactly_what_a_pack_adds() -> None:
    from evaluator.report import render_model_markdown
    from evaluator.verification import without_pack

    model = {
        "rows": {
            "A_consistent_full": {"precision": 0.5, "recall": 1.0, "f1": 0.667, "tp": 1, "fp": 1},
            "A_Ap_cascade_full": {"precision": 1.0, "recall": 1.0, "f1": 1.0, "tp": 2, "fp": 0},
        }
    }
    published = {
        "A_consistent_full": {"f1": 0.5, "tp": 1, "fp": 2, "fn": 3, "tn": 4},
        "string_diff_full": {"f1": 0.2},  # a row we do not have: shown for the pack alone
        "A+A'_cascade_filter": {"f1": 0.9},
    }
    plain = render_model_markdown("ep", model)
    beside = render_model_markdown("ep", model, published=published)
    assert beside != plain
    assert [line for _, line in without_pack(beside)] == [line for _, line in without_pack(plain)]
    assert [line for _, line in without_pack(plain)] == plain.split("\n")
