"""``cotaudit compare RUN_A RUN_B [RUN ...]``: evaluated runs side by side, with differences.

For every model of every run: what the audit found (correct answers, premise uses ignored, the
grounded share, right answer wrong reasoning under A+A') and its validity (F1 of A+A'+cascade,
A+A' and A), as each run's report has them. Then each model of a later run against its
baseline in the first run (the model of the same name, else the first run's only model, else
``--baseline``): the difference of every figure on the problems both audited, with a paired
bootstrap interval (docs/comparison.md). Refused (exit 2, saying why): fewer than two runs, a
run not evaluated, runs evaluated with different options, a model without a baseline, and two
models that share no problem or whose shared problem ids name different problems.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from cotaudit import terminal
from cotaudit.constants import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED
from cotaudit.errors import UsageError
from cotaudit.flags import output_dir
from cotaudit.output_file import (
    COMPARISON_JSON,
    COMPARISON_PAGE,
    check_output_dir,
    check_output_file,
    replacing_together,
)
from cotaudit.schema import JSONDict
from evaluator.certificates import read_certificates
from evaluator.commands.bootstrap_flags import n_boot_flag, seed_flag
from evaluator.comparison import (
    FIGURES,
    ROW_FIELDS,
    Difference,
    ProblemCounts,
    figure_counts,
    paired_differences,
    problem_counts,
)
from evaluator.report import (
    HEADLINE_LEGEND,
    UNDEFINED,
    grounded_share,
    metric,
)
from evaluator.run_files import (
    RunFiles,
    headline_of,
    locate_run,
    model_sections,
    read_json,
    run_labels,
)
from evaluator.stream_check import problem_digest
from evaluator.verification import refuse_evaluation_dir

HELP = "Compare evaluated runs: each model's figures, and paired differences on shared problems."
OPTION_KEYS = ("cascade_mode", "vanished", "majority", "trace")  # must agree for figures to compare
# Reports written before an option existed were evaluated under its default.
OPTION_DEFAULTS: dict[str, Any] = {"trace": "answer"}
JSON_NAME = "comparison.json"
MARKDOWN_NAME = "comparison.md"
OUTPUT_FILES = {JSON_NAME: COMPARISON_JSON, MARKDOWN_NAME: COMPARISON_PAGE}
FIGURE_LABELS = {
    "grounded_share": "grounded",
    "rawr_rate": "RAWR",
    "f1_A_Ap_cascade_full": "F1 A+A'+cascade",
    "f1_A_Ap_combined_full": "F1 A+A'",
    "f1_A_consistent_full": "F1 A †",
}
# The report's own words for what compare shows as report.md does (evaluator/report.py), so
# that one quantity reads one way in both; compare adds only what its differences need.
_REPORT_LEGEND = dict(HEADLINE_LEGEND)
# The F1 legend's last sentence, as report.md ends it (a test checks they agree).
F1_TRULY_IGNORED = "A premise the model truly ignored lowers it though the audit is right"
PAIRED_LEGEND = (
    "a model of run B minus its baseline in run A on the problems both audited, with the 95% "
    "paired bootstrap interval (both sides on the same resamples of those problems)"
)
PAIRED_LEGEND_NO_INTERVALS = (
    "a model of run B minus its baseline in run A on the problems both audited (no intervals: "
    "--n-boot 0)"
)


def legend(result: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What each column means, promising only the intervals ``result`` has: the F1s' are the
    reports' own (``cotaudit evaluate --n-boot``), the differences' this comparison's."""
    models = result["models"]
    f1s = [m[f]["ci"] for m in models for f in FIGURES[2:] if m[f].get("f1") is not None]
    shares = [m.get("grounded_ci") for m in models if m.get("grounded_share") is not None]
    grounded = _REPORT_LEGEND["grounded"]
    if shares:
        grounded += ", " + _intervals_said(shares, "the A+A' row's recall interval")
    return [
        ("ignored", _REPORT_LEGEND["ignored"]),
        ("grounded", grounded + "; a difference in percentage points (pp)"),
        (
            "RAWR",
            _REPORT_LEGEND["RAWR"] + " (under A+A'); a difference of its rate among correct "
            "answers, in pp",
        ),
        (
            "F1",
            "the audit's verdicts against the proof tree's direct premises, "
            f"{_intervals_said(f1s)}; "
            f"A+A'+cascade adds the cascade filter. {F1_TRULY_IGNORED}",
        ),
        ("†", _REPORT_LEGEND["†"]),
        ("B − A", PAIRED_LEGEND if result["bootstrap"]["n_boot"] else PAIRED_LEGEND_NO_INTERVALS),
        *_bootstraps_said(models),
    ]


def _bootstraps_said(models: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """A legend line where the reports' intervals come from different bootstraps: a run
    evaluated with --n-boot 2000 beside one with 10,000 (or another seed) has intervals of
    another precision, which the tables, one column of intervals, would not show."""
    runs: dict[str, tuple[Any, Any]] = {}
    for m in models:
        boot = m.get("bootstrap") or {}
        runs.setdefault(str(m["run"]), (boot.get("n_boot"), boot.get("seed")))
    if len(set(runs.values())) < 2:
        return []

    def said(n_boot: Any, seed: Any) -> str:
        if not isinstance(n_boot, int):
            return "unknown"
        return "none (--n-boot 0)" if n_boot == 0 else f"{n_boot:,} resamples, seed {seed}"

    each = "; ".join(f"run {run}: {said(*boot)}" for run, boot in runs.items())
    return [
        (
            "intervals",
            f"the reports' own intervals come from different bootstraps: {each}. Evaluate the "
            "runs with the same --n-boot and --seed for intervals of the same precision",
        )
    ]


def _intervals_said(intervals: Sequence[Any], which: str = "") -> str:
    """What the intervals of a column's defined figures are (``which`` interval of the
    report, if said), promising none that is not there: the reports' own, none of which a
    run evaluated with ``--n-boot 0`` has."""
    with_ci = [ci for ci in intervals if _interval(ci) is not None]
    if intervals and not with_ci:
        return "without intervals (its run evaluated with `cotaudit evaluate --n-boot 0`)"
    asides = [which] if which else []
    if len(with_ci) < len(intervals):
        asides.append("none where the run was evaluated with `cotaudit evaluate --n-boot 0`")
    said = "with its report's 95% bootstrap interval over the model's problems"
    return said + (f" ({'; '.join(asides)})" if asides else "")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "runs",
        nargs="+",
        type=Path,
        metavar="RUN",
        help="evaluated run directories (holding eval/ and results.jsonl), or their eval dirs; "
        "the first run's models are the baselines",
    )
    parser.add_argument(
        "--baseline",
        metavar="MODEL",
        help="the first run's model every other model is compared with (default: the model "
        "of the same name, else the first run's only model)",
    )
    parser.add_argument(
        "--n-boot",
        type=n_boot_flag,
        default=BOOTSTRAP_RESAMPLES,
        metavar="B",
        help="bootstrap resamples of the shared problems; 0: no intervals (default: %(default)s)",
    )
    parser.add_argument(
        "--seed",
        type=seed_flag,
        default=BOOTSTRAP_SEED,
        help="bootstrap seed (default: %(default)s)",
    )
    parser.add_argument(
        "--out",
        type=output_dir,
        metavar="DIR",
        help=f"also write {MARKDOWN_NAME} and {JSON_NAME} there (default: print only)",
    )


@dataclass(frozen=True, slots=True)
class Model:
    """One model of one run, as the comparison needs it."""

    run: int
    label: str  # "A faithful"
    endpoint: str
    section: Mapping[str, Any]
    counts: ProblemCounts
    problems: frozenset[str]
    correct: frozenset[str]


def _problem_digests(results: Path) -> dict[str, str]:
    """Problem id -> digest of its content, from the problem records of ``results.jsonl``."""
    out: dict[str, str] = {}
    with results.open("rb") as handle:
        for raw in handle:
            if b'"problem"' not in raw or not raw.endswith(b"\n"):
                continue
            try:
                record = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            if isinstance(record, dict) and record.get("kind") == "problem":
                out.setdefault(str(record.get("problem_id")), problem_digest(record))
    return out


def _run_letter(k: int) -> str:
    return chr(ord("A") + k) if k < 26 else f"R{k + 1}"


def _load(files: Sequence[RunFiles]) -> tuple[list[Model], list[dict[str, str]], list[JSONDict]]:
    models: list[Model] = []
    digests: list[dict[str, str]] = []
    reports: list[JSONDict] = []
    for k, run in enumerate(files):
        report = read_json(run.report)
        sections = model_sections(report, run)
        if not isinstance(report.get("options") or {}, Mapping):
            raise _damaged(run, "its options are not an object")
        reports.append(report)
        digests.append(_problem_digests(run.results))
        counts = problem_counts(_certificates(run))
        for endpoint, section in sections.items():
            headline = headline_of(section, run.report)
            ids = {key: headline.get(key) or [] for key in ("problem_ids", "correct_problems")}
            for key, value in ids.items():
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise _damaged(run, f"the headline of {endpoint} has no list of {key}")
            model = Model(
                run=k,
                label=f"{_run_letter(k)} {endpoint}",
                endpoint=str(endpoint),
                section=section,
                counts=counts.get(str(endpoint), ProblemCounts()),
                problems=frozenset(ids["problem_ids"]),
                correct=frozenset(ids["correct_problems"]),
            )
            _check_counts(model, run)
            _check_declared(model, run, digests[k])
            models.append(model)
    return models, digests, reports


def _check_declared(model: Model, run: RunFiles, digests: Mapping[str, str]) -> None:
    """Every problem the model's report audited has its problem record in the run's stream.

    Where one has none, the stream is not the one evaluated (cut short, or replaced by
    another run's): pairing would call the problem a different one, and tell the user the
    runs audited other premises or questions when they audited the same.
    """
    missing = sorted(model.problems - digests.keys())
    if missing:
        raise UsageError(
            f"{len(missing):,} of the {len(model.problems):,} problems the report audited for "
            f"{model.endpoint} have no problem record in the stream (e.g. "
            f"{', '.join(missing[:3])}): it changed since the evaluation (cut short, or "
            "another run's)",
            where=str(run.results),
            fix=f"Check the run with `cotaudit verify {run.run_dir}`; re-run `cotaudit evaluate "
            f"{run.run_dir}` on the stream as it is now.",
        )


def _damaged(run: RunFiles, what: str) -> UsageError:
    return UsageError(
        f"not a report of cotaudit evaluate: {what}",
        where=str(run.report),
        fix=f"Check the evaluation with `cotaudit verify {run.run_dir}`; re-run `cotaudit "
        f"evaluate {run.run_dir}` to write it again.",
    )


def _certificates(run: RunFiles) -> Iterator[Mapping[str, Any]]:
    """The certificates of the run's models; a line that is not one is refused, naming it,
    instead of being left out of the per-problem counts."""
    for number, cert in read_certificates(run.certificates):
        if "endpoint" not in cert or "problem_id" not in cert:
            raise UsageError(
                "not a certificate (a JSON object with endpoint and problem_id)",
                where=f"{run.certificates}:{number}",
                fix=f"Check the evaluation with `cotaudit verify {run.run_dir}`; re-run "
                f"`cotaudit evaluate {run.run_dir}` to write it again.",
            )
        yield cert


def _check_counts(model: Model, run: RunFiles) -> None:
    """The model's certificates, summed over its problems, are its report's rows: where not,
    the two files are not one evaluation (certificates cut short, edited, or copied from
    another evaluation), and every difference computed from them would be wrong."""
    rows = model.section.get("rows")
    if not isinstance(rows, Mapping):
        return
    ids = sorted(model.problems)
    for row, counts in figure_counts(model.counts, model.correct, ids).items():
        stored = rows.get(row)
        if row not in ROW_FIELDS or not isinstance(stored, Mapping):
            continue
        expected = [stored.get(key) for key in ("tp", "fp", "fn", "tn")]
        found = counts.sum(axis=0).tolist()
        if found != expected:
            shown = "/".join(str(v) for v in expected)
            raise UsageError(
                f"the certificates of {model.endpoint} do not add up to its report.json row "
                f"{row} (tp/fp/fn/tn {'/'.join(map(str, found))}, the report {shown}): the "
                "two files are not one evaluation (certificates cut short, edited, or copied "
                "from another)",
                where=str(run.certificates),
                fix=f"Check the evaluation with `cotaudit verify {run.run_dir}`; re-run "
                f"`cotaudit evaluate {run.run_dir}` to write it again.",
            )


def _options(report: JSONDict) -> dict[str, Any]:
    stored = report.get("options") or {}
    return {key: stored.get(key, OPTION_DEFAULTS.get(key)) for key in OPTION_KEYS}


def _check_options(reports: Sequence[JSONDict], labels: Sequence[str]) -> None:
    seen = [_options(report) for report in reports]
    for k, options in enumerate(seen[1:], start=1):
        differ = [key for key in OPTION_KEYS if options[key] != seen[0][key]]
        if differ:
            text = "; ".join(f"{key} {seen[0][key]} against {options[key]}" for key in differ)
            raise UsageError(
                f"runs {labels[0]} and {labels[k]} were evaluated with different options "
                f"({text}): their figures do not compare",
                where=str(labels[k]),
                fix="Re-evaluate one with the other's options (`cotaudit evaluate RUN "
                "--cascade-mode ... --vanished ... --trace ...`).",
            )


def _baseline_of(model: Model, first: Sequence[Model], chosen: str | None) -> Model:
    by_name = {m.endpoint: m for m in first}
    if chosen is not None:
        if chosen not in by_name:
            raise UsageError(
                f"the first run has no model {chosen}",
                where=f"--baseline {chosen}",
                fix=f"Name one of {', '.join(by_name)}.",
            )
        return by_name[chosen]
    if model.endpoint in by_name:
        return by_name[model.endpoint]
    if len(first) == 1:
        return first[0]
    raise UsageError(
        f"model {model.endpoint} of run {_run_letter(model.run)} has no model of the same name "
        f"in the first run ({', '.join(by_name)}) to be compared with",
        where=model.label,
        fix="Name the baseline with --baseline MODEL.",
    )


def _shared(model: Model, base: Model, digests: Sequence[Mapping[str, str]]) -> list[str]:
    common = sorted(model.problems & base.problems)
    a, b = digests[model.run], digests[base.run]
    differ = [pid for pid in common if a.get(pid) != b.get(pid)]
    if differ:
        raise UsageError(
            f"{model.label} and {base.label} audit different problem sets: "
            f"{len(differ):,} of the {len(common):,} problem ids they share name different "
            f"problems (e.g. {', '.join(differ[:3])}: other premises, question or proof)",
            where=f"{model.label} against {base.label}",
            fix="Compare runs of the same problems (the same task config: source, n, seed, "
            "ontology).",
        )
    if not common:
        raise UsageError(
            f"{model.label} and {base.label} share no problems ({len(model.problems):,} and "
            f"{len(base.problems):,} audited): there is nothing to pair",
            where=f"{model.label} against {base.label}",
            fix="Compare runs of the same problems (the same task config: source, n, seed, "
            "ontology).",
        )
    return common


def compare(
    runs: Sequence[Path], *, baseline: str | None = None, n_boot: int, seed: int
) -> JSONDict:
    """The comparison of ``runs`` (each ``RUN`` or its eval dir) as a JSON-ready dict."""
    if len(runs) < 2:
        raise UsageError(
            "compare needs at least two runs",
            fix="Give two or more evaluated runs: cotaudit compare RUN_A RUN_B. One run's "
            "models are side by side in its report.md and in `cotaudit view RUN`.",
        )
    if n_boot < 0:
        raise UsageError(
            f"--n-boot must be 0 or more, got {n_boot}",
            where="--n-boot",
            fix="Give the number of bootstrap resamples (0: no intervals).",
        )
    files = [locate_run(Path(r), command="compare") for r in runs]
    labels = run_labels([f.run_dir for f in files])
    models, digests, reports = _load(files)
    _check_options(reports, labels)
    first = [m for m in models if m.run == 0]
    differences: list[JSONDict] = []
    for model in models:
        if model.run == 0:
            continue
        base = _baseline_of(model, first, baseline)
        ids = _shared(model, base, digests)
        found = paired_differences(
            figure_counts(model.counts, model.correct, ids),
            figure_counts(base.counts, base.correct, ids),
            n_boot=n_boot,
            seed=seed,
        )
        differences.append(
            {
                "model": model.label,
                "baseline": base.label,
                "problems_shared": len(ids),
                "problems": [len(model.problems), len(base.problems)],
                "figures": {d.figure: d.to_json() for d in found},
            }
        )
    return {
        "kind": "comparison",
        "runs": [
            {"letter": _run_letter(k), "label": labels[k], "run_dir": str(f.run_dir)}
            for k, f in enumerate(files)
        ],
        "models": [_model_json(m) for m in models],
        "differences": differences,
        "bootstrap": {
            "n_boot": n_boot,
            "seed": seed,
            "confidence_level": 0.95,
            "unit": "shared problem",
        },
        "options": _options(reports[0]),
    }


def _model_json(model: Model) -> JSONDict:
    headline = model.section.get("headline") or {}
    found = (headline.get("found") or {}).get("A+A'") or {}
    rows = model.section.get("rows") or {}
    share, ci = grounded_share(model.section)
    return {
        "label": model.label,
        "run": _run_letter(model.run),
        "endpoint": model.endpoint,
        "problems": headline.get("problems"),
        "correct": headline.get("correct"),
        "ignored": found.get("ignored"),
        "judged": found.get("judged"),
        "grounded_share": share,
        "grounded_ci": ci,
        "rawr": found.get("rawr"),
        "rawr_rate": found.get("rawr_rate"),
        "bootstrap": {k: (model.section.get("bootstrap") or {}).get(k) for k in ("n_boot", "seed")},
        **{
            f"f1_{row}": {
                "f1": metric(rows.get(row), "f1"),
                # An F1 of 0 is defined and keeps its interval; an undefined one has none.
                "ci": (rows.get(row) or {}).get("ci")
                if metric(rows.get(row), "f1") is not None
                else None,
            }
            for row in ("A_Ap_cascade_full", "A_Ap_combined_full", "A_consistent_full")
        },
    }


def _of(num: Any, den: Any) -> str:
    return f"{num:,} of {den:,}" if isinstance(num, int) and isinstance(den, int) else UNDEFINED


def _interval(ci: Any) -> tuple[float, float] | None:
    """The two ends of an interval as a report stores it, or ``None`` where it has none (a run
    evaluated with ``--n-boot 0`` stores ``null``): no cell shows a bracket that is not one."""
    if isinstance(ci, Sequence) and not isinstance(ci, str) and len(ci) == 2:
        low, high = ci
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in (low, high)):
            return float(low), float(high)
    return None


def _f1_cell(entry: Mapping[str, Any]) -> str:
    f1, ci = entry.get("f1"), _interval(entry.get("ci"))
    if f1 is None:
        return UNDEFINED
    return f"{f1:.3f}" + (f" [{ci[0]:.3f},{ci[1]:.3f}]" if ci else "")


def _pct(x: Any) -> str:
    return UNDEFINED if x is None else f"{100 * x:.1f}%"


def _grounded_cell(model: Mapping[str, Any]) -> str:
    """The grounded share with its report's interval (the A+A' row's recall interval), as
    report.md prints it: a share read without its interval reads as more certain than it is."""
    share, ci = model.get("grounded_share"), _interval(model.get("grounded_ci"))
    if share is None:
        return UNDEFINED
    return _pct(share) + (f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]" if ci else "")


def _diff_cell(figure: str, d: Mapping[str, Any]) -> str:
    if d.get("diff") is None:
        return UNDEFINED
    ci = d.get("ci")
    if figure in ("grounded_share", "rawr_rate"):
        text = f"{100 * d['diff']:+.1f} pp"
        return text + (f" [{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]" if ci else "")
    return f"{d['diff']:+.3f}" + (f" [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "")


MODEL_FIGURES = ("f1_A_Ap_cascade_full", "f1_A_consistent_full")  # on the terminal


def model_rows(result: Mapping[str, Any], figures: Sequence[str] = FIGURES[2:]) -> list[list[str]]:
    """A header and a line per model: its figures on its own problems."""
    header = ["model", "problems", "correct", "ignored", "grounded", "RAWR"]
    header += [FIGURE_LABELS[f] for f in figures]
    rows = [header]
    for m in result["models"]:
        rows.append(
            [
                m["label"],
                UNDEFINED if m["problems"] is None else f"{m['problems']:,}",
                _of(m["correct"], m["problems"]),
                _of(m["ignored"], m["judged"]),
                _grounded_cell(m),
                _of(m["rawr"], m["correct"]),
                *(_f1_cell(m[f]) for f in figures),
            ]
        )
    return rows


def difference_rows(result: Mapping[str, Any]) -> list[list[str]]:
    """A header and a line per difference: model minus baseline on the shared problems."""
    rows = [["difference", "shared problems", *(f"Δ {FIGURE_LABELS[f]}" for f in FIGURES)]]
    for d in result["differences"]:
        rows.append(
            [
                _difference_name(d),
                f"{d['problems_shared']:,}",
                *(_diff_cell(f, d["figures"][f]) for f in FIGURES),
            ]
        )
    return rows


def _difference_name(d: Mapping[str, Any]) -> str:
    model, name = d["model"].split(" ", 1)
    base, base_name = d["baseline"].split(" ", 1)
    return f"{model} − {base} {name}" if name == base_name else f"{d['model']} − {d['baseline']}"


def render_table(result: Mapping[str, Any], *, width: int = 80) -> str:
    """The terminal view: each model's figures, each difference, and what columns mean, in
    lines of at most ``width`` characters (but for a path or a name longer than that)."""
    runs = [f"{r['letter']} = {r['label']}" for r in result["runs"]]
    said = "runs: " + "; ".join(runs)
    lines = [said] if len(said) <= width else ["runs:", *(f"  {run}" for run in runs)]
    lines.append("")
    rows = model_rows(result, MODEL_FIGURES)
    # What the audit found (five columns), then its validity (the F1s), as report.md groups them.
    found = range(1, 6)
    groups = [terminal.Group(found), terminal.Group(range(found.stop, len(rows[0])))]
    lines += terminal.fitted(rows, groups, width)
    lines.append("")
    for d in result["differences"]:
        head = f"{_difference_name(d)}, on the {d['problems_shared']:,} problems both audited"
        if d["problems_shared"] < max(d["problems"]):
            head += f" (of {d['problems'][0]:,} and {d['problems'][1]:,})"
        lines += terminal.wrapped(head + ":", width, "    ")
        label_width = max(len(FIGURE_LABELS[f]) for f in FIGURES)
        lines += [
            f"  {FIGURE_LABELS[f].ljust(label_width)}  {_diff_cell(f, d['figures'][f])}"
            for f in FIGURES
        ]
    if not result["bootstrap"]["n_boot"]:
        lines.append("no intervals: --n-boot 0")
    lines.append("")
    lines += terminal.legend(legend(result), width)
    return "\n".join(lines)


def render_markdown(result: Mapping[str, Any]) -> str:
    """``comparison.md``: both tables in Markdown, and what their columns mean."""
    out = ["# cotaudit comparison", ""]
    out += [f"- run {r['letter']}: `{r['run_dir']}`" for r in result["runs"]]
    for title, rows in (
        ("Each model, on its own problems", model_rows(result)),
        ("Differences, on the problems both audited", difference_rows(result)),
    ):
        out += ["", f"## {title}", ""]
        out += ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
        out += ["| " + " | ".join(row) + " |" for row in rows[1:]]
    boot = result["bootstrap"]
    out += [
        "",
        f"Bootstrap: B = {boot['n_boot']:,}, seed {boot['seed']}, 95% percentile intervals, "
        "the shared problems resampled (paired)."
        if boot["n_boot"]
        # The F1 intervals of the first table are the reports' own, from cotaudit evaluate.
        else "No intervals on the differences: --n-boot 0.",
        "",
    ]
    out += [f"- *{key}*: {meaning}" for key, meaning in legend(result)]
    return "\n".join(out) + "\n"


def run(args: argparse.Namespace) -> int:
    out: Path | None = args.out
    if out is not None:
        check_output_dir(out, flag="--out", holds=f"{MARKDOWN_NAME} and {JSON_NAME}")
        refuse_evaluation_dir(out, flag="--out", example="comparison")
        if out.is_dir():  # a comparison there before is replaced; another program's file is not
            for name, kind in OUTPUT_FILES.items():
                check_output_file(out / name, kind, flag="--out", in_dir=True)
    result = compare(args.runs, baseline=args.baseline, n_boot=args.n_boot, seed=args.seed)
    width = terminal.terminal_width()
    print(render_table(result, width=width))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        # The page is the JSON's rendering: a failure writing either leaves the earlier pair.
        with replacing_together(out / JSON_NAME, out / MARKDOWN_NAME) as (data, page):
            data.write(orjson.dumps(result, option=orjson.OPT_INDENT_2) + b"\n")
            page.write(render_markdown(result).encode("utf-8"))
        written = f"wrote {out / MARKDOWN_NAME}, {out / JSON_NAME}"
        if len(written) > width:  # a deep --out: each file on a line of its own
            written = f"wrote {out / MARKDOWN_NAME}\nwrote {out / JSON_NAME}"
        print(f"\n{written}")
    return 0


__all__ = ["HELP", "Difference", "add_arguments", "compare", "render_table", "run"]
