"""``cotaudit rescore`` as a paper's reader meets it: the table says what it compares and what
its columns mean, a certificate lost from a copy of the pack is named instead of moving the
counts without a word, and the directory the pack was unpacked into points to the pack."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from cotaudit.cli import main
from tests.evaluator.test_rescore import certificate, write_pack


def _two_premise_pack(root: Path) -> Path:
    """write_pack's problem with both of its step's certificates: a whole grid."""
    pack = write_pack(root, certificate())
    cert = certificate(premise_id="P2", phi_semantic="is(alex, bimpus)", semantic_delta=False)
    certs = pack / "evidence" / "m" / "p001" / "certificates"
    (certs / "cert_S1_P2.json").write_bytes(orjson.dumps(cert))
    return pack


def test_the_table_says_what_it_compares_and_what_its_columns_mean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = _two_premise_pack(tmp_path / "pack")
    assert main(["rescore", str(pack), "--model", "m", "--n-boot", "0"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # as read, whatever the lines' width
    assert "ours: the authors' certificate fields through our decision rules" in out
    assert "published: the pack's final_report.json and bootstrap_ci.json" in out
    assert "tp/fp/fn/tn evaluable (step, premise) pairs" in out  # the legend: column, meaning
    assert "dF1 ours minus published F1" in out and "dCI ours" in out
    assert "missing from the pack" not in out


def test_a_lost_certificate_is_named_in_the_table_and_the_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = write_pack(tmp_path / "pack", certificate())  # step 1 has P1's, not P2's
    report = tmp_path / "rescore.json"
    argv = ["rescore", str(pack), "--model", "m", "--n-boot", "0", "--json", str(report)]
    assert main(argv) == 0
    out = " ".join(capsys.readouterr().out.split())  # as read, whatever the lines' width
    assert (
        "1 certificate missing from the pack (p001/certificates/cert_S1_P2.json): rescored "
        "without it, so counts can differ from the published ones for that reason alone"
    ) in out
    section = orjson.loads(report.read_bytes())["models"]["m"]
    assert section["missing_certificates"] == ["p001/certificates/cert_S1_P2.json"]


def test_the_directory_holding_the_pack_names_the_pack(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = _two_premise_pack(tmp_path / "downloads" / "grounding-audit")
    assert main(["rescore", str(tmp_path / "downloads"), "--n-boot", "0"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"cotaudit rescore: error: {tmp_path / 'downloads'}: this directory holds an evidence "
        f"pack, it is not one. Give the root: cotaudit rescore {pack.resolve()} --model MODEL.\n"
    )


def test_a_truncated_certificate_says_to_restore_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = _two_premise_pack(tmp_path / "pack")
    cert = pack / "evidence" / "m" / "p001" / "certificates" / "cert_S1_P2.json"
    cert.write_bytes(cert.read_bytes()[:40])
    assert main(["rescore", str(pack), "--model", "m", "--n-boot", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"cotaudit rescore: error: {cert}: not valid JSON"), err
    assert err.endswith("Restore the file from the pack.\n"), err
