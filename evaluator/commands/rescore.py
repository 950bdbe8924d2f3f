"""``cotaudit rescore PACK_DIR --model gpt-4o``: the paper's tables from its own certificates.

Feeds the authors' per-certificate fields (``evaluator.authors``) to OUR decision rules,
cascade filter, metric policy and bootstrap (``evaluator.tables``), and prints each row beside
the published one (``final_report.json`` main + ablation, ``bootstrap_ci.json``) with the
differences. ``--json FILE`` writes ``{"models": {MODEL: {...}}}`` in the report.json shape,
with a ``published_comparison`` section added.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import orjson

from cotaudit import terminal
from cotaudit.errors import UsageError
from cotaudit.flags import add_alias, is_stdout
from cotaudit.output_file import RESCORE_REPORT, check_output_file, replacing
from evaluator.authors import certificate_alignment, certificate_parse_rates, load_pack
from evaluator.bootstrap import DEFAULT_N_RESAMPLES
from evaluator.cascade import CASCADE_MODES, PAPER_CASCADE_MODE, CascadeMode
from evaluator.commands.bootstrap_flags import n_boot_flag, seed_flag
from evaluator.tables import DEFAULT_SEED, EXTRA_ROWS, REQUIRED_ROWS, build_model_report

HELP = (
    "Re-derive the paper's Table 1 and 2 from the authors' certificates with our rules and "
    "print them (--json FILE also writes the report)."
)

# our row -> (section of final_report.json, key there); sections: main, ablation, analysis
PUBLISHED_ROW: dict[str, tuple[str, str]] = {
    "A_consistent_full": ("main", "A_consistent_full"),
    "A_consistent_pred": ("main", "A_consistent_pred"),
    "A_local_full": ("ablation", "A'_local_only"),
    "A_Ap_combined_full": ("main", "A_Ap_combined_full"),
    "A_Ap_no_surface_full": ("ablation", "A+A'_no_surface_ctrl"),
    "A_Ap_cascade_full": ("main", "A_Ap_cascade_full"),
    "A_Ap_cascade_pred": ("main", "A_Ap_cascade_pred"),
    "self_consistency_full": ("main", "self_consistency_full"),
    "self_consistency_pred": ("main", "self_consistency_pred"),
    "string_diff_full": ("main", "string_diff_full"),
    "A_consistent_lower_bound_full": ("analysis", "lower_bound_A_consistent_full"),
    "A_consistent_unstable_negative_full": ("ablation", "A_consistent_only"),
}
COUNT_KEYS = ("tp", "fp", "fn", "tn")


@dataclass(frozen=True, slots=True)
class RowComparison:
    """One row, ours beside the published one (``None`` where the pack has no number)."""

    row: str
    ours: Mapping[str, Any]
    published: Mapping[str, Any] | None
    published_ci: tuple[float, float] | None

    @property
    def counts_equal(self) -> bool | None:
        if self.published is None:
            return None
        return all(
            self.published.get(k) is None or self.published.get(k) == self.ours.get(k)
            for k in COUNT_KEYS
        )

    @property
    def f1_diff(self) -> float | None:
        if self.published is None or self.published.get("f1") is None:
            return None
        return float(self.ours["f1"]) - float(self.published["f1"])

    @property
    def ci_diff(self) -> tuple[float, float] | None:
        ours = self.ours.get("ci")
        if self.published_ci is None or not ours:
            return None
        return (ours[0] - self.published_ci[0], ours[1] - self.published_ci[1])


PUBLISHED_FIX = (
    "The pack's published reports are read as the authors wrote them; restore the file from "
    "the pack (or remove it: a row without a published number shows n/a)."
)


def _at(where: str, stem: str, *keys: str) -> str:
    path = f"{where}/{stem}.json" if where else f"{stem}.json"
    return path + (f", {'.'.join(keys)}" if keys else "")


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f'the string "{value[:40]}"'
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return f"the number {value}"


def _object(value: Any, where: str) -> Mapping[str, Any]:
    """``value`` when an object, ``{}`` when absent (null): a published report of another
    shape is refused naming the file and key, instead of failing as it is read."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return value
    raise UsageError(f"should be a JSON object, got {_kind(value)}", where=where, fix=PUBLISHED_FIX)


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, list):
        return value
    raise UsageError(f"should be a JSON list, got {_kind(value)}", where=where, fix=PUBLISHED_FIX)


def _number(value: Any, where: str) -> Any:
    """A published count, rate or bound: a number, or null where the pack has none."""
    if value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
        return value
    raise UsageError(
        f"should be a number or null, got {_kind(value)}", where=where, fix=PUBLISHED_FIX
    )


def published_rows(published: Mapping[str, Any], *, where: str = "") -> dict[str, dict[str, Any]]:
    """The published numbers keyed by OUR row names (counts, P/R/F1; CIs under ``ci``).

    ``where``: the model's directory in the pack, named in the error for a malformed file."""
    final = _object(published.get("final_report"), _at(where, "final_report"))
    sections: dict[str, Mapping[str, Any]] = {
        "main": _object(final.get("main"), _at(where, "final_report", "main")),
        "ablation": _object(final.get("ablation"), _at(where, "final_report", "ablation"))
        or _object(published.get("ablation"), _at(where, "ablation")),
        "analysis": _object(final.get("analysis"), _at(where, "final_report", "analysis")),
    }
    boot = _object(published.get("bootstrap_ci"), _at(where, "bootstrap_ci"))
    out: dict[str, dict[str, Any]] = {}
    for row, (section, key) in PUBLISHED_ROW.items():
        stem = "ablation" if section == "ablation" and not final.get("ablation") else "final_report"
        keys = (key,) if stem == "ablation" else (section, key)
        if sections[section].get(key) is None:
            continue
        value = _object(sections[section].get(key), _at(where, stem, *keys))
        entry = {
            k: _number(value[k], _at(where, stem, *keys, k))
            for k in (*COUNT_KEYS, "precision", "recall", "f1")
            if k in value
        }
        ci = _object(boot.get(row), _at(where, "bootstrap_ci", row)).get("ci")
        ci = _object(ci, _at(where, "bootstrap_ci", row, "ci")).get("f1")
        if ci is not None:
            f1_ci = _object(ci, _at(where, "bootstrap_ci", row, "ci", "f1"))
            entry["ci"] = [
                _number(f1_ci.get(k), _at(where, "bootstrap_ci", row, "ci", "f1", k))
                for k in ("ci_lower", "ci_upper")
            ]
        out[row] = entry
    return out


def published_scalars(published: Mapping[str, Any], *, where: str = "") -> dict[str, Any]:
    """The published analyses that our report also has (RAWR, cascades, certificates...)."""

    def section(*keys: str) -> Mapping[str, Any]:
        value = _object(published.get("final_report"), _at(where, "final_report"))
        for depth, key in enumerate(keys, start=1):
            value = _object(value.get(key), _at(where, "final_report", *keys[:depth]))
        return value

    def number(keys: tuple[str, ...], key: str) -> Any:
        return _number(section(*keys).get(key), _at(where, "final_report", *keys, key))

    analysis = ("analysis",)
    rawr = (*analysis, "rawr")
    coverage = (*analysis, "parse_rates_and_coverage")
    steps = (*analysis, "step_alignment")
    hops = _list(
        section(*analysis).get("chain_length"),
        _at(where, "final_report", *analysis, "chain_length"),
    )
    by_hops: dict[str, Any] = {}
    for k, x in enumerate(hops):
        at = _at(where, "final_report", *analysis, f"chain_length[{k}]")
        entry = _object(x, at)
        by_hops[str(entry.get("chain_length"))] = _number(entry.get("f1"), f"{at}.f1")
    return {
        "n_cascaded": number(("main",), "n_cascaded"),
        "rawr": number(rawr, "total_rawr"),
        "correct": number(rawr, "total_correct"),
        "rawr_structural_only": number(rawr, "structural_only"),
        "misrepresentations": number((*analysis, "misrepresentation"), "total"),
        "certificates_total": number(coverage, "n_total_certificates"),
        "certificates_evaluable": number(coverage, "n_evaluable_certificates"),
        "by_hops_f1": by_hops,
        "alignment": {
            "cot_steps": number(steps, "total_cot_steps"),
            "matched": number(steps, "matched_cot_steps"),
            "unmatched": number(steps, "unmatched_cot_steps"),
            "proof_steps_unaudited": number(steps, "unmatched_proof_steps"),
        },
        "parse_rates": {
            "original": number(coverage, "parse_rate_orig"),
            "consistent": number(coverage, "parse_rate_sem"),
            "local": number(coverage, "parse_rate_local"),
            "surface": number(coverage, "parse_rate_sur"),
        },
    }


def our_scalars(report: Mapping[str, Any]) -> dict[str, Any]:
    """Our values of :func:`published_scalars`' keys."""
    return {
        "n_cascaded": report["n_cascaded"],
        "rawr": report["rawr"]["rawr"],
        "correct": report["rawr"]["correct"],
        "rawr_structural_only": report["rawr"]["structural_only"],
        "misrepresentations": report["misrepresentations"],
        "certificates_total": report["certificates"]["total"],
        "certificates_evaluable": report["certificates"]["evaluable"],
        "by_hops_f1": {h: v["f1"] for h, v in report["by_hops"].items()},
        "alignment": {
            k: (report.get("alignment") or {}).get(k)
            for k in ("cot_steps", "matched", "unmatched", "proof_steps_unaudited")
        },
        "parse_rates": dict(report.get("parse_rates") or {}),
    }


def compare(report: Mapping[str, Any], published: Mapping[str, Any]) -> list[RowComparison]:
    """Every row of ``report`` beside its published counterpart."""
    pub = published_rows(published)
    out = []
    for row, ours in report["rows"].items():
        theirs = pub.get(row)
        ci = theirs.get("ci") if theirs else None
        out.append(
            RowComparison(
                row=row,
                ours=ours,
                published={k: v for k, v in theirs.items() if k != "ci"} if theirs else None,
                published_ci=(float(ci[0]), float(ci[1])) if ci and None not in ci else None,
            )
        )
    return out


def _f(value: Any, digits: int = 4) -> str:
    return "n/a" if value is None else f"{float(value):.{digits}f}"


def _counts(row: Mapping[str, Any] | None) -> str:
    if not row:
        return "n/a"
    return "/".join("-" if row.get(k) is None else str(row[k]) for k in COUNT_KEYS)


def render_comparison(
    model: str,
    report: Mapping[str, Any],
    published: Mapping[str, Any],
    out: TextIO,
    *,
    width: int | None = None,
) -> None:
    """Print our table beside the published one, with differences, in lines of at most
    ``width`` characters (the terminal's by default)."""
    width = terminal.terminal_width() if width is None else width
    boot = report["bootstrap"]
    certs = report["certificates"]
    lines = terminal.wrapped(
        f"rescore {model}: {certs['total']} certificates ({certs['evaluable']} evaluable), "
        f"{boot['n_problems']} problems; bootstrap B={boot['n_boot']} seed={boot['seed']}; "
        f"cascade rule {report['cascade_mode']}",
        width,
    )
    said = (
        "ours: the authors' certificate fields through our decision rules, cascade filter and "
        "metrics;",
        "published: the pack's final_report.json and bootstrap_ci.json",
    )
    # What each side is, on a line of its own where both do not fit on one.
    both = " ".join(said)
    if len(both) > width:
        lines += [line for side in said for line in terminal.wrapped(side, width)]
    else:
        lines.append(both)
    missing = report.get("missing_certificates") or []
    if missing:
        shown = ", ".join(missing[:MISSING_SHOWN])
        more = f" and {len(missing) - MISSING_SHOWN} more" if len(missing) > MISSING_SHOWN else ""
        lines += terminal.wrapped(
            f"{len(missing)} certificate{'s' if len(missing) != 1 else ''} missing from the "
            f"pack ({shown}{more}): rescored without {'them' if len(missing) != 1 else 'it'}, "
            "so counts can differ from the published ones for that reason alone",
            width,
        )
    lines.append("")
    rows = [list(TABLE_HEADER)]
    for c in compare(report, published):
        ours = c.ours
        ci = ours.get("ci")
        pub_ci = c.published_ci
        dci = c.ci_diff
        rows.append(
            [
                c.row,
                _counts(ours),
                _f(ours["precision"]),
                _f(ours["recall"]),
                _f(ours["f1"]),
                f"[{_f(ci[0])}, {_f(ci[1])}]" if ci else "n/a",
                _counts(c.published),
                _f(c.published.get("f1") if c.published else None),
                f"[{_f(pub_ci[0])}, {_f(pub_ci[1])}]" if pub_ci else "",
                {None: "", True: "same", False: "DIFF"}[c.counts_equal],
                _signed(c.f1_diff),
                f"{_signed(dci[0])},{_signed(dci[1])}" if dci else "",
            ]
        )
    lines += terminal.fitted(rows, TABLE_GROUPS, width, left=TABLE_LEFT)
    lines += ["", *terminal.legend(TABLE_LEGEND, width)]
    paired = report.get("paired") or {}
    for key, value in paired.items():
        ci = value.get("ci")
        a, _, b = key.partition("_minus_")
        lines.append("")
        lines += terminal.wrapped(
            f"paired F1 difference, {a} minus {b} (on the same resamples; not published): "
            f"{_f(value['diff'])}" + (f", 95% interval [{_f(ci[0])}, {_f(ci[1])}]" if ci else ""),
            width,
        )
    lines += ["", *_analysis_lines(our_scalars(report), published_scalars(published), width)]
    out.write("\n".join(lines) + "\n")


def _analysis_lines(ours: Mapping[str, Any], theirs: Mapping[str, Any], width: int) -> list[str]:
    """Each analysis, ours then the published value, on one line where both fit beside each
    other; else the published value on the line(s) under ours."""
    key_width = max(len(k) for k in ("analysis", *ours))
    short = [len(_short(v)) for v in ours.values() if len(_short(v)) <= ANALYSIS_WIDTH]
    # The column of our values: as wide as the short ones, leaving the header room.
    ours_width = min(max([len("ours"), *short]), width - key_width - len("  published") - 2)
    indent = " " * (key_width + 2)
    lines = [f"{'analysis':<{key_width}}  {'ours':<{ours_width}}  published"]
    for key, value in ours.items():
        mark = "" if theirs.get(key) is None or _same(value, theirs[key]) else "  DIFF"
        mine, published = _short(value), _short(theirs.get(key)) + mark
        line = f"{key:<{key_width}}  {mine:<{ours_width}}  {published}"
        if len(mine) <= ours_width and len(line) <= width:
            lines.append(line)
        else:  # ours, then the published value under it, each in the column of values
            room = width - len(indent)
            values = [*terminal.wrapped(mine, room, ""), *terminal.wrapped(published, room, "")]
            lines.append(f"{key:<{key_width}}  {values[0]}")
            lines += [indent + value for value in values[1:]]
    return lines


MISSING_SHOWN = 5  # missing certificates named in the header; the rest counted
ANALYSIS_WIDTH = 40  # an analysis's value longer than this: the published one under it
TABLE_HEADER: tuple[str, ...] = ("row", "tp/fp/fn/tn", "P", "R", "F1", "F1 95% CI")
TABLE_HEADER += ("tp/fp/fn/tn", "F1", "F1 CI", "counts", "dF1", "dCI")
TABLE_GROUPS = (
    terminal.Group(range(1, 6), "ours"),
    terminal.Group(range(6, 9), "published"),
    terminal.Group(range(9, 12), "ours − published"),
)
TABLE_LEFT = frozenset({0, 1, 5, 6, 8, 9, 11})  # names, counts and intervals; figures right
TABLE_LEGEND = (
    (
        "tp/fp/fn/tn",
        "evaluable (step, premise) pairs judged dependent or not, against the proof tree's "
        "direct premises (full) or with entity-introduction premises as no dependency (pred); "
        "lower_bound counts every gold dependency the policy could not score as a miss; "
        'unstable_negative is the ablation\'s "A alone" (UNSTABLE counted negative, not '
        "skipped). '-': a count the pack does not publish; n/a: no such number.",
    ),
    ("F1 95% CI", "percentile bootstrap over problems."),
    ("counts", "whether every published count equals ours."),
    ("dF1", "ours minus published F1 (0: equal within the published 4 decimals)."),
    ("dCI", "ours minus published, lower and upper bound."),
)


def _signed(value: float | None) -> str:
    """``+0.0012``; differences below the published 4 decimals print as ``0``."""
    if value is None:
        return ""
    return "0" if abs(value) < 5e-5 else f"{value:+.4f}"


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if a is None or b is None:
        return b is None  # a number the pack does not publish differs from nothing
    if isinstance(a, float) or isinstance(b, float):
        return abs(float(a) - float(b)) < 5e-4  # published figures carry 4 decimals
    return bool(a == b)


def _short(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {_short(v)}" for k, v in value.items())
    if isinstance(value, float):
        return f"{value:.4f}"
    return "n/a" if value is None else str(value)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pack_dir", metavar="PACK_DIR", type=Path, help="evidence pack root")
    parser.add_argument(
        "--model", default="gpt-4o", help="model directory under evidence/ (default: %(default)s)"
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=None,
        metavar="FILE",
        help="also write the report there, in report.json's shape; '-': to standard output, "
        "the table then to standard error (default: print only)",
    )
    parser.add_argument(
        "--seed", type=seed_flag, default=DEFAULT_SEED, help="bootstrap seed (default: %(default)s)"
    )
    parser.add_argument(
        "--n-boot",
        type=n_boot_flag,
        default=DEFAULT_N_RESAMPLES,
        metavar="B",
        help="bootstrap resamples; 0: no intervals (default: %(default)s)",
    )
    parser.add_argument(
        "--cascade-mode",
        choices=CASCADE_MODES,
        default=PAPER_CASCADE_MODE,
        help="parent rule of the cascade filter (default: %(default)s, the paper's)",
    )
    add_alias(parser, "--cascade", "--cascade-mode", dest="cascade_mode", choices=CASCADE_MODES)


def rescore(
    pack_dir: Path,
    model: str,
    *,
    seed: int = DEFAULT_SEED,
    n_boot: int = DEFAULT_N_RESAMPLES,
    cascade: CascadeMode = PAPER_CASCADE_MODE,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(model report, published reports)`` for one model of a pack."""
    if n_boot < 0:
        raise UsageError(f"--n-boot must be >= 0, got {n_boot}")
    if cascade not in CASCADE_MODES:
        raise UsageError(f"--cascade must be one of {', '.join(CASCADE_MODES)}")
    pack = load_pack(pack_dir, model)
    # Read the published reports once here, so that a malformed one is refused before
    # anything is computed or printed (the table is printed as it is read).
    where = str(pack_dir / "evidence" / model)
    published_rows(pack.published, where=where)
    published_scalars(pack.published, where=where)
    report = build_model_report(
        pack.pairs,
        pack.outcomes,
        self_consistency=pack.self_consistency,
        seed=seed,
        n_boot=n_boot,
        cascade_mode=cascade,
        alignment=certificate_alignment(pack),
        parse_rates=certificate_parse_rates(pack),
    )
    report["missing_certificates"] = list(pack.missing_certificates)
    return report, pack.published


def check_json_out_of_pack(path: Path, pack_dir: Path) -> None:
    """Refuse ``--json`` at or inside the pack, before anything is computed: the pack is the
    evidence being rescored, read-only by intent, and a report written among its files would
    pass for one of the authors'. The advice names a path outside it, which the check of the
    output file alone would not (it suggests one beside the given path)."""
    resolved, root = path.resolve(), pack_dir.resolve()
    if resolved != root and root not in resolved.parents:
        return
    here = Path.cwd().resolve()
    outside = here != root and root not in here.parents
    example = Path(RESCORE_REPORT.example or "rescore.json")
    raise UsageError(
        f"{path} is inside the evidence pack {root}; nothing is written into the pack",
        where="--json",
        fix=f"Give --json a path outside the pack, e.g. --json "
        f"{example if outside else root.parent / example}.",
    )


def run(args: argparse.Namespace) -> int:
    to_stdout = is_stdout(args.json)
    if args.json is not None and not to_stdout:
        # The pack first: a path inside it is refused as such, whatever file is there.
        check_json_out_of_pack(args.json, args.pack_dir)
        check_output_file(args.json, RESCORE_REPORT, flag="--json")
    report, published = rescore(
        args.pack_dir, args.model, seed=args.seed, n_boot=args.n_boot, cascade=args.cascade_mode
    )
    # With the JSON on standard output, the table goes beside it so that stdout parses.
    said = sys.stderr if to_stdout else sys.stdout
    width = terminal.terminal_width(sys.__stderr__ if to_stdout else None)
    render_comparison(args.model, report, published, said, width=width)
    if args.json is not None:
        section = dict(report)
        section["published_comparison"] = {
            "rows": published_rows(published),
            "analyses": published_scalars(published),
            "counts_equal": {
                c.row: c.counts_equal for c in compare(report, published) if c.published
            },
        }
        document = orjson.dumps({"models": {args.model: section}}, option=orjson.OPT_INDENT_2)
        if to_stdout:
            sys.stdout.buffer.write(document + b"\n")
            sys.stdout.buffer.flush()
            return 0
        try:
            with replacing(args.json) as handle:
                handle.write(document)
        except OSError as exc:
            raise UsageError(
                f"cannot write the report ({exc.strerror})", where=str(args.json)
            ) from exc
    return 0


__all__ = [
    "EXTRA_ROWS",
    "HELP",
    "REQUIRED_ROWS",
    "add_arguments",
    "check_json_out_of_pack",
    "compare",
    "rescore",
    "run",
]
