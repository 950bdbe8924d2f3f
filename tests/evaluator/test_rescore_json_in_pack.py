"""``cotaudit rescore --json FILE`` never writes into the evidence pack it rescores: a path
at or inside the pack is refused before any work (exit 2), the pack left byte for byte, and
the advice names a path outside it (docs/command-line.md, "Output files")."""

from __future__ import annotations

from pathlib import Path

import pytest

from cotaudit.cli import main
from tests.evaluator.test_rescore import certificate, write_pack


def _files(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()
    }


def _rescore(pack: Path, json_path: Path | str) -> int:
    return main(["rescore", str(pack), "--model", "m", "--n-boot", "0", "--json", str(json_path)])


@pytest.mark.parametrize(
    "inside",
    ["rescore.json", "evidence/m/rescore.json", "evidence/m/final_report.json"],
)
def test_a_json_path_inside_the_pack_is_refused_with_a_path_outside_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    inside: str,
) -> None:
    pack = write_pack(tmp_path / "pack", certificate())
    (pack / "evidence" / "m" / "final_report.json").write_text("{}", encoding="utf-8")
    before = _files(pack)
    monkeypatch.chdir(tmp_path)
    assert _rescore(pack, pack / inside) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"cotaudit rescore: error: --json: {pack / inside} is inside the evidence pack {pack}; "
        "nothing is written into the pack. Give --json a path outside the pack, e.g. --json "
        "rescore.json.\n"
    )
    assert _files(pack) == before


def test_from_inside_the_pack_the_advice_names_the_directory_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = write_pack(tmp_path / "pack", certificate())
    monkeypatch.chdir(pack / "evidence")
    assert _rescore(Path("..").resolve(), "rescore.json") == 2
    err = capsys.readouterr().err
    assert err.endswith(
        f"Give --json a path outside the pack, e.g. --json {tmp_path / 'rescore.json'}.\n"
    )
    assert not (pack / "evidence" / "rescore.json").exists()


def test_a_json_path_beside_the_pack_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = write_pack(tmp_path / "pack", certificate())
    assert _rescore(pack, tmp_path / "pack-rescore.json") == 0, capsys.readouterr().err
    assert (tmp_path / "pack-rescore.json").is_file()
