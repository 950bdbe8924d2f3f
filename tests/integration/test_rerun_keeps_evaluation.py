"""A rerun that changes nothing keeps what it made: a resume with nothing to send leaves the
run's manifest as it was (so ``cotaudit verify`` of the evaluation still holds), and
``cotaudit demo`` run again keeps an evaluation that is already of its stream. A resume with
other operational settings rewrites the manifest, and verify still holds: it compares the
fields that decide the run's requests and their answers, and names any that changed."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from cotaudit.cli import main
from cotaudit.commands.demo import run_grounding_demo
from evaluator.current import current_report
from evaluator.pipeline import EvaluateOptions

SEED = 20260710


def _files(eval_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(eval_dir.iterdir())}


def test_a_resume_with_nothing_to_send_leaves_the_manifest_and_verify_holds(
    tmp_path: Path,
) -> None:
    config = tmp_path / "sweep.toml"
    config.write_text(
        'run_dir = "run"\ncache_dir = "cache"\n'
        '[task]\nkind = "prontoqa"\nsource = "generate"\nn = 2\nseed = 3\n'
        '[[endpoints]]\nname = "e"\nprovider = "local"\nmodel = "faithful"\n'
        "requests_per_minute = 60000\n"
    )
    run = tmp_path / "run"
    assert main(["run", str(config), "--quiet"]) == 0
    manifest = run / "manifest.json"
    # Dated in the past, so that a rewrite shows even within the second of the first run.
    dated = {**orjson.loads(manifest.read_bytes()), "updated_at": "2026-01-01T00:00:00+00:00"}
    manifest.write_bytes(orjson.dumps(dated, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
    assert main(["evaluate", str(run), "--quiet", "--no-figures", "--n-boot", "50"]) == 0
    before = manifest.read_bytes()
    assert main(["run", str(config), "--quiet"]) == 0
    assert manifest.read_bytes() == before
    assert main(["verify", str(run)]) == 0


def test_demo_run_again_keeps_its_evaluation_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "demo"
    demo = {"problems": 2, "seed": SEED, "quiet": True, "figures": False}
    assert run_grounding_demo(out, **demo) == 0  # type: ignore[arg-type]
    first = capsys.readouterr().out
    eval_dir = out / "run" / "eval"
    made = _files(eval_dir)
    assert "evaluation kept" not in first
    assert main(["verify", str(out / "run")]) == 0
    capsys.readouterr()

    assert run_grounding_demo(out, **demo) == 0  # type: ignore[arg-type]
    again = capsys.readouterr().out
    assert "0 responses written" in again and "evaluation kept" in again
    assert _files(eval_dir) == made  # not rewritten: the same bytes, evaluation.json included
    # The table is printed from the kept report, as the first run printed it.
    assert first.split("\nsweep:")[0] == again.split("\nsweep:")[0]
    assert main(["verify", str(out / "run")]) == 0


def test_an_evaluation_is_kept_only_if_stream_options_figures_and_files_are_as_made(
    tmp_path: Path,
) -> None:
    out = tmp_path / "demo"
    assert run_grounding_demo(out, problems=2, seed=SEED, quiet=True, figures=False) == 0
    stream, eval_dir = out / "run" / "results.jsonl", out / "run" / "eval"
    options = EvaluateOptions(seed=SEED)
    assert current_report(stream, eval_dir, options, figures=False) is not None
    assert current_report(stream, eval_dir, EvaluateOptions(seed=1), figures=False) is None
    assert current_report(stream, eval_dir, options, figures=True) is None  # made without
    report = eval_dir / "report.md"
    text = report.read_bytes()
    report.write_bytes(text + b"\n")  # an edited file of the evaluation
    assert current_report(stream, eval_dir, options, figures=False) is None
    report.write_bytes(text)
    (eval_dir / "notes.txt").write_text("mine")  # a file added since
    assert current_report(stream, eval_dir, options, figures=False) is None
    (eval_dir / "notes.txt").unlink()
    assert current_report(stream, eval_dir, options, figures=False) is not None
    with stream.open("ab") as handle:  # the stream grew (a line the evaluation lacks)
        handle.write(b"\n")
    assert current_report(stream, eval_dir, options, figures=False) is None


def _evaluated_run(tmp_path: Path) -> tuple[Path, Path]:
    """A run of two problems, evaluated; its config, and the run directory."""
    config = tmp_path / "sweep.toml"
    config.write_text(
        'run_dir = "run"\ncache_dir = "cache"\n'
        '[task]\nkind = "prontoqa"\nsource = "generate"\nn = 2\nseed = 3\n'
        '[[endpoints]]\nname = "e"\nprovider = "local"\nmodel = "faithful"\n'
        "requests_per_minute = 60000\n"
    )
    run = tmp_path / "run"
    assert main(["run", str(config), "--quiet"]) == 0
    assert main(["evaluate", str(run), "--quiet", "--no-figures", "--n-boot", "50"]) == 0
    return config, run


def _edit(path: Path, **fields: object) -> None:
    data = {**orjson.loads(path.read_bytes()), **fields}
    path.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))


def test_a_resume_with_other_operational_settings_keeps_verify_and_says_what_changed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, run = _evaluated_run(tmp_path)
    manifest = run / "manifest.json"
    before = manifest.read_bytes()
    config.write_text(config.read_text().replace("60000", "30000"))  # another rate too
    assert main(["run", str(config), "--quiet", "--max-concurrency", "3"]) == 0
    assert manifest.read_bytes() != before  # the manifest records the new settings
    capsys.readouterr()

    assert main(["verify", str(run)]) == 0
    err = capsys.readouterr().err
    # updated_at is stamped to the second: the resume may fall in the second the first run
    # last wrote its manifest (it records its plan's count on its way out).
    assert re.search(
        r"manifest\.json: changed since the evaluation in config(, updated_at)? only", err
    )
    assert "not what decides its requests and their answers, which is as evaluated" in err


def test_a_changed_field_that_decides_the_requests_fails_verify_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, run = _evaluated_run(tmp_path)
    manifest = run / "manifest.json"
    data = orjson.loads(manifest.read_bytes())
    data["output_config"]["endpoints"][0]["model"] = "shortcut"
    _edit(manifest, output_config=data["output_config"], shard="0/2")
    capsys.readouterr()

    assert main(["verify", str(run)]) == 1
    err = capsys.readouterr().err
    assert (
        'manifest.json: output_config.endpoints[e].model changed since the evaluation ("faithful"'
        ' -> "shortcut"): what decides the run\'s requests and their answers is not what was '
        "evaluated"
    ) in err
    assert 'manifest.json: shard changed since the evaluation (absent -> "0/2")' in err
    # The config it records no longer plans what output_config says: edited by hand.
    assert "its config plans another run than its output_config and plan_hash record" in err


def test_served_entries_a_later_preflight_added_are_noted_and_edited_ones_fail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, run = _evaluated_run(tmp_path)
    manifest = run / "manifest.json"
    served = orjson.loads(manifest.read_bytes())["served"]
    (first,) = served["e"]
    _edit(manifest, served={"e": [first, {**first, "served_model": "other"}]})
    capsys.readouterr()
    assert main(["verify", str(run)]) == 0
    assert "served: a later preflight recorded what serves endpoint e" in capsys.readouterr().err

    _edit(manifest, served={"e": [{**first, "served_model": "other"}]})
    assert main(["verify", str(run)]) == 1
    assert "served.e: what preflight found serving endpoint e up to the evaluation was edited" in (
        capsys.readouterr().err
    )


def test_an_evaluation_that_recorded_only_the_manifest_hash_says_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Evaluations made before the manifest's fields were recorded: a changed manifest cannot
    be told apart, so verify fails, saying why and that evaluating again is the way out."""
    config, run = _evaluated_run(tmp_path)
    evaluation = run / "eval" / "evaluation.json"
    data = orjson.loads(evaluation.read_bytes())
    recorded = data["run_manifest"]
    data["run_manifest"] = {k: recorded[k] for k in ("name", "sha256", "bytes")}
    evaluation.write_bytes(orjson.dumps(data, option=orjson.OPT_SORT_KEYS))
    assert main(["run", str(config), "--quiet", "--max-concurrency", "3"]) == 0
    capsys.readouterr()

    assert main(["verify", str(run)]) == 1
    err = capsys.readouterr().err
    assert "manifest.json: changed since the evaluation, which recorded only its SHA-256" in err
    assert "evaluate it again (`cotaudit evaluate RUN_DIR`)" in err
    assert main(["evaluate", str(run), "--quiet", "--no-figures", "--n-boot", "50"]) == 0
    assert main(["verify", str(run)]) == 0
