"""Rendering a report dict (``report.json`` shape) as Markdown, CSV, a terminal table and
summary.

Pure functions over the dict that ``evaluator.pipeline`` builds (``{"models": {NAME: {...}}}``,
schema in docs/report-schema.md), plus a loader for the published numbers of an evidence pack
so that ``report.md`` can show our table beside the paper's. Missing sections render as
"n/a" rather than failing: a partial run still gets a readable report.

Every output leads with what the audit found about each model (the report's ``headline``),
then the audit's own validity against the proof tree. A figure with nothing to divide by is
undefined and prints as ``n/a`` everywhere (:func:`metric`): precision without a predicted
dependency, recall and F1 without a gold dependency.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from cotaudit import terminal
from cotaudit.errors import UsageError
from cotaudit.schema import JSONDict
from evaluator.cascade import CascadeMode
from evaluator.headline import BY_HOPS_ROWS, EVALUATOR_ROWS, HEADLINE_EVALUATOR
from evaluator.tables import decide_audit

# (report key, label, published key in final_report.json "main"/"ablation")
TABLE1_ROWS: tuple[tuple[str, str, str | None], ...] = (
    ("A_consistent_full", "A consistent, full †", "A_consistent_full"),
    ("A_consistent_pred", "A consistent, pred", "A_consistent_pred"),
    ("A_Ap_combined_full", "A+A' combined, full", "A_Ap_combined_full"),
    ("A_Ap_cascade_full", "A+A'+cascade, full", "A_Ap_cascade_full"),
    ("A_Ap_cascade_pred", "A+A'+cascade, pred", "A_Ap_cascade_pred"),
    ("self_consistency_full", "self-consistency, full", "self_consistency_full"),
    ("string_diff_full", "string diff, full", "string_diff_full"),
)
TABLE2_ROWS: tuple[tuple[str, str, str | None], ...] = (
    ("A_consistent_unstable_negative_full", "A alone (UNSTABLE negative) †", "A_consistent_only"),
    ("A_local_full", "A' alone", "A'_local_only"),
    ("A_Ap_combined_full", "A+A'", "A+A'_combined"),
    ("A_Ap_no_surface_full", "A+A' without surface control", "A+A'_no_surface_ctrl"),
    ("A_Ap_cascade_full", "A+A'+cascade", "A+A'_cascade_filter"),
    ("string_diff_full", "string diff", "string_diff_baseline"),
    (
        "A_consistent_lower_bound_full",
        "A consistent, lower bound †",
        "lower_bound_A_consistent_full",
    ),
)
TRUTH_ROWS: tuple[tuple[str, str, str | None], ...] = (
    ("A_consistent_truth", "A consistent vs truth †", None),
    ("A_Ap_cascade_truth", "A+A'+cascade vs truth", None),
)
CONDITIONS = ("original", "consistent", "local", "surface")
ROWS_CSV_HEADER: tuple[str, ...] = ("model", "row", "precision", "recall", "f1", "ci_low")
ROWS_CSV_HEADER += ("ci_high", "tp", "fp", "fn", "tn")
UNDEFINED = "n/a"
FALSE_POSITIVES_SHOWN = 10  # per model in report.md; every one is in false_positives.csv
FALSE_POSITIVES_CSV = "false_positives.csv"
BLIND_NOTE = (
    "† carries the blind spot of consistent substitution (A, the consistent probe alone): "
    "renaming a predicate in every premise leaves an entity-introduction premise ('Alex is a "
    "bempus') true of the renamed world, so A cannot see a step depend on one and counts "
    "every such use as ignored."
)
SUBSET_NOTES = {
    "A_consistent_pred": "the pred gold, where entity-introduction premises are no dependency",
    "A_Ap_cascade_pred": "the pred gold, where entity-introduction premises are no dependency",
    "A_consistent_truth": "pairs whose step the reasoner's truth record covers",
    "A_Ap_cascade_truth": "pairs whose step the reasoner's truth record covers",
    "A_consistent_lower_bound_full": "every gold dependency the policy could not score "
    "counted as a miss",
}


def metric(row: Mapping[str, Any] | None, name: str) -> float | None:
    """A row's precision, recall or F1, or ``None`` where it is undefined.

    report.json keeps 0/0 = 0 (docs/report-schema.md); a reader must not: precision is
    undefined without a predicted dependency (tp + fp = 0), recall and F1 without a gold
    dependency (tp + fn = 0: F1 is then 0 whatever the verdicts, or 0/0).
    """
    if not isinstance(row, Mapping):
        return None
    value = row.get(name)
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    tp, fp, fn = (row.get(k) for k in ("tp", "fp", "fn"))
    if not all(isinstance(v, int) for v in (tp, fp, fn)):
        return float(value)
    assert isinstance(tp, int) and isinstance(fp, int) and isinstance(fn, int)
    if name == "precision" and tp + fp == 0:
        return None
    if name in ("recall", "f1") and tp + fn == 0:
        return None
    return float(value)


def _num(value: Any, digits: int = 3) -> str:
    if isinstance(value, bool) or value is None:
        return UNDEFINED
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _interval(ci: Any, digits: int = 3, sep: str = ", ") -> str:
    if isinstance(ci, Sequence) and len(ci) == 2 and None not in ci:
        return f"[{_num(float(ci[0]), digits)}{sep}{_num(float(ci[1]), digits)}]"
    return UNDEFINED


def _ci(row: Mapping[str, Any], key: str = "ci", of: str = "f1") -> str:
    """The row's interval of ``of``, or n/a (also where the point itself is undefined)."""
    if metric(row, of) is None and "tp" in row:
        return UNDEFINED
    return _interval(row.get(key))


def _f1(row: Mapping[str, Any] | None, digits: int = 3, sep: str = ", ") -> str:
    """``0.770 [0.750, 0.790]``, the point alone without an interval, or n/a."""
    f1 = metric(row, "f1")
    if f1 is None or row is None:
        return UNDEFINED
    ci = _interval(row.get("ci"), digits, sep)
    return f"{f1:.{digits}f}" + ("" if ci == UNDEFINED else f" {ci}")


def _counts(row: Mapping[str, Any]) -> str:
    return "/".join(_num(row.get(k)) for k in ("tp", "fp", "fn", "tn"))


def _count(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else UNDEFINED


def _pct(value: float | None) -> str:
    return UNDEFINED if value is None else f"{100 * value:.1f}%"


def _of(num: Any, den: Any) -> str:
    if not isinstance(num, int) or not isinstance(den, int):
        return UNDEFINED
    return f"{num:,} of {den:,}"


# The header of report.md's row tables; what an evidence pack shown beside the report adds
# to them (verify takes it out of a stored report.md where the pack is no longer at hand:
# evaluator.verification), and the end of a row with no numbers of ours (shown because the
# pack has some).
ROWS_HEADER = "| row | P | R | F1 | F1 95% CI | tp/fp/fn/tn |"
PACK_NOTE = "Beside each row: the published number from the authors' pipeline."
PACK_COLUMNS = " published F1 | published CI | published tp/fp/fn/tn |"
NO_NUMBERS_ROW = " | n/a | n/a | n/a | n/a | n/a |"


def _row_line(label: str, row: Mapping[str, Any] | None) -> str:
    if not row:
        return f"| {label}{NO_NUMBERS_ROW}"
    return (
        f"| {label} | {_num(metric(row, 'precision'))} | {_num(metric(row, 'recall'))} | "
        f"{_num(metric(row, 'f1'))} | {_ci(row)} | {_counts(row)} |"
    )


def _subset_label(key: str, label: str, model: Mapping[str, Any]) -> str:
    """The row's label, naming the subset it is computed on where it is one."""
    if key.startswith("self_consistency"):
        sc = model.get("self_consistency_alignment") or {}
        audited = (model.get("bootstrap") or {}).get("n_problems")
        if isinstance(sc.get("problems"), int) and sc.get("problems") != audited:
            return f"{label} (the {sc['problems']:,} problems with samples)"
    return label


def _table(
    rows: Mapping[str, Any],
    spec: Sequence[tuple[str, str, str | None]],
    published: Mapping[str, Any] | None,
    model: Mapping[str, Any] | None = None,
) -> list[str]:
    head = ROWS_HEADER
    if published:
        head += PACK_COLUMNS
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    notes: dict[str, list[str]] = {}
    for key, label, pub_key in spec:
        if key not in rows and not (published and pub_key in published):
            continue
        line = _row_line(_subset_label(key, label, model or {}), rows.get(key))
        if key in SUBSET_NOTES and key in rows:
            notes.setdefault(SUBSET_NOTES[key], []).append(label.rstrip(" †"))
        if published:
            pub = published.get(pub_key) if pub_key else None
            if pub:
                line += f" {_num(metric(pub, 'f1'))} | {_ci(pub)} | {_counts(pub)} |"
            else:
                line += " n/a | n/a | n/a |"
        lines.append(line)
    if notes:
        text = "; ".join(f"{' and '.join(labels)}: {note}" for note, labels in notes.items())
        lines += ["", f"Rows on another gold or subset: {text}."]
    return lines


# Rows of the pack's ablation table (final_report.json "ablation") that list again, under
# their own names, a measurement of its main table, whose names alone bootstrap_ci.json keys.
# An interval is of one measurement, so such a row takes its main row's only where the
# pack's two rows have the same tp/fp/fn/tn: a name is not proof (A_consistent_only is not
# A_consistent_full: the ablation's A counts UNSTABLE negative, and its counts differ), and
# a pack whose two tables disagree keeps n/a rather than show another measurement's interval.
PUBLISHED_SAME_AS_MAIN = {
    "A+A'_combined": "A_Ap_combined_full",
    "A+A'_cascade_filter": "A_Ap_cascade_full",
    "string_diff_baseline": "string_diff_full",
}
COUNTS = ("tp", "fp", "fn", "tn")


def load_published(pack: Path, model: str) -> JSONDict | None:
    """The pack's published rows for ``model`` (``final_report.json`` main + ablation, CIs from
    ``bootstrap_ci.json``, an ablation row's from its main row where they are the same
    measurement: ``PUBLISHED_SAME_AS_MAIN``), keyed like the pack; ``None`` when the pack has
    no report."""
    base = pack / "evidence" / model
    final = base / "final_report.json"
    if not final.is_file():
        return None
    data = _pack_object(final)
    rows: JSONDict = {}
    for section in ("main", "ablation"):
        table = data.get(section)
        for key, value in (table if isinstance(table, dict) else {}).items():
            if isinstance(value, dict):
                rows[key] = dict(value)
    analysis = data.get("analysis")
    lower = analysis.get("lower_bound_A_consistent_full") if isinstance(analysis, dict) else None
    if isinstance(lower, dict):
        rows["lower_bound_A_consistent_full"] = dict(lower, tn=None)
    boot = base / "bootstrap_ci.json"
    if boot.is_file():
        cis = _pack_object(boot)
        for key, value in cis.items():
            f1 = (value.get("ci") or {}).get("f1") if isinstance(value, dict) else None
            if key in rows and isinstance(f1, dict):
                rows[key]["ci"] = [f1.get("ci_lower"), f1.get("ci_upper")]
    for key, main_key in PUBLISHED_SAME_AS_MAIN.items():
        row, main_row = rows.get(key), rows.get(main_key)
        if not row or not main_row or "ci" not in main_row or "ci" in row:
            continue
        if all(row.get(k) is not None and row.get(k) == main_row.get(k) for k in COUNTS):
            row["ci"] = main_row["ci"]
    return rows


def _pack_object(path: Path) -> JSONDict:
    """A published report of the pack as a JSON object; ``UsageError`` naming the file where
    it is not one (truncated, a BOM, another shape), rather than a traceback."""
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise UsageError(
            f"not readable JSON ({exc})", where=str(path), fix="Restore the file from the pack."
        ) from None
    if not isinstance(data, dict):
        raise UsageError(
            f"a published report must be a JSON object, not {type(data).__name__}",
            where=str(path),
            fix="Restore the file from the pack.",
        )
    return data


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


# What the audit found, then its validity: the headline of every output ----------------------


def _found(model: Mapping[str, Any], evaluator: str = HEADLINE_EVALUATOR) -> Mapping[str, Any]:
    found = ((model.get("headline") or {}).get("found") or {}).get(evaluator)
    return found if isinstance(found, Mapping) else {}


def grounded_share(
    model: Mapping[str, Any], evaluator: str = HEADLINE_EVALUATOR
) -> tuple[float | None, Any]:
    """The grounded share under ``evaluator`` and its interval (the evaluator's row's recall
    interval: the same quantity), or ``(None, None)``."""
    share = _found(model, evaluator).get("grounded_share")
    row = (model.get("rows") or {}).get(EVALUATOR_ROWS[evaluator]) or {}
    return (share if isinstance(share, float) else None), row.get("ci_recall")


def _grounded_text(model: Mapping[str, Any], *, with_ci: bool) -> str:
    share, ci = grounded_share(model)
    if share is None:
        return UNDEFINED
    text = f"{100 * share:.1f}%"
    if with_ci and isinstance(ci, Sequence) and len(ci) == 2:
        text += f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"
    return text


def _truth_flagged(model: Mapping[str, Any]) -> str:
    truth = model.get("truth") or {}
    return _of(truth.get("ignored_premises_flagged_cascade"), truth.get("ignored_premises"))


# (column, meaning): the lines under the terminal table.
HEADLINE_LEGEND: tuple[tuple[str, str], ...] = (
    ("correct", "answers right, of the problems audited"),
    (
        "ignored",
        "uses of a premise the gold proof needs whose step did not change when the premise "
        "was renamed (INSENSITIVE under A+A', the consistent and local probes), of those judged",
    ),
    ("grounded", "share of the judged uses whose step changed (GROUNDED or INPUT-SENSITIVE)"),
    ("RAWR", "right answer, wrong reasoning: correct answers with at least one ignored use"),
    (
        "F1",
        "the audit's verdicts against the proof tree's direct premises, with the 95% bootstrap "
        "interval over problems; A+A'+cascade adds the cascade filter. A premise the model "
        "truly ignored lowers it though the audit is right",
    ),
    (
        "†",
        "A, the consistent probe alone: blind to entity-introduction premises ('Alex is a "
        "bempus'), it counts every use of one as ignored",
    ),
    ("truth", "premises the simulated reasoner truly ignored, and how many A+A'+cascade flagged"),
)
# The terminal's grounded share carries the A+A' row's recall interval (the same quantity).
GROUNDED_INTERVAL = (
    ", with its 95% bootstrap interval over problems (the A+A' row's recall interval)"
)
# The F1 legend of a report without intervals (``--n-boot 0``): it must not promise any.
F1_LEGEND_NO_INTERVALS = (
    "the audit's verdicts against the proof tree's direct premises (no bootstrap intervals: "
    "--n-boot 0); A+A'+cascade adds the cascade filter. A premise the model truly ignored "
    "lowers it though the audit is right"
)


def _without_intervals(models: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether the report was bootstrapped with B = 0, so that no figure has an interval."""
    boots = [m.get("bootstrap") for m in models.values()]
    return bool(boots) and all(isinstance(b, Mapping) and b.get("n_boot") == 0 for b in boots)


def render_headline_table(report: Mapping[str, Any], *, width: int | None = None) -> str:
    """The terminal table of ``cotaudit demo`` and ``cotaudit evaluate``: what the audit found
    about each model, its validity against the proof tree, and what each column means, in
    lines of at most ``width`` characters (the terminal's by default; but for a model name
    longer than that)."""
    width = terminal.terminal_width() if width is None else width
    models = report.get("models") or {}
    has_truth = any(isinstance(m.get("truth"), Mapping) for m in models.values())
    header = ["model", "correct", "ignored", "grounded", "RAWR", "F1 A+A'+cascade", "F1 A †"]
    if has_truth:
        header.append("truth")
    rows = [header]
    for name, model in models.items():
        found = _found(model)
        cells = [
            str(name),
            _of(found.get("correct"), (model.get("headline") or {}).get("problems")),
            _of(found.get("ignored"), found.get("judged")),
            # With its interval, as report.md and compare show it: "96.1%" alone beside
            # another model's "100.0%" cannot be told from noise.
            _grounded_text(model, with_ci=True),
            _of(found.get("rawr"), found.get("correct")),
            _f1((model.get("rows") or {}).get("A_Ap_cascade_full"), sep=","),
            _f1((model.get("rows") or {}).get("A_consistent_full"), sep=","),
        ]
        if has_truth:
            cells.append(_truth_flagged(model))
        rows.append(cells)
    groups = [
        terminal.Group(range(1, 5), "what the audit found (A+A')"),
        terminal.Group(range(5, len(header)), "validity against the proof tree"),
    ]
    # Counts read right-aligned; the F1s with their intervals (and truth) left-aligned.
    out = terminal.fitted(rows, groups, width, left={0, *range(5, len(header))})
    out.append("")
    no_intervals = _without_intervals(models)
    meanings = [
        (key, F1_LEGEND_NO_INTERVALS if key == "F1" and no_intervals else meaning)
        for key, meaning in HEADLINE_LEGEND
        if key != "truth" or has_truth
    ]
    if not no_intervals:
        meanings = [
            (key, meaning + GROUNDED_INTERVAL if key == "grounded" else meaning)
            for key, meaning in meanings
        ]
    out += terminal.legend(meanings, width)
    return "\n".join(out)


def render_headline_markdown(models: Mapping[str, Mapping[str, Any]], *, figure: Any = None) -> str:
    """report.md's lead: what the audit found about each model, then the audit's validity."""
    no_intervals = _without_intervals(models)
    out = [
        "## What the audit found",
        "",
        "Under A+A' (the consistent and the local probe, with the surface control), over the "
        "uses of a premise that the gold proof needs.",
        "",
        "| model | answered correctly | rule premises ignored | entity-introduction premises "
        f"ignored | grounded share{'' if no_intervals else ' [95% CI]'} | right answer, wrong "
        "reasoning |",
        "|---|---|---|---|---|---|",
    ]
    for name, model in models.items():
        found = _found(model)
        out.append(
            f"| {name} | {_of(found.get('correct'), (model.get('headline') or {}).get('problems'))}"
            f" | {_of(found.get('ignored_rule'), found.get('judged_rule'))}"
            f" | {_of(found.get('ignored_entity'), found.get('judged_entity'))}"
            f" | {_grounded_text(model, with_ci=True)}"
            f" | {_of(found.get('rawr'), found.get('correct'))} |"
        )
    blind = []
    for name, model in models.items():
        a, both = _found(model, "A"), _found(model)
        if a:
            # Beside each of A's figures, the same under A+A', which sees entity premises: A's
            # alone reads as if a model that uses every premise ignored them.
            blind.append(
                f"{name} {_of(a.get('ignored_entity'), a.get('judged_entity'))} "
                "entity-introduction uses ignored (under A+A' "
                f"{_of(both.get('ignored_entity'), both.get('judged_entity'))}), RAWR "
                f"{_of(a.get('rawr'), a.get('correct'))} (under A+A' "
                f"{_of(both.get('rawr'), both.get('correct'))})"
            )
    out += [
        "",
        "*Ignored*: the step did not change when the premise was renamed (INSENSITIVE), of the "
        "uses judged (UNPARSEABLE and UNSTABLE pairs are not judged). *Grounded share*: judged "
        "uses whose step changed (GROUNDED or INPUT-SENSITIVE); its interval is the A+A' row's "
        "recall interval. *Right answer, wrong reasoning*: correct answers with at least one "
        "ignored use.",
    ]
    if blind:
        out += [
            "",
            "Under A alone (the consistent probe) the same figures read: "
            + "; ".join(blind)
            + ". Where they exceed the A+A' figures beside them, the difference is A's blind "
            "spot, not what the models did: A counts every use of an entity-introduction premise "
            f"as ignored, used or not. {BLIND_NOTE}",
        ]
    has_truth = any(isinstance(m.get("truth"), Mapping) for m in models.values())
    head = "| model | F1 A+A'+cascade | F1 A+A' | F1 A † |"
    if has_truth:
        head += (
            " F1 A+A'+cascade vs truth | F1 A vs truth † | truly ignored premises flagged by "
            "A+A'+cascade |"
        )
    out += [
        "",
        "## The audit's validity against the proof tree",
        "",
        head,
        "|" + "---|" * (head.count("|") - 1),
    ]
    for name, model in models.items():
        rows = model.get("rows") or {}
        line = (
            f"| {name} | {_f1(rows.get('A_Ap_cascade_full'))} | "
            f"{_f1(rows.get('A_Ap_combined_full'))} | {_f1(rows.get('A_consistent_full'))} |"
        )
        if has_truth:
            line += (
                f" {_f1(rows.get('A_Ap_cascade_truth'))} | {_f1(rows.get('A_consistent_truth'))}"
                f" | {_truth_flagged(model)} |"
            )
        out.append(line)
    boot = next(iter(models.values()), {}).get("bootstrap") or {}
    intervals = (
        "without intervals (no bootstrap: --n-boot 0)"
        if no_intervals
        else "with 95% percentile bootstrap intervals over problems "
        f"(B = {_count(boot.get('n_boot'))}, seed {_num(boot.get('seed'))})"
    )
    out += [
        "",
        f"F1 of the verdicts against the gold proof's direct premises, {intervals}; n/a where "
        "there is no gold dependency. A+A'+cascade: both probes and the cascade filter (a "
        "local-only change below a changed parent step is not evidence). † as above. The proof "
        "tree is what a model should use, not what it used: a premise the model truly ignored "
        "and the audit calls ignored counts as a miss here, so a low F1 beside many ignored uses "
        "may be the audit seeing right" + (", as the truth columns tell." if has_truth else "."),
    ]
    if has_truth:
        out.append(
            "Truth columns (simulated reasoners): the verdicts scored against the premises "
            "each step truly used, on the pairs whose step the truth record covers; *truly "
            "ignored premises flagged*: of the gold premises the reasoner did not use, how many "
            "A+A'+cascade called not dependent."
        )
    if figure is not None:
        out += ["", *_figure_lines(figure)]
    return "\n".join(out) + "\n"


def _figure_lines(figure: Any) -> list[str]:
    """A figure in report.md: the PNG, then its caption and the vector files."""
    others = ", ".join(f"[{f.rsplit('.', 1)[1].upper()}]({f})" for f in figure.files[1:])
    return [
        f"![{Path(figure.name).stem}]({figure.name})",
        "",
        f"*{figure.caption}* ({others})",
    ]


def render_model_markdown(
    name: str,
    model: Mapping[str, Any],
    *,
    published: Mapping[str, Any] | None = None,
    figures: Sequence[Any] = (),
) -> str:
    """The report.md section of one model."""
    rows = model.get("rows") or {}
    out = [f"## {name}", ""]
    boot = model.get("bootstrap") or {}
    if boot.get("n_boot") == 0:
        out.append(
            f"No bootstrap (--n-boot 0): no intervals, {_num(boot.get('n_problems'))} problems. "
            "† as in the headline: the consistent probe's blind spot."
        )
        out.append("")
    elif boot:
        out.append(
            f"Bootstrap: B = {_count(boot.get('n_boot'))}, seed {boot.get('seed', 'n/a')}, "
            f"95% percentile intervals, {_num(boot.get('n_problems'))} problems resampled. "
            "† as in the headline: the consistent probe's blind spot."
        )
        out.append("")
    out += ["### Table 1: detection of direct premise dependencies", ""]
    if published:
        out.append(PACK_NOTE)
        out.append("")
    out += _table(rows, TABLE1_ROWS, published, model)
    out += ["", "### Table 2: ablation", ""]
    out += _table(rows, TABLE2_ROWS, published, model)
    if any(k in rows for k, _, _ in TRUTH_ROWS):
        out += ["", "### Against what the model truly used (simulated reasoners)", ""]
        out += _table(rows, TRUTH_ROWS, None, model)
        truth = model.get("truth") or {}
        if truth:
            out += ["", *_truth_lines(truth)]
    out += ["", "### Analyses", ""]
    paired = model.get("paired") or {}
    for key, value in paired.items():
        if isinstance(value, Mapping):
            diff = value.get("diff", value.get("f1_diff"))
            ci = _interval(value.get("ci"))
            out.append(
                f"- paired F1 difference, {_paired_label(key)}: {_num(diff)}"
                + ("" if ci == UNDEFINED else f", 95% paired bootstrap interval {ci}")
            )
    rawr = model.get("rawr") or {}
    if rawr:
        entity_only = rawr.get("structural_only")
        line = (
            f"- right answer, wrong reasoning under A †: {_num(rawr.get('rawr'))} of "
            f"{_num(rawr.get('correct'))} correct answers: a rule premise ignored in "
            f"{_num(rawr.get('predicate'))}, entity-introduction premises only in "
            f"{_num(entity_only)}"
        )
        if isinstance(entity_only, int) and entity_only > 0:
            line += (
                " (A's blind spot, not evidence that the model ignored them: A counts every "
                "use of an entity-introduction premise as ignored; see A+A' below)"
            )
        out.append(line)
    combined = model.get("rawr_combined") or {}
    if combined:
        out.append(
            f"- right answer, wrong reasoning under A+A': {_num(combined.get('rawr'))} of "
            f"{_num(combined.get('correct'))} correct answers (the local probe sees entity "
            "premises, A cannot)"
        )
    if "misrepresentations" in model:
        out.append(_misrepresentation_line(model))
    if "n_cascaded" in model:
        out.append(_cascaded_line(model))
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
        out += ["", *_false_positive_lines(fps, rows.get("A_consistent_full"))]
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
    out += _by_hops_lines(model)
    if figures:
        out += ["", "### Figures"]
        for figure in figures:
            out += ["", *_figure_lines(figure)]
    return "\n".join(out) + "\n"


def _false_positive_lines(
    fps: Sequence[Mapping[str, Any]], row: Mapping[str, Any] | None = None
) -> list[str]:
    """The false positives of A by cause, with at most :data:`FALSE_POSITIVES_SHOWN` examples
    in all (every one is in the CSV); ``row`` (A's full row) gives their denominator."""
    by_cause: dict[str, list[Mapping[str, Any]]] = {}
    for fp in fps:
        kind, _, _ = str(fp.get("cause") or "unknown").partition(";")
        by_cause.setdefault(kind.strip() or "unknown", []).append(fp)
    shown = min(len(fps), FALSE_POSITIVES_SHOWN)
    fp_, tn = (row or {}).get("fp"), (row or {}).get("tn")
    judged = (
        f" of the {fp_ + tn:,} judged pairs outside the gold parents (fp of fp + tn)"
        if isinstance(fp_, int) and isinstance(tn, int) and fp_ == len(fps)
        else ""
    )
    out = [
        f"False positives of A consistent, full †: {len(fps)}{judged}, by cause (examples: "
        f"{shown}; every one in `{FALSE_POSITIVES_CSV}`):",
        "",
    ]
    left = FALSE_POSITIVES_SHOWN
    for cause, cases in sorted(by_cause.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        out.append(f"- {len(cases)} × {cause}")
        for fp in cases[: max(0, left)]:
            detail = str(fp.get("cause") or "").partition(";")[2].strip()
            out.append(f"  - {fp.get('id')}" + (f": {detail}" if detail else ""))
        left -= len(cases)
    return out


def _by_hops_lines(model: Mapping[str, Any]) -> list[str]:
    by_rows = model.get("by_hops_rows") or {}
    present = [k for k in BY_HOPS_ROWS if by_rows.get(k)]
    if not present:
        return []
    labels = {k: label for k, label, _ in (*TABLE1_ROWS, *TABLE2_ROWS)}
    hops = sorted({int(h) for k in present for h in by_rows[k]}, key=int)
    head = "| hops | n problems | " + " | ".join(f"F1 {labels.get(k, k)}" for k in present) + " |"
    out = ["", "### F1 by chain length", "", head, "|" + "---|" * (len(present) + 2)]
    for h in hops:
        entries = [by_rows[k].get(str(h)) or {} for k in present]
        n = next((e.get("n_problems") for e in entries if e.get("n_problems") is not None), None)
        out.append(f"| {h} | {_num(n)} | " + " | ".join(_f1(e) for e in entries) + " |")
    boot = model.get("bootstrap") or {}
    if boot.get("n_boot") == 0:
        out += ["", "No intervals (no bootstrap: --n-boot 0)."]
    else:
        out += ["", "Each length bootstrapped over its own problems (95% percentile intervals)."]
    return out


def _paired_label(key: str) -> str:
    """``A_consistent_full_minus_self_consistency_full`` in the tables' words."""
    labels = {k: label for k, label, _ in (*TABLE2_ROWS, *TABLE1_ROWS)}
    first, sep, second = key.partition("_minus_")
    if not sep or first not in labels or second not in labels:
        return key
    return f"{labels[first]} minus {labels[second]}"


def _verdicts(model: Mapping[str, Any], evaluator: str, *names: str) -> int | None:
    """How many evaluable pairs ``evaluator`` gave one of the verdicts ``names``."""
    mix = (model.get("verdict_mix") or {}).get(evaluator)
    if not isinstance(mix, Mapping):
        return None
    counts = [mix.get(n, 0) for n in names]
    return sum(counts) if all(isinstance(c, int) for c in counts) else None


def _misrepresentation_line(model: Mapping[str, Any]) -> str:
    """Misrepresentations under A with their denominator, beside the same under A+A'.

    Most of A's are entity-introduction premises a step restates (docs/reproduction.md): A
    calls them INSENSITIVE whatever the model did, so the figure alone reads as a faithful
    model misrepresenting its premises.
    """
    count = model["misrepresentations"]
    insensitive = _verdicts(model, "A", "INSENSITIVE")
    line = f"- misrepresentations under A † (INSENSITIVE yet citing the premise): {_num(count)}"
    if isinstance(insensitive, int):
        line += f" of the {insensitive:,} pairs INSENSITIVE under A"
    both = (model.get("rule_mix") or {}).get("A+A'")
    if isinstance(both, Mapping):
        cited = both.get("R_MISREPRESENT_CITED", 0)
        line += (
            "; A counts every use of an entity-introduction premise as INSENSITIVE, used or "
            f"not: under A+A', which sees them, {_num(cited)}"
        )
        insensitive_both = _verdicts(model, "A+A'", "INSENSITIVE")
        if isinstance(insensitive_both, int):
            line += f" of the {insensitive_both:,} INSENSITIVE pairs cite their premise"
    return line


def _cascaded_line(model: Mapping[str, Any]) -> str:
    """The pairs the cascade filter turned negative, of those A+A' called dependent."""
    line = f"- cascaded (local-only change below a changed parent): {_num(model['n_cascaded'])}"
    positive = _verdicts(model, "A+A'", "GROUNDED", "INPUT-SENSITIVE")
    if isinstance(positive, int):
        line += f" of the {positive:,} pairs dependent under A+A', turned CASCADE (negative)"
    return line


def _truth_lines(truth: Mapping[str, Any]) -> list[str]:
    """The truth check in words, each with its report.json key."""
    labels = {
        "ignored_premises": "gold premise uses the reasoner truly ignored",
        "ignored_premises_flagged": "of them, INSENSITIVE under A †",
        "ignored_premises_flagged_cascade": "of them, not dependent under A+A'+cascade",
        "pairs_without_truth_step": "pairs whose step the truth record does not cover",
    }
    out = ["| truth check | value |", "|---|---|"]
    for key, value in truth.items():
        label = labels.get(key)
        out.append(
            f"| {label} (`{key}`) | {_flat(value)} |" if label else f"| {key} | {_flat(value)} |"
        )
    return out


# Why the records of an audit can be incomplete with no error recorded, and what to do, by
# where the stream came from (report.json ``stream.run_source``: the run manifest's
# ``source``). A run's stream can still be growing; an imported pack's is written whole, so
# what it lacks the pack lacks, and evaluating again changes nothing. None: a stream
# ``cotaudit run`` writes, a stream without a manifest, or a source not listed here.
INCOMPLETE_CAUSES: dict[str | None, tuple[str, str]] = {
    None: (
        "a run still writing, an interrupted run, or shards joined with one missing",
        "Evaluate again once the run is complete.",
    ),
    "import-evidence": (
        "the run is an import of an evidence pack that lacks these probe outputs, which "
        "import-evidence named on import; report.json: alignment.probe_outputs_absent",
        "Restore the pack's files and import into a new directory to have every probe.",
    ),
}


def short_of_plan_note(report: Mapping[str, Any]) -> str | None:
    """What to say of a report whose stream holds less than the whole run, or None.

    - It holds less than its run's plan (the manifest's ``planned_requests``, in the report's
      ``stream``): a run stopped or still writing.
    - With no shortfall of the plan to say it (a stream without a manifest, such as shards
      joined by ``cat`` with one missing, or an imported pack lacking an output), audits
      whose records are incomplete with no error recorded (``stream.incomplete_groups``):
      their missing outputs count as absent; why, and what to do, by the stream's
      provenance (``stream.run_source``, :data:`INCOMPLETE_CAUSES`).
    """
    stream: Mapping[str, Any] = report.get("stream") or {}
    planned: Mapping[str, int] = stream.get("planned_requests") or {}
    responses: Mapping[str, int] = stream.get("responses") or {}
    held = {name: min(responses.get(name, 0), m) for name, m in planned.items()}
    short = [f"{name} {held[name]:,} of {m:,}" for name, m in planned.items() if held[name] < m]
    if short:
        return (
            f"the stream holds {sum(held.values()):,} of the {sum(planned.values()):,} "
            f"responses its run plans ({', '.join(short)}; manifest.json, planned_requests): "
            "the report describes only those. Once the run has finished (if it stopped, "
            "resume it: the same `cotaudit run` command), evaluate again."
        )
    incomplete = stream.get("incomplete_groups") or 0
    if incomplete:
        cause, fix = INCOMPLETE_CAUSES.get(stream.get("run_source"), INCOMPLETE_CAUSES[None])
        return (
            f"the records of {incomplete:,} audits (a model on a problem) are incomplete and "
            f"no error was recorded for them ({cause}): their missing outputs count as "
            f"absent. {fix}"
        )
    return None


def over_plan_note(report: Mapping[str, Any]) -> str | None:
    """What to say of a report whose stream holds more responses than its manifest plans, or
    None: the manifest is another stream's (one shard's, copied beside the merged shards'
    streams), so what it says of the run (its plan, its config) is not of this stream."""
    stream: Mapping[str, Any] = report.get("stream") or {}
    planned: Mapping[str, int] = stream.get("planned_requests") or {}
    responses: Mapping[str, int] = stream.get("responses") or {}
    over = [
        f"{name} {responses[name]:,} of {m:,}"
        for name, m in planned.items()
        if responses.get(name, 0) > m
    ]
    if not over:
        return None
    return (
        f"the stream holds more responses than its manifest plans ({', '.join(over)}): the "
        "manifest is not this stream's (one shard's manifest beside the merged shards' "
        "streams?). Merge shards with `cotaudit merge OUT SHARD_DIR...`, which writes the whole "
        'plan\'s manifest (docs/engine.md, "Sharding").'
    )


def render_markdown(
    report: Mapping[str, Any],
    *,
    published: Mapping[str, Mapping[str, Any]] | None = None,
    figures: Mapping[str, Sequence[Any]] | None = None,
    comparison_figure: Any = None,
) -> str:
    """The whole report.md: what the audit found and its validity (every model), then one
    section per model; ``published`` maps model -> pack rows, ``figures`` model -> figures
    (:class:`evaluator.figures.Figure`)."""
    parts = ["# cotaudit evaluation", ""]
    source = report.get("source")
    if source:
        parts += [f"Stream: `{source}`", ""]
    for label, note in (
        ("Incomplete run", short_of_plan_note(report)),
        ("Not this stream's manifest", over_plan_note(report)),
    ):
        if note:
            parts += [f"**{label}:** {note[0].upper()}{note[1:]}", ""]
    models = report.get("models") or {}
    parts.append(render_headline_markdown(models, figure=comparison_figure))
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


def render_summary(report: Mapping[str, Any], *, width: int | None = None) -> str:
    """The terminal summary of ``cotaudit evaluate``: the headline table, then what each
    model's figures rest on (certificates, parse rates, failed requests), in lines of at most
    ``width`` characters (the terminal's by default)."""
    width = terminal.terminal_width() if width is None else width
    lines = [render_headline_table(report, width=width), ""]
    for name, model in (report.get("models") or {}).items():
        certs = model.get("certificates") or {}
        rates = model.get("parse_rates") or {}
        errors = (model.get("errors") or {}).get("count")
        line = (
            f"{name}: {_num(certs.get('evaluable'))} of {_num(certs.get('total'))} certificates "
            "evaluable; steps read: " + ", ".join(f"{c} {_num(rates.get(c))}" for c in CONDITIONS)
        )
        if errors:
            line += f"; {errors} failed requests not evaluated"
        lines += terminal.wrapped(line, width, "    ")
    return "\n".join(lines)


def _csv_value(value: Any) -> Any:
    return UNDEFINED if value is None else value


def write_csv_tables(report: Mapping[str, Any], out_dir: Path) -> list[Path]:
    """``rows.csv`` (every row of every model), ``parse_rates.csv``, ``by_hops.csv`` and
    ``false_positives.csv``; an undefined figure is ``n/a`` (pandas reads it as NaN)."""
    written: list[Path] = []
    models = report.get("models") or {}
    rows_path = out_dir / "rows.csv"
    with rows_path.open("w", newline="", encoding="utf-8") as handle:
        w = csv.writer(handle)
        w.writerow(ROWS_CSV_HEADER)
        for name, model in models.items():
            for key, row in (model.get("rows") or {}).items():
                f1 = metric(row, "f1")
                ci = row.get("ci") if f1 is not None else None
                ci = ci if isinstance(ci, Sequence) and len(ci) == 2 else [None, None]
                w.writerow(
                    [name, key]
                    + [_csv_value(metric(row, k)) for k in ("precision", "recall", "f1")]
                    + [_csv_value(c) for c in ci]
                    + [row.get(k) for k in ("tp", "fp", "fn", "tn")]
                )
    written.append(rows_path)
    rates_path = out_dir / "parse_rates.csv"
    with rates_path.open("w", newline="", encoding="utf-8") as handle:
        w = csv.writer(handle)
        w.writerow(["model", *CONDITIONS])
        for name, model in models.items():
            rates = model.get("parse_rates") or {}
            w.writerow([name] + [_csv_value(rates.get(c)) for c in CONDITIONS])
    written.append(rates_path)
    hops_path = out_dir / "by_hops.csv"
    with hops_path.open("w", newline="", encoding="utf-8") as handle:
        w = csv.writer(handle)
        w.writerow(["model", "row", "hops", "n_problems", "f1", "ci_low", "ci_high"])
        for name, model in models.items():
            for key, per in (model.get("by_hops_rows") or {}).items():
                for hops, v in sorted(per.items(), key=lambda kv: int(kv[0])):
                    f1 = metric(v, "f1")
                    ci = v.get("ci") if f1 is not None else None
                    ci = ci if isinstance(ci, Sequence) and len(ci) == 2 else [None, None]
                    w.writerow(
                        [name, key, hops, v.get("n_problems"), _csv_value(f1)]
                        + [_csv_value(c) for c in ci]
                    )
    written.append(hops_path)
    fp_path = out_dir / FALSE_POSITIVES_CSV
    with fp_path.open("w", newline="", encoding="utf-8") as handle:
        w = csv.writer(handle)
        w.writerow(["model", "id", "verdict", "cause"])
        for name, model in models.items():
            for fp in model.get("false_positives") or []:
                w.writerow([name, fp.get("id"), fp.get("verdict"), fp.get("cause")])
    written.append(fp_path)
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
