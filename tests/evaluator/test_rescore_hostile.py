"""``cotaudit rescore`` given a folder that is not the pack's root, or a pack whose published
reports have another shape: one message naming the path (and key), exit 2, no traceback, and
nothing written to ``--json``."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from cotaudit.cli import main
from tests.evaluator.test_rescore import certificate, write_pack


def _rescore(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["rescore", *args, "--n-boot", "0"])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


@pytest.mark.parametrize("inside", ["evidence", "evidence/m", "evidence/m/p001"])
def test_a_directory_inside_the_pack_names_the_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], inside: str
) -> None:
    pack = write_pack(tmp_path / "pack", certificate())
    code, err = _rescore(capsys, str(pack / inside), "--model", "m")
    assert code == 2
    assert f"a directory inside the evidence pack {pack.resolve()}, not its root" in err
    assert f"cotaudit rescore {pack.resolve()} --model MODEL" in err


def test_a_missing_path_a_file_and_a_folder_that_is_no_pack_say_which(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere"
    assert _rescore(capsys, str(missing)) == (
        2,
        f"cotaudit rescore: error: {missing}: no such directory. Give the pack's root "
        "directory, the one holding evidence/MODEL/.\n",
    )
    file = tmp_path / "pack.zip"
    file.write_bytes(b"PK\x03\x04")
    code, err = _rescore(capsys, str(file))
    assert code == 2 and f"{file}: a file, not an evidence pack's directory" in err
    code, err = _rescore(capsys, str(tmp_path))
    assert code == 2 and f"{tmp_path}: not an evidence pack: no evidence/MODEL/" in err


@pytest.mark.parametrize("model", ["../..", "", "evidence/m"])
def test_a_model_that_is_a_path_is_refused_listing_the_packs_models(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], model: str
) -> None:
    pack = write_pack(tmp_path / "pack", certificate())
    code, err = _rescore(capsys, str(pack), "--model", model)
    assert code == 2 and "Name one of the pack's models: m." in err


@pytest.mark.parametrize(
    ("stem", "content", "where"),
    [
        ("final_report", [1], "final_report.json: should be a JSON object, got a list"),
        ("final_report", {"main": 5}, "final_report.json, main: should be a JSON object"),
        (
            "final_report",
            {"main": {"A_consistent_full": {"tp": "12", "f1": 0.5}}},
            "final_report.json, main.A_consistent_full.tp: should be a number or null, got "
            'the string "12"',
        ),
        (
            "final_report",
            {"analysis": {"chain_length": {"3": 0.5}}},
            "final_report.json, analysis.chain_length: should be a JSON list, got an object",
        ),
        (
            "final_report",
            {"analysis": {"rawr": 3}},
            "final_report.json, analysis.rawr: should be a JSON object",
        ),
        (
            "bootstrap_ci",
            {"A_consistent_full": {"ci": {"f1": {"ci_lower": "a", "ci_upper": 1}}}},
            "bootstrap_ci.json, A_consistent_full.ci.f1.ci_lower: should be a number",
        ),
    ],
)
def test_a_published_report_of_another_shape_is_named_before_anything_is_printed(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    stem: str,
    content: object,
    where: str,
) -> None:
    pack = write_pack(tmp_path / "pack", certificate())
    row = {"main": {"A_consistent_full": {"tp": 1, "f1": 0.5}}}  # whose interval is read
    (pack / "evidence" / "m" / "final_report.json").write_bytes(orjson.dumps(row))
    (pack / "evidence" / "m" / f"{stem}.json").write_bytes(orjson.dumps(content))
    out = tmp_path / "rescore.json"
    code = main(["rescore", str(pack), "--model", "m", "--n-boot", "0", "--json", str(out)])
    captured = capsys.readouterr()
    assert code == 2, captured.err
    assert "Traceback" not in captured.err
    assert f"{pack / 'evidence' / 'm'}/{where}" in captured.err
    assert captured.out == ""
    assert not out.exists()
