"""The viewer's data module against real evaluated runs: what it computes from the certificates
equals what ``cotaudit evaluate`` reported, and every file problem is a clear error."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from cotaudit.cli import main
from cotaudit.errors import UsageError
from evaluator.run_files import locate_run, run_labels
from evaluator.stage_records import PROBE_CONDITIONS
from evaluator.viewer.data import (
    EVALUATORS,
    PAIR_COLUMNS,
    PAIR_FLAGS,
    PageData,
    build_page_data,
    encode,
)
from tests.evaluator.thinker_stream import write_thinker_run

CONSISTENT = [e.key for e in EVALUATORS].index("consistent")
COMBINED = [e.key for e in EVALUATORS].index("combined")


def _report(run: Path) -> dict[str, Any]:
    report: dict[str, Any] = orjson.loads((run / "eval" / "report.json").read_bytes())
    return report


def _pairs(data: PageData) -> list[tuple[int, dict[str, Any]]]:
    """(audit index, pair as a dict) for every pair of every chunk."""
    out = []
    for k in range(len(data.chunks)):
        for audit in data.chunk(k)["audits"]:
            for row in audit["pairs"]:
                out.append((audit["audit"], dict(zip(PAIR_COLUMNS, row, strict=True))))
    return out


@pytest.fixture(scope="module")
def demo_data(demo_run: Path) -> PageData:
    return build_page_data([demo_run])


VERDICT_FIELDS = {
    "A": "verdict_consistent",
    "A'": "verdict_local",
    "A+A'": "verdict",
    "A+A'+cascade": "verdict_cascade",
}


def _found_from_certificates(run: Path) -> dict[tuple[str, str], dict[str, int]]:
    """(endpoint, evaluator) -> the headline's counts, recomputed here from certificates.jsonl
    with the definitions of docs/report-schema.md ("headline")."""
    out: dict[tuple[str, str], dict[str, int]] = {}
    for line in (run / "eval" / "certificates.jsonl").read_bytes().splitlines():
        cert = orjson.loads(line)
        if cert["excluded"]:
            continue
        gold = cert["gold"]["direct_parent"]
        kind = "entity" if cert["gold"]["entity_premise"] else "rule"
        for name, field in VERDICT_FIELDS.items():
            tally = out.setdefault((cert["endpoint"], name), {})
            verdict = cert[field]
            positive = verdict in ("GROUNDED", "INPUT-SENSITIVE")
            if not gold:
                tally["false_positives"] = tally.get("false_positives", 0) + positive
                continue
            if verdict in ("UNPARSEABLE", "UNSTABLE"):
                continue
            for key, add in (
                (f"judged_{kind}", 1),
                (f"dependent_{kind}", positive),
                (f"ignored_{kind}", verdict == "INSENSITIVE"),
            ):
                tally[key] = tally.get(key, 0) + add
    return out


def test_what_the_audit_found_is_the_reports_headline(demo_run: Path, demo_data: PageData) -> None:
    report = _report(demo_run)["models"]
    assert [m["endpoint"] for m in demo_data.index["models"]] == list(report)
    for model in demo_data.index["models"]:
        headline = report[model["endpoint"]]["headline"]
        for evaluator, page in zip(EVALUATORS, model["found"], strict=True):
            found = headline["found"][evaluator.report_name]
            assert page["ignored"] == found["ignored"] and page["rawr"] == found["rawr"]
            assert page["grounded_share"] == found["grounded_share"]
            assert page["ignored_rule"] == found["ignored_rule"]
            assert page["rawr_entity_only"] == found["rawr_entity_only"]


def test_the_reports_headline_agrees_with_the_certificates(demo_run: Path) -> None:
    report = _report(demo_run)["models"]
    recomputed = _found_from_certificates(demo_run)
    for endpoint, section in report.items():
        for name, found in section["headline"]["found"].items():
            mine = recomputed[(endpoint, name)]
            for key, value in mine.items():
                assert found[key] == value, (endpoint, name, key)
        a = section["headline"]["found"]["A"]
        row = section["rows"]["A_consistent_full"]
        # A gold use judged INSENSITIVE is a false negative of A; one judged dependent a TP.
        assert (a["ignored"], a["dependent"], a["false_positives"]) == (
            row["fn"],
            row["tp"],
            row["fp"],
        )
        assert a["rawr"] == section["rawr"]["rawr"]
    # The shortcut reasoner ignores rule premises; the faithful one none.
    assert report["faithful"]["headline"]["found"]["A+A'"]["ignored_rule"] == 0
    shortcut = report["shortcut"]
    ignored = shortcut["headline"]["found"]["A+A'"]["ignored_rule"]
    assert ignored == shortcut["truth"]["ignored_premises"] > 0


def test_a_report_without_a_headline_is_refused(demo_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "old"
    shutil.copytree(demo_run, run)
    report = _report(run)
    for section in report["models"].values():
        del section["headline"]
    (run / "eval" / "report.json").write_bytes(orjson.dumps(report))
    with pytest.raises(UsageError, match="no headline") as info:
        build_page_data([run])
    assert "cotaudit evaluate" in str(info.value)


def test_per_audit_filter_facts_match_the_report(demo_run: Path, demo_data: PageData) -> None:
    report = _report(demo_run)["models"]
    audits = demo_data.index["audits"]
    problems = demo_data.index["problems"]
    models = demo_data.index["models"]
    for m, model in enumerate(models):
        mine = [i for i, owner in enumerate(audits["model"]) if owner == m]
        assert len(mine) == report[model["endpoint"]]["accuracy"]["problems"]
        rawr = {problems[audits["problem"][i]] for i in mine if audits["rawr"][i][CONSISTENT]}
        assert rawr == set(report[model["endpoint"]]["rawr"]["problems"])
    fp_ids = {
        pair["id"]
        for _, pair in _pairs(demo_data)
        if pair["flags"] & (1 << (demo_data.index["fp_shift"] + CONSISTENT))
    }
    reported = {fp["id"] for m in report.values() for fp in m.get("false_positives", [])}
    assert fp_ids == reported and fp_ids


def test_every_certificate_becomes_one_pair_with_its_seal_and_line(
    demo_run: Path, demo_data: PageData
) -> None:
    lines = (demo_run / "eval" / "certificates.jsonl").read_bytes().splitlines()
    pairs = _pairs(demo_data)
    assert len(pairs) == len(lines)
    for _, pair in pairs[:: max(1, len(pairs) // 50)]:
        cert = orjson.loads(lines[pair["line"] - 1])
        assert cert["id"] == pair["id"]
        assert cert["sha256"].startswith(pair["seal"]) and len(pair["seal"]) == 16
        assert pair["rules"][COMBINED] == cert["decision_rule"]
        assert bool(pair["flags"] & PAIR_FLAGS["gold"]) == cert["gold"]["direct_parent"]
        verdict = demo_data.index["verdicts"][pair["verdicts"][CONSISTENT]]["name"]
        assert verdict == cert["verdict_consistent"]


def test_the_texts_are_the_streams_raw_outputs(demo_run: Path, demo_data: PageData) -> None:
    texts = {}
    for line in (demo_run / "results.jsonl").read_bytes().splitlines():
        record = orjson.loads(line)
        if record["kind"] == "response":
            texts[record["request_id"]] = record["text"]
    chunk = demo_data.chunk(0)
    audit = chunk["audits"][0]
    original = chunk["texts"][audit["original"][0]]
    model = demo_data.index["models"][demo_data.index["audits"]["model"][audit["audit"]]]
    problem = chunk["problems"][audit["problem"]]["id"]
    assert original[0] == texts[f"{model['endpoint']}/{problem}/original/-/0"]
    assert [n for n, _ in original[1]] == list(range(1, len(original[1]) + 1))
    consistent = chunk["texts"][audit["probes"]["P1"][0][0]]
    assert consistent[0] == texts[f"{model['endpoint']}/{problem}/consistent/P1/0"]


def test_tokens_are_summed_from_the_response_records(demo_run: Path, demo_data: PageData) -> None:
    totals: dict[str, list[int]] = {}
    for line in (demo_run / "results.jsonl").read_bytes().splitlines():
        record = orjson.loads(line)
        if record["kind"] == "response" and record["usage"]:
            total = totals.setdefault(record["endpoint"], [0, 0, 0])
            total[0] += 1
            total[1] += record["usage"]["input_tokens"]
            total[2] += record["usage"]["output_tokens"]
    for model in demo_data.index["models"]:
        usage = model["usage"]
        expected = totals[model["endpoint"]]
        assert [usage["requests"], usage["input_tokens"], usage["output_tokens"]] == expected
        assert usage["cost"] is None  # the demo's config has no prices


def test_cost_uses_the_configs_prices(demo_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "priced"
    shutil.copytree(demo_run, run)
    manifest = orjson.loads((run / "manifest.json").read_bytes())
    for endpoint in manifest["config"]["endpoints"]:
        endpoint["price_input_per_mtok"] = 2.5
        endpoint["price_output_per_mtok"] = 10.0
    (run / "manifest.json").write_bytes(orjson.dumps(manifest))
    for model in build_page_data([run]).index["models"]:
        usage = model["usage"]
        expected = (usage["input_tokens"] * 2.5 + usage["output_tokens"] * 10.0) / 1e6
        assert usage["cost"] == pytest.approx(expected) and usage["cost"] > 0


def test_requests_sent_by_batch_are_priced_at_the_batch_discount(
    demo_run: Path, tmp_path: Path
) -> None:
    """A batch-mode endpoint's records (``via: "batch"``) cost its ``batch_discount`` less
    than online ones, as the dry run's estimate says; online records keep the full price."""
    run = tmp_path / "batched"
    shutil.copytree(demo_run, run)
    manifest = orjson.loads((run / "manifest.json").read_bytes())
    endpoints = manifest["config"]["endpoints"]
    batched = endpoints[0]["name"]
    for endpoint in endpoints:
        endpoint["price_input_per_mtok"] = 2.5
        endpoint["price_output_per_mtok"] = 10.0
        endpoint["batch_discount"] = 0.4
    (run / "manifest.json").write_bytes(orjson.dumps(manifest))
    lines = []
    online: dict[str, float] = {}
    by_batch: dict[str, float] = {}
    for index, line in enumerate((run / "results.jsonl").read_bytes().splitlines()):
        record = orjson.loads(line)
        if record["kind"] == "response" and record["usage"]:
            # Every other request of the first endpoint went by batch, so one endpoint
            # mixes both (a batch run's retries online).
            if record["endpoint"] == batched and index % 2 == 0:
                record["via"] = "batch"
            usage = record["usage"]
            cost = (usage["input_tokens"] * 2.5 + usage["output_tokens"] * 10.0) / 1e6
            into = by_batch if record.get("via") == "batch" else online
            into[record["endpoint"]] = into.get(record["endpoint"], 0.0) + cost
        lines.append(orjson.dumps(record))
    (run / "results.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    models = build_page_data([run]).index["models"]
    assert by_batch.get(batched, 0.0) > 0
    for model in models:
        usage = model["usage"]
        endpoint = model["endpoint"]
        expected = online.get(endpoint, 0.0) + 0.6 * by_batch.get(endpoint, 0.0)
        assert usage["cost"] == pytest.approx(expected)
        assert usage["batch_discount"] == 0.4
        assert (usage["batch_requests"] > 0) == (endpoint == batched)


def test_an_eval_directory_is_accepted_as_well(demo_run: Path) -> None:
    files = locate_run(demo_run / "eval")
    assert files.results == demo_run / "results.jsonl"
    assert files.eval_dir == demo_run / "eval"


def test_an_unevaluated_run_is_a_usage_error(demo_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "raw"
    run.mkdir()
    shutil.copy(demo_run / "results.jsonl", run / "results.jsonl")
    with pytest.raises(UsageError, match="cotaudit evaluate"):
        locate_run(run)
    with pytest.raises(UsageError, match="no such run directory"):
        locate_run(tmp_path / "absent")


def test_a_selection_study_run_is_named_as_such(tmp_path: Path) -> None:
    (tmp_path / "run" / "eval").mkdir(parents=True)
    (tmp_path / "run" / "eval" / "selection.json").write_text("{}", encoding="utf-8")
    with pytest.raises(UsageError, match="selection-study run"):
        locate_run(tmp_path / "run")


def test_a_damaged_certificate_line_names_its_line(demo_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "damaged"
    shutil.copytree(demo_run, run)
    path = run / "eval" / "certificates.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines[4] = b"{not json\n"
    path.write_bytes(b"".join(lines))
    with pytest.raises(UsageError, match="line 5 is not a certificate"):
        build_page_data([run])


def test_run_labels_are_short_and_distinct(tmp_path: Path) -> None:
    a, b = tmp_path / "x" / "run", tmp_path / "y" / "run"
    assert run_labels([a, b]) == ["x/run", "y/run"]
    assert run_labels([tmp_path / "gpt-4o"]) == ["gpt-4o"]
    assert len(set(run_labels([a, a]))) == 2


def test_models_of_two_runs_are_labelled_by_run_where_names_clash(
    demo_run: Path, tmp_path: Path
) -> None:
    other = tmp_path / "again" / "run"
    shutil.copytree(demo_run, other)
    data = build_page_data([demo_run, other])
    labels = [m["label"] for m in data.index["models"]]
    per_run = len(orjson.loads((demo_run / "eval" / "report.json").read_bytes())["models"])
    assert len(labels) == 2 * per_run and len(set(labels)) == 2 * per_run
    run_b = data.index["runs"][1]["label"]
    assert "faithful (" + run_b + ")" in labels
    # audits of the same problem sit together, run by run
    audits = data.index["audits"]
    first = [data.index["models"][m]["run"] for m in audits["model"][: 2 * per_run]]
    assert first == [0] * per_run + [1] * per_run


def test_encoding_is_deterministic_gzip_json(demo_run: Path, demo_data: PageData) -> None:
    assert build_page_data([demo_run]).chunks == demo_data.chunks
    blob = encode(demo_data.index)
    assert orjson.loads(gzip.decompress(blob)) == orjson.loads(orjson.dumps(demo_data.index))


def test_the_gpt4o_pack_maps_openai_usage_names(gpt4o_run: Path) -> None:
    data = build_page_data([gpt4o_run])
    (model,) = data.index["models"]
    assert model["usage"]["input_tokens"] > 0 and model["usage"]["output_tokens"] > 0
    report = _report(gpt4o_run)["models"]["gpt-4o"]
    assert model["found"][CONSISTENT]["rawr"] == report["rawr"]["rawr"]
    assert model["found"][COMBINED]["rawr"] == report["rawr_combined"]["rawr"]
    assert model["rows"]["A_consistent_full"]["f1"] == report["rows"]["A_consistent_full"]["f1"]


def test_a_reasoning_model_shows_each_trace_as_its_own_model(tmp_path: Path) -> None:
    """``--trace both``: the answer's and the reasoning trace's audits are two models, as the
    report has them: each with its own problems, pairs and texts (the trace's original is the
    stream's ``reasoning``, split into sentences the way the audit reads a prose trace)."""
    run = write_thinker_run(tmp_path / "run", "thinker:trace=faithful,answer=shortcut,p=1")
    assert main(["evaluate", str(run), "--trace", "both", "--no-figures", "--quiet"]) == 0
    report = _report(run)["models"]
    data = build_page_data([run])
    models = data.index["models"]
    assert [m["endpoint"] for m in models] == list(report) == ["thinker", "thinker:reasoning"]
    certificates = [
        orjson.loads(line)
        for line in (run / "eval" / "certificates.jsonl").read_bytes().splitlines()
    ]
    pairs = _pairs(data)
    owner = data.index["audits"]["model"]
    for m, model in enumerate(models):
        section = report[model["endpoint"]]
        mine = [i for i, o in enumerate(owner) if o == m]
        assert len(mine) == section["accuracy"]["problems"]
        ids = {c["id"] for c in certificates if c["trace"] == section["trace"]}
        assert {p["id"] for a, p in pairs if owner[a] == m} == ids and ids
        # Both sections are the same requests: the same usage.
        assert model["usage"] == models[0]["usage"]
    reasoning = {}
    for line in (run / "results.jsonl").read_bytes().splitlines():
        record = orjson.loads(line)
        if record["kind"] == "response":
            reasoning[record["request_id"]] = record.get("reasoning")
    shown = 0
    for k in range(len(data.chunks)):
        chunk = data.chunk(k)
        for audit in chunk["audits"]:
            if owner[audit["audit"]] != 1:
                continue
            problem = chunk["problems"][audit["problem"]]["id"]
            text, steps, _ = chunk["texts"][audit["original"][0]][:3]
            assert text == reasoning[f"thinker/{problem}/original/-/0"]
            assert "Step 1:" not in text and len(steps) > 1
            assert [n for n, _ in steps] == list(range(1, len(steps) + 1))
            shown += 1
    assert shown == report["thinker:reasoning"]["accuracy"]["problems"]


def test_a_failed_requests_error_stays_with_it(failed_run: Path) -> None:
    # The failed original and the probe that answered with an empty text have the same text
    # (""): the error is the failed request's alone, not every empty response's.
    from tests.evaluator.viewer.conftest import FAILED_MESSAGE

    data = build_page_data([failed_run])
    models = [m["endpoint"] for m in data.index["models"]]
    first = data.index["problems"][0]
    seen = set()
    for k in range(len(data.chunks)):
        chunk = data.chunk(k)
        for audit in chunk["audits"]:
            endpoint = models[data.index["audits"]["model"][audit["audit"]]]
            if chunk["problems"][audit["problem"]]["id"] != first:
                continue
            if endpoint == "restating":
                (original,) = audit["original"]
                assert chunk["texts"][original][3] == FAILED_MESSAGE
                seen.add(endpoint)
            elif endpoint == "faithful":
                (probe,) = audit["probes"]["P1"][0]  # the consistent probe of P1
                assert chunk["texts"][probe][0] == "" and chunk["texts"][probe][3] is None
                seen.add(endpoint)
    assert seen == {"restating", "faithful"}


def test_as_misrepresentations_come_with_what_report_md_sets_beside_them(
    demo_run: Path, demo_data: PageData
) -> None:
    # The page showed A's misrepresentation count bare; report.md gives it its denominator and
    # the same under A+A', which sees the entity-introduction premises A counts as ignored.
    models = _report(demo_run)["models"]
    entries = {m["endpoint"]: m for m in demo_data.index["models"]}
    for name, section in models.items():
        entry = entries[name]
        assert entry["misrepresentations_beside"] == {
            "insensitive": section["verdict_mix"]["A"]["INSENSITIVE"],
            "combined": section["rule_mix"]["A+A'"].get("R_MISREPRESENT_CITED", 0),
            "combined_insensitive": section["verdict_mix"]["A+A'"]["INSENSITIVE"],
        }
        assert entry["rawr_consistent"]["predicate"] == section["rawr"]["predicate"]
        assert entry["n_boot"] == section["bootstrap"]["n_boot"]
        blind = [f["evaluator"] for f in entry["found"] if f["blind"]]
        assert blind == ["consistent"]  # A alone: headline.found blind_spot


def _counts_from_certificates(run: Path) -> dict[tuple[str, str], dict[str, list[int]]]:
    """(endpoint, problem) -> per evaluator (EVALUATORS' order) the ignored gold premise uses,
    rule and entity-introduction apart, and the false positives, counted here from
    certificates.jsonl with the definitions of docs/report-schema.md ("headline")."""
    out: dict[tuple[str, str], dict[str, list[int]]] = {}
    fields = [VERDICT_FIELDS[e.report_name] for e in EVALUATORS]
    for line in (run / "eval" / "certificates.jsonl").read_bytes().splitlines():
        cert = orjson.loads(line)
        tally = out.setdefault(
            (cert["endpoint"], cert["problem_id"]),
            {k: [0] * len(EVALUATORS) for k in ("ignored_rule", "ignored_entity", "fp")},
        )
        if cert["excluded"]:
            continue
        gold = cert["gold"]["direct_parent"]
        kind = "ignored_entity" if cert["gold"]["entity_premise"] else "ignored_rule"
        for e, name in enumerate(fields):
            verdict = cert[name]
            if gold and verdict == "INSENSITIVE":
                tally[kind][e] += 1
            elif not gold and verdict in ("GROUNDED", "INPUT-SENSITIVE"):
                tally["fp"][e] += 1
    return out


def test_the_sort_counts_per_audit_are_the_certificates(
    demo_run: Path, demo_data: PageData
) -> None:
    """The counts the cards' "order" ranks by: per audit and evaluator, its certificates'
    ignored gold premise uses (rule, entity-introduction) and false positives; over a model's
    audits they are its headline's."""
    expected = _counts_from_certificates(demo_run)
    audits = demo_data.index["audits"]
    models = demo_data.index["models"]
    problems = demo_data.index["problems"]
    zero = [0] * len(EVALUATORS)
    seen = set()
    for i, m in enumerate(audits["model"]):
        key = (models[m]["endpoint"], problems[audits["problem"][i]])
        mine = expected.get(key, {"ignored_rule": zero, "ignored_entity": zero, "fp": zero})
        assert audits["ignored_rule"][i] == mine["ignored_rule"], key
        assert audits["ignored_entity"][i] == mine["ignored_entity"], key
        assert audits["false_positives"][i] == mine["fp"], key
        seen.add(key)
    assert seen >= set(expected)
    # Not all alike: the sort has something to order (the shortcut reasoner ignores rule
    # premises, on some problems; false positives vary by problem).
    assert len({tuple(c) for c in audits["ignored_rule"]}) > 1
    assert len({tuple(c) for c in audits["false_positives"]}) > 2
    report = _report(demo_run)["models"]
    for m, model in enumerate(models):
        found = report[model["endpoint"]]["headline"]["found"]
        mine_i = [i for i, owner in enumerate(audits["model"]) if owner == m]
        for e, evaluator in enumerate(EVALUATORS):
            f = found[evaluator.report_name]
            for column, name in (
                ("ignored_rule", "ignored_rule"),
                ("ignored_entity", "ignored_entity"),
                ("false_positives", "false_positives"),
            ):
                total = sum(audits[column][i][e] for i in mine_i)
                assert total == f[name], (model["endpoint"], evaluator.key, name)


def test_a_restarted_chains_steps_are_told_apart_by_position(restarted_run: Path) -> None:
    # A chain that writes "Step 1" twice has certificates S1 and S1.2: the page found a pair's
    # step by its number, so the second occurrence's pairs took the first's place (half the
    # pairs of the card were never shown, and the comparison framed two rows as the pair's).
    # Each pair carries its step's position in the original and its counterpart's in the probe,
    # and those are the certificate's and name the same steps of the texts the page shows.
    from tests.evaluator.viewer.conftest import RESTARTED

    certs = {
        c["id"]: c
        for c in (
            orjson.loads(line)
            for line in (restarted_run / "eval" / "certificates.jsonl").read_bytes().splitlines()
        )
    }
    data = build_page_data([restarted_run])
    models = [m["endpoint"] for m in data.index["models"]]
    first = data.index["problems"][0]
    checked = 0
    for k in range(len(data.chunks)):
        chunk = data.chunk(k)
        for audit in chunk["audits"]:
            original = chunk["texts"][audit["original"][0]][1]
            for row in audit["pairs"]:
                pair = dict(zip(PAIR_COLUMNS, row, strict=True))
                cert = certs[pair["id"]]
                assert pair["index"] == cert["cot_index"]
                assert original[pair["index"] - 1][0] == cert["cot_step"]
                for c, condition in enumerate(PROBE_CONDITIONS):
                    position = cert["probe_step_index"][condition]
                    assert pair["probe_index"][c] == position
                    if position is not None:
                        probe = audit["probes"][pair["premise"]][c][0]
                        assert chunk["texts"][probe][1][position - 1][0] == pair["probe_steps"][c]
                checked += 1
            endpoint = models[data.index["audits"]["model"][audit["audit"]]]
            if endpoint == RESTARTED and chunk["problems"][audit["problem"]]["id"] == first:
                steps = [n for n, _ in original]
                assert steps == [1, 2, 3, 1, 2, 3]  # the restarted chain, as the page splits it
                at, premise = PAIR_COLUMNS.index("index"), PAIR_COLUMNS.index("premise")
                positions = {(p[at], p[premise]) for p in audit["pairs"]}
                assert len(positions) == len(audit["pairs"]) == 6 * len(audit["probes"])
    assert checked == len(certs)
