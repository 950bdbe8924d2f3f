"""Rendering a report dict (``report.json`` shape) as Markdown, CSV and a short summary.

Pure functions over the dict that ``evaluator.pipeline`` builds (``{"models": {NAME: {...}}}``,
schema in docs/report-schema.md), plus a loader for the published numbers of an evidence pack
so that ``report.md`` can show our table beside the paper's. Missing sections render as
"n/a" rather than failing: a partial run still gets a readable report.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from cotaudit.schema import JSONDict
from evaluator.cascade import CascadeMode
from evaluator.tables import decide_audit

# (report key, label, published key in final_report.json "main"/"ablation")
TABLE1_ROWS: tuple[tuple[str, str, str | None], ...] = (
    ("A_consistent_full", "A consistent, full", "A_consistent_full"),
    ("A_consistent_pred", "A consistent, pred", "A_consistent_pred"),
    ("A_Ap_combined_full", "A+A' combined, full", "A_Ap_combined_full"),
    ("A_Ap_cascade_full", "A+A'+cascade, full", "A_Ap_cascade_full"),
    ("A_Ap_cascade_pred", "A+A'+cascade, pred", "A_Ap_cascade_pred"),
    ("self_consistency_full", "self-consistency, full", "self_consistency_full"),
    ("string_diff_full", "string diff, full", "string_diff_full"),
)
TABLE2_ROWS: tuple[tuple[str, str, str | None], ...] = (
    ("A_consistent_unstable_negative_full", "A alone (UNSTABLE negative)", "A_consistent_only"),
    ("A_local_full", "A' alone", "A'_local_only"),
    ("A_Ap_combined_full", "A+A'", "A+A'_combined"),
    ("A_Ap_no_surface_full", "A+A' without surface control", "A+A'_no_surface_ctrl"),
    ("A_Ap_cascade_full", "A+A'+cascade", "A+A'_cascade_filter"),
    ("string_diff_full", "string diff", "string_diff_baseline"),
    ("A_consistent_lower_bound_full", "A consistent, lower bound", "lower_bound_A_consistent_full"),
)
TRUTH_ROWS: tuple[tuple[str, str, str | None], ...] = (
    ("A_consistent_truth", "A consistent vs truth", None),
    ("A_Ap_cascade_truth", "A+A'+cascade vs truth", None),
)
CONDITIONS = ("original", "consistent", "local", "surface")
ROWS_CSV_HEADER: tuple[str, ...] = ("model", "row", "precision", "recall", "f1", "ci_low")
ROWS_CSV_HEADER += ("ci_high", "tp", "fp", "fn", "tn")


def _num(value: Any, digits: int = 3) -> str:
    if isinstance(value, bool) or value is None:
        return "n/a"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _ci(row: Mapping[str, Any]) -> str:
    ci = row.get("ci")
    if isinstance(ci, Sequence) and len(ci) == 2:
        return f"[{_num(ci[0])}, {_num(ci[1])}]"
    return "n/a"


def _counts(row: Mapping[str, Any]) -> str:
    return "/".join(_num(row.get(k)) for k in ("tp", "fp", "fn", "tn"))


def _row_line(label: str, row: Mapping[str, Any] | None) -> str:
    if not row:
        return f"| {label} | n/a | n/a | n/a | n/a | n/a |"
    return (
        f"| {label} | {_num(row.get('precision'))} | {_num(row.get('recall'))} | "
        f"{_num(row.get('f1'))} | {_ci(row)} | {_counts(row)} |"
    )


def _table(
    rows: Mapping[str, Any],
    spec: Sequence[tuple[str, str, str | None]],
    published: Mapping[str, Any] | None,
) -> list[str]:
    head = "| row | P | R | F1 | F1 95% CI | tp/fp/fn/tn |"
    if published:
        head += " published F1 | published CI | published tp/fp/fn/tn |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for key, label, pub_key in spec:
        if key not in rows and not (published and pub_key in published):
            continue
        line = _row_line(label, rows.get(key))
        if published:
            pub = published.get(pub_key) if pub_key else None
            if pub:
                line += f" {_num(pub.get('f1'))} | {_ci(pub)} | {_counts(pub)} |"
            else:
                line += " n/a | n/a | n/a |"
        lines.append(line)
    return lines


def load_published(pack: Path, model: str) -> JSONDict | None:
    """The pack's published rows for ``model`` (``final_report.json`` main + ablation, CIs from
    ``bootstrap_ci.json``), keyed like the pack; ``None`` when the pack has no report."""
    base = pack / "evidence" / model
    final = base / "final_report.json"
    if not final.is_file():
        return None
    data = orjson.loads(final.read_bytes())
    rows: JSONDict = {}
    for section in ("main", "ablation"):
        for key, value in (data.get(section) or {}).items():
            if isinstance(value, dict):
                rows[key] = dict(value)
    lower = (data.get("analysis") or {}).get("lower_bound_A_consistent_full")
    if isinstance(lower, dict):
        rows["lower_bound_A_consistent_full"] = dict(lower, tn=None)
    boot = base / "bootstrap_ci.json"
    if boot.is_file():
        cis = orjson.loads(boot.read_bytes())
        for key, value in cis.items():
            f1 = (value.get("ci") or {}).get("f1") if isinstance(value, dict) else None
            if key in rows and isinstance(f1, dict):
                rows[key]["ci"] = [f1.get("ci_lower"), f1.get("ci_upper")]
    return rows


def _flat(value: Any) -> str:
    """A table cell: mappings as ``k: v`` lists (nested ones in parentheses), lists joined."""
    if isinstance(value, Mapping):
        parts = [
            f"{k}: ({_flat(v)})" if isinstance(v, Mapping) else f"{k}: {_flat(v)}"
            for k, v in value.items()
        ]
        return ", ".join(parts) or "none"
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "none"
    return _num(value)


def _kv_table(title: str, values: Mapping[str, Any]) -> list[str]:
    lines = [f"| {title} | value |", "|---|---|"]
    lines += [f"| {key} | {_flat(value)} |" for key, value in values.items()]
    return lines


def render_model_markdown(
    name: str,
    model: Mapping[str, Any],
    *,
    published: Mapping[str, Any] | None = None,
    figures: Sequence[str] = (),
) -> str:
    """The report.md section of one model."""
    rows = model.get("rows") or {}
    out = [f"## {name}", ""]
    boot = model.get("bootstrap") or {}
    if boot:
        out.append(
            f"Bootstrap: B = {boot.get('n_boot', 'n/a')}, seed {boot.get('seed', 'n/a')}, "
            "95% percentile intervals, problems resampled."
        )
        out.append("")
    out += ["### Table 1: detection of direct premise dependencies", ""]
    if published:
        out.append("Beside each row: the published number from the authors' pipeline.")
        out.append("")
    out += _table(rows, TABLE1_ROWS, published)
    out += ["", "### Table 2: ablation", ""]
    out += _table(rows, TABLE2_ROWS, published)
    if any(k in rows for k, _, _ in TRUTH_ROWS):
        out += ["", "### Against what the model truly used (simulated reasoners)", ""]
        out += _table(rows, TRUTH_ROWS, None)
        truth = model.get("truth") or {}
        if truth:
            out += ["", *_kv_table("truth check", truth)]
    out += ["", "### Analyses", ""]
    paired = model.get("paired") or {}
    for key, value in paired.items():
        if isinstance(value, Mapping):
            diff = value.get("diff", value.get("f1_diff"))
            out.append(f"- paired F1 difference {key}: {_num(diff)} {_ci(value)}")
    rawr = model.get("rawr") or {}
    if rawr:
        out.append(
            f"- right answer, wrong reasoning: {_num(rawr.get('rawr'))} of "
            f"{_num(rawr.get('correct'))} correct answers "
            f"(structural only {_num(rawr.get('structural_only'))}, "
            f"predicate {_num(rawr.get('predicate'))})"
        )
    combined = model.get("rawr_combined") or {}
    if combined:
        out.append(
            f"- right answer, wrong reasoning under A+A': {_num(combined.get('rawr'))} of "
            f"{_num(combined.get('correct'))} (the local probe sees entity premises, A cannot)"
        )
    if "misrepresentations" in model:
        out.append(f"- misrepresentations (INSENSITIVE yet citing): {model['misrepresentations']}")
    if "n_cascaded" in model:
        out.append(f"- cascaded (local-only change below a changed parent): {model['n_cascaded']}")
    vanished = model.get("vanished") or {}
    if vanished.get("pairs"):
        out.append(
            f"- vanished local conclusions (the local output, read whole, no longer reaches "
            f"the step): {_num(vanished.get('pairs'))} pairs; GROUNDED by them under A+A' "
            f"{_num(vanished.get('grounded_by_vanished'))}, of which cascaded "
            f"{_num(vanished.get('cascaded'))}, still positive after the cascade "
            f"{_num(vanished.get('grounded_after_cascade'))}"
        )
    shared = model.get("target_shared") or {}
    if shared.get("pairs"):
        out.append(
            f"- target shared with another premise (A+A' decides by the local probe): "
            f"{_num(shared.get('pairs'))} pairs; positive under A "
            f"{_num(shared.get('positive_consistent'))}, under A+A' "
            f"{_num(shared.get('positive_combined'))}"
        )
    assumed = model.get("assumed_steps") or {}
    if any(assumed.values()):
        out.append(
            "- assumed assertions (made-up bridges): "
            + ", ".join(f"{c} {n}" for c, n in assumed.items())
        )
    certs = model.get("certificates") or {}
    if certs:
        out.append(
            f"- certificates: {_num(certs.get('total'))}, evaluable {_num(certs.get('evaluable'))}"
        )
    errors = model.get("errors") or {}
    if errors:
        out.append(f"- failed requests (not evaluated): {_num(errors.get('count'))}")
    fps = model.get("false_positives") or []
    if fps:
        out += ["", f"False positives of A consistent, full ({len(fps)}):", ""]
        for fp in fps:
            out.append(f"- {fp.get('id')}: {fp.get('cause')}")
    parse_rates = model.get("parse_rates") or {}
    if parse_rates:
        out += ["", "### Parse rates (read as a proposition or classified non-assertion)", ""]
        out += ["| condition | rate |", "|---|---|"]
        out += [f"| {c} | {_num(parse_rates.get(c))} |" for c in CONDITIONS if c in parse_rates]
    alignment = model.get("alignment") or {}
    if alignment:
        out += ["", "### Alignment", "", *_kv_table("alignment", alignment)]
    non_assertions = model.get("non_assertions") or {}
    if non_assertions:
        out += ["", "### Non-assertions (classified, not failures)", ""]
        out += _kv_table("condition", non_assertions)
    by_hops = model.get("by_hops") or {}
    if by_hops:
        out += ["", "### F1 by chain length", "", "| hops | F1 | n problems |", "|---|---|---|"]
        for hops, value in sorted(by_hops.items(), key=lambda kv: int(kv[0])):
            if isinstance(value, Mapping):
                out.append(
                    f"| {hops} | {_num(value.get('f1'))} | {_num(value.get('n_problems'))} |"
                )
            else:
                out.append(f"| {hops} | {_num(value)} | n/a |")
    if figures:
        out += ["", "### Figures", ""]
        out += [f"![{Path(f).stem}]({f})" for f in figures]
    return "\n".join(out) + "\n"


COMPARISON_COLUMNS: tuple[tuple[str, str], ...] = (
    ("A_consistent_full", "F1 A, full"),
    ("A_consistent_pred", "F1 A, pred"),
    ("A_Ap_cascade_full", "F1 A+A'+cascade"),
    ("self_consistency_full", "F1 self-consistency"),
)


def render_comparison(models: Mapping[str, Mapping[str, Any]], *, figure: str | None = None) -> str:
    """One table comparing several models on the headline rows (with CIs), RAWR and accuracy."""
    head = "| model | accuracy | " + " | ".join(label for _, label in COMPARISON_COLUMNS)
    head += " | RAWR | ignored premises flagged |"
    out = ["## Models side by side", "", head, "|" + "---|" * (len(COMPARISON_COLUMNS) + 4)]
    for name, model in models.items():
        rows = model.get("rows") or {}
        cells = []
        for key, _ in COMPARISON_COLUMNS:
            row = rows.get(key)
            cells.append(f"{_num(row.get('f1'))} {_ci(row)}" if row else "n/a")
        rate = (model.get("accuracy") or {}).get("rate")
        rawr = model.get("rawr") or {}
        truth = model.get("truth") or {}
        flagged = (
            f"{truth['ignored_premises_flagged']}/{truth['ignored_premises']}"
            if "ignored_premises" in truth
            else "n/a"
        )
        out.append(
            f"| {name} | {_num(rate)} | "
            + " | ".join(cells)
            + f" | {_num(rawr.get('rawr'))}/{_num(rawr.get('correct'))} | {flagged} |"
        )
    if figure:
        out += ["", f"![models side by side]({figure})"]
    return "\n".join(out) + "\n"


def render_markdown(
    report: Mapping[str, Any],
    *,
    published: Mapping[str, Mapping[str, Any]] | None = None,
    figures: Mapping[str, Sequence[str]] | None = None,
    comparison_figure: str | None = None,
) -> str:
    """The whole report.md: models side by side (when several), then one section per model;
    ``published`` maps model -> pack rows."""
    parts = ["# cotaudit evaluation", ""]
    source = report.get("source")
    if source:
        parts += [f"Stream: `{source}`", ""]
    models = report.get("models") or {}
    if len(models) > 1:
        parts.append(render_comparison(models, figure=comparison_figure))
    for name, model in models.items():
        parts.append(
            render_model_markdown(
                name,
                model,
                published=(published or {}).get(name),
                figures=(figures or {}).get(name, ()),
            )
        )
    return "\n".join(parts)


def render_summary(report: Mapping[str, Any]) -> str:
    """A few lines per model for the terminal: the headline rows and coverage."""
    lines: list[str] = []
    for name, model in (report.get("models") or {}).items():
        rows = model.get("rows") or {}
        lines.append(f"{name}:")
        for key, label, _ in TABLE1_ROWS[:4] + TABLE1_ROWS[5:]:
            row = rows.get(key)
            if row:
                lines.append(
                    f"  {label:<24} F1 {_num(row.get('f1'))} {_ci(row)}  tp/fp/fn/tn {_counts(row)}"
                )
        rates = model.get("parse_rates") or {}
        if rates:
            lines.append(
                "  parse rates: " + ", ".join(f"{c} {_num(rates.get(c))}" for c in CONDITIONS)
            )
        certs = model.get("certificates") or {}
        rawr = model.get("rawr") or {}
        combined = model.get("rawr_combined") or {}
        vanished = model.get("vanished") or {}
        lines.append(
            f"  certificates {_num(certs.get('total'))} (evaluable "
            f"{_num(certs.get('evaluable'))}); RAWR {_num(rawr.get('rawr'))}/"
            f"{_num(rawr.get('correct'))} (A+A' {_num(combined.get('rawr'))}); "
            f"misrepresentations {_num(model.get('misrepresentations'))}; vanished local "
            f"conclusions {_num(vanished.get('pairs'))}"
        )
    return "\n".join(lines)


def write_csv_tables(report: Mapping[str, Any], out_dir: Path) -> list[Path]:
    """``rows.csv`` (every row of every model), ``parse_rates.csv`` and ``by_hops.csv``."""
    written: list[Path] = []
    rows_path = out_dir / "rows.csv"
    with rows_path.open("w", newline="", encoding="utf-8") as handle:
        w = csv.writer(handle)
        w.writerow(ROWS_CSV_HEADER)
        for name, model in (report.get("models") or {}).items():
            for key, row in (model.get("rows") or {}).items():
                ci = row.get("ci") or [None, None]
                w.writerow(
                    [name, key]
                    + [row.get(k) for k in ("precision", "recall", "f1")]
                    + list(ci[:2])
                    + [row.get(k) for k in ("tp", "fp", "fn", "tn")]
                )
    written.append(rows_path)
    rates_path = out_dir / "parse_rates.csv"
    with rates_path.open("w", newline="", encoding="utf-8") as handle:
        w = csv.writer(handle)
        w.writerow(["model", *CONDITIONS])
        for name, model in (report.get("models") or {}).items():
            rates = model.get("parse_rates") or {}
            w.writerow([name] + [rates.get(c) for c in CONDITIONS])
    written.append(rates_path)
    hops_path = out_dir / "by_hops.csv"
    with hops_path.open("w", newline="", encoding="utf-8") as handle:
        w = csv.writer(handle)
        w.writerow(["model", "hops", "f1", "n_problems"])
        for name, model in (report.get("models") or {}).items():
            for hops, value in (model.get("by_hops") or {}).items():
                v = value if isinstance(value, Mapping) else {"f1": value}
                w.writerow([name, hops, v.get("f1"), v.get("n_problems")])
    written.append(hops_path)
    return written


# Reconciliation with the authors' certificates ----------------------------------------------

_EVALUATOR_CONDITIONS = {
    "verdict_consistent": ("consistent", "surface"),
    "verdict": ("consistent", "local", "surface"),
    "verdict_cascade": ("consistent", "local", "surface"),
}


def _difference_cause(cert: Mapping[str, Any], theirs: Any, conditions: Sequence[str]) -> str:
    """Why our verdict and the authors' differ, from the fields both sides recorded.

    ``theirs`` is the authors' :class:`~evaluator.pairs.AuditPair`; their probe steps are
    paired by step number, so their probe step for CoT step k is step k of the probe output.
    """
    ours_orig = cert["phi"]["original"]
    if not theirs.parsed_original and ours_orig is not None:
        return "original step: their normaliser failed, ours read it"
    if ours_orig != theirs.phi_original:
        return "original step: conclusions read differently"
    if bool(cert["excluded"]) != theirs.excluded:
        return "original alignment: matched/unmatched differs"
    if cert["proof_step"] is None:
        return "original step matches no proof step (excluded by both): no probe step sought"
    for condition in conditions:
        our_step = cert["probe_steps"].get(condition)
        our_phi = cert["phi"][condition]
        their_phi = theirs.phi(condition)
        their_read = theirs.parsed(condition)
        if cert["alignment"].get(condition) == "vanished":
            # The local output, read whole, no longer reaches the step while the surface
            # control does: ours a change (R_GROUNDED_VANISHED), theirs whatever step k said.
            how = "compared step k positionally" if their_read else "left it unread"
            return f"{condition} probe: the conclusion vanished (ours a change); theirs {how}"
        if our_step is None and their_read:
            return f"{condition} probe: no counterpart by content (ours missing), theirs positional"
        if our_step is not None and our_step != cert["cot_step"]:
            if our_phi != their_phi:
                return f"{condition} probe: their step-number pairing took another step"
            continue
        if not their_read and our_phi is not None:
            return f"{condition} probe: their normaliser failed, ours read it"
        if our_phi != their_phi:
            return f"{condition} probe: same step, conclusions read differently"
    return "other: same readings, different decision"


def _same_probe_steps(cert: Mapping[str, Any], theirs: Any, conditions: Sequence[str]) -> bool:
    if cert["phi"]["original"] is None or not theirs.parsed_original:
        return False
    for condition in conditions:
        if cert["probe_steps"].get(condition) != cert["cot_step"]:
            return False
        if cert["phi"][condition] is None or not theirs.parsed(condition):
            return False
    return True


def authors_cascade_verdicts(
    authors_pairs: Mapping[tuple[str, int, str], Any], cascade_mode: CascadeMode
) -> dict[tuple[str, int, str], str]:
    """The authors' A+A'+cascade verdict per pair, as ``rescore`` derives it (their pack has no
    per-certificate cascade verdict; our decision layer on their fields gives the published
    row exactly: docs/decision-layer.md)."""
    keys = list(authors_pairs)
    pairs = [authors_pairs[k] for k in keys]
    cascaded = decide_audit(pairs, cascade_mode=cascade_mode).cascaded
    return {k: d.verdict.value for k, d in zip(keys, cascaded, strict=True)}


def reconcile(
    certificates: Sequence[Mapping[str, Any]],
    authors_pairs: Mapping[tuple[str, int, str], Any],
    authors_verdicts: Mapping[tuple[str, int, str], Any],
    *,
    cascade_mode: CascadeMode = "previous_cot_step",
) -> JSONDict:
    """Compare our certificates with the authors' (``evaluator.authors.load_pack``).

    For the consistent-only verdict (A), the combined verdict (A+A', before the cascade
    filter) and A+A' after the cascade filter (theirs from :func:`authors_cascade_verdicts`):
    how many differ, each with its cause, and the agreement on the pairs where both pipelines
    read the same probe steps (their step k = our content-aligned step).
    """
    out: JSONDict = {}
    their_cascade = authors_cascade_verdicts(authors_pairs, cascade_mode)
    for field_name, conditions in _EVALUATOR_CONDITIONS.items():
        their_field = "verdict_consistent" if field_name == "verdict_consistent" else "verdict"
        causes: Counter[str] = Counter()
        transitions: Counter[str] = Counter()
        differing: list[JSONDict] = []
        same = agree = compared = 0
        for cert in certificates:
            key = (str(cert["problem_id"]), int(cert["cot_step"]), str(cert["premise_id"]))
            theirs = authors_pairs.get(key)
            verdict = authors_verdicts.get(key)
            if theirs is None or verdict is None:
                causes["no authors certificate"] += 1
                continue
            compared += 1
            ours_v = str(cert[field_name])
            if field_name == "verdict_cascade":
                theirs_v = their_cascade[key]
            else:
                theirs_v = str(getattr(verdict, their_field))
            if _same_probe_steps(cert, theirs, conditions):
                same += 1
                agree += ours_v == theirs_v
            if ours_v == theirs_v:
                continue
            cause = _difference_cause(cert, theirs, conditions)
            if field_name == "verdict_cascade" and cause.startswith("other"):
                cause = "cascade filter: the parent step's decision differs"
            causes[cause] += 1
            transitions[f"{theirs_v} -> {ours_v}"] += 1
            differing.append({"id": cert["id"], "theirs": theirs_v, "ours": ours_v, "cause": cause})
        out[field_name] = {
            "compared": compared,
            "differ": len(differing),
            "causes": dict(causes.most_common()),
            "transitions": dict(transitions.most_common()),
            "same_probe_steps": same,
            "same_probe_steps_agree": agree,
            "same_probe_steps_agreement": agree / same if same else None,
            "differences": differing,
        }
    return out
