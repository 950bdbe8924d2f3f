"""``cotaudit reproduce``: the pack replayed through the engine gives the same table as the
pack imported directly, and the published table is printed beside ours."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from cotaudit.cli import main

PACK = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "grounding-audit-gpt4o"

pytestmark = pytest.mark.skipif(
    not (PACK / "evidence" / "gpt-4o").is_dir(), reason=f"evidence pack not found at {PACK}"
)


def _rows(report_path: Path) -> dict[str, tuple[int, int, int, int]]:
    model = orjson.loads(report_path.read_bytes())["models"]["gpt-4o"]
    return {
        key: (row["tp"], row["fp"], row["fn"], row["tn"])
        for key, row in model["rows"].items()
        if row.get("tp") is not None
    }


def test_replayed_sweep_equals_imported_pack(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "repro"
    assert main(["reproduce", str(PACK), "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "A consistent, full" in printed and "paper" in printed.split()  # its title
    assert "0.806" in printed  # the published A-consistent F1 stands beside ours

    records = [
        orjson.loads(line) for line in (out / "run" / "results.jsonl").read_bytes().splitlines()
    ]
    responses = [r for r in records if r["kind"] == "response"]
    assert len(responses) == 50 + 840
    assert all(r["error"] is None for r in responses)

    imported = tmp_path / "imported"
    assert main(["import-evidence", str(PACK), "--model", "gpt-4o", "--out", str(imported)]) == 0
    assert main(["evaluate", str(imported), "--no-figures"]) == 0
    ours = _rows(out / "run" / "eval" / "report.json")
    theirs = _rows(imported / "eval" / "report.json")
    # Every row: the replay asks for as many tokens as the pack's longest answer (1,024, twice
    # the default), so no recorded answer comes back cut short.
    assert "A_Ap_combined_full" in ours and "A_local_full" in ours
    assert ours == theirs


def test_reproduce_refuses_a_directory_that_is_not_a_pack(tmp_path: Path) -> None:
    assert main(["reproduce", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert not (tmp_path / "o").exists()


def test_a_path_inside_the_pack_names_the_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "o"
    for inside in (PACK / "evidence", PACK / "evidence" / "gpt-4o", PACK / "LICENSE"):
        assert main(["reproduce", str(inside), "--out", str(out), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert f"Give PACK_DIR {PACK.resolve()}." in err, err
        assert "inside the evidence pack" in err
    assert not out.exists()


def test_out_onto_a_file_names_out_not_the_configs_cache_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n", encoding="utf-8")
    for out in (notes, notes / "sub"):
        assert main(["reproduce", str(PACK), "--out", str(out), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("cotaudit reproduce: error: --out: "), err
        assert "not a directory" in err and "cache_dir" not in err and "<reproduce>" not in err
    assert notes.read_text(encoding="utf-8") == "mine\n"


def test_out_onto_an_unrelated_directory_is_refused_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "mine"
    (out / "cache").mkdir(parents=True)
    (out / "notes.txt").write_text("mine\n", encoding="utf-8")
    (out / "cache" / "x.bin").write_bytes(b"mine")
    assert main(["reproduce", str(PACK), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"--out: {out} holds files that cotaudit reproduce did not write (notes.txt)" in err
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == [
        "cache",
        "cache/x.bin",
        "notes.txt",
    ]


def test_out_inside_the_pack_is_refused(tmp_path: Path) -> None:
    from tests.runner.test_evidence_pack import make_pack

    pack = make_pack(tmp_path / "pack")
    before = sorted(pack.rglob("*"))
    assert main(["reproduce", str(pack), "--out", str(pack / "repro"), "--quiet"]) == 2
    assert sorted(pack.rglob("*")) == before


def _refusal_in_reproduce_terms(err: str) -> None:
    """The advice is reproduce's own: its --out, none of cotaudit run's settings."""
    assert "cotaudit reproduce: error: " in err, err
    assert "--out" in err, err
    for runs_own in ("--run-dir", "run_dir", "--retry-errors", "CONFIG", "--shard"):
        assert runs_own not in err, (runs_own, err)


def test_a_run_of_another_config_in_out_is_refused_with_reproduces_advice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import cotaudit

    out = tmp_path / "o"  # holds only run/ and cache/: it passes for an earlier reproduce
    cotaudit.run(
        {
            "run_dir": str(out / "run"),
            "cache_dir": str(out / "cache"),
            "task": {"kind": "prontoqa", "source": "generate", "n": 1, "seed": 0},
            "endpoints": [
                {
                    "name": "faithful",
                    "provider": "local",
                    "model": "faithful",
                    "requests_per_minute": 600_000,
                    "tokens_per_minute": 1e10,
                }
            ],
        },
        preflight=False,
    )
    stream = (out / "run" / "results.jsonl").read_bytes()
    assert main(["reproduce", str(PACK), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "this run directory belongs to another config" in err, err
    _refusal_in_reproduce_terms(err)
    assert f"Nothing was written; {out} is left as it is" in err
    assert f"--out {out}-2" in err and f"move {out / 'run'} aside" in err
    assert (out / "run" / "results.jsonl").read_bytes() == stream


def test_an_evaluation_refused_after_the_sweep_advises_in_reproduces_terms(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.runner.test_evidence_pack import make_pack

    # make_pack records a stand-in prompt, not the one the task sends: every replay fails
    # (not found), and the evaluation refuses a stream with no answer.
    pack = make_pack(tmp_path / "pack")
    out = tmp_path / "o"
    assert main(["reproduce", str(pack), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "no successful responses" in err, err
    _refusal_in_reproduce_terms(err)
    assert f"The sweep's stream is kept in {out / 'run'}" in err
    assert (out / "run" / "results.jsonl").is_file()


def test_advice_that_names_none_of_runs_settings_is_kept_whole(tmp_path: Path) -> None:
    from cotaudit.commands.sweep_advice import in_command_terms
    from cotaudit.errors import UsageError

    held = UsageError(
        "another run is writing", where="o/run", fix="Wait for it to finish, then rerun."
    )
    kept = in_command_terms(
        held, out=tmp_path, run_dir=tmp_path / "run", written=False, anew="a", rerun="r"
    )
    assert kept is held
