"""``cotaudit selection RUN_DIR`` or ``cotaudit selection --counts FILE.csv``.

From a run: reads ``RUN_DIR/results.jsonl`` (procedural problems and their responses), scores
``A`` and ``C`` per trace and deployment (endpoint), and writes ``RUN_DIR/eval/selection.json``,
``selection.md`` and the figures (``--out DIR`` to write elsewhere). ``--json FILE`` (``-``:
standard output) writes the JSON there as well: the output directory always gets the whole
set, its ``selection.json`` beside the page it agrees with, never one from an earlier study
(which ``view`` and ``verify`` would take as this one's); with ``--no-figures``, the figures
an earlier selection wrote there (by their names, and only files matplotlib drew) are
removed once the new page is in place, and no other file. From counts: a CSV with a header
``deployment,a,b,c,d`` and an optional ``stratum`` column; one row per deployment, or one row
per (deployment, stratum) whose sums are the deployment's counts. With ``--counts`` nothing is
written unless ``--json`` or ``--out`` is given. The table is always printed. Bad input exits 2
naming the file, line and column.
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from cotaudit.errors import UsageError
from cotaudit.flags import STREAM, add_alias, is_stdout, output_dir
from cotaudit.output_file import (
    SELECTION_PAGE,
    SELECTION_REPORT,
    check_output_dir,
    check_output_file,
    replacing_together,
)
from cotaudit.schema import JSONDict
from cotaudit.terminal import terminal_width
from evaluator.commands.bootstrap_flags import n_boot_flag, seed_flag
from evaluator.selection import (
    BOOTSTRAP_RESAMPLES,
    JointCounts,
    SelectionReport,
    analyse,
    score_traces,
)
from evaluator.selection_report import (
    FIGURES,
    json_bytes,
    render_markdown,
    render_table,
    write_figures,
)

PAGE_NAME = "selection.md"
JSON_NAME = "selection.json"
HELP = (
    "Selection study: does conditioning on correct answers bias faithfulness? (Part B) Prints "
    "the table; writes selection.json, selection.md and figures into --out DIR (default: "
    "RUN_DIR/eval)."
)
REQUIRED_COLUMNS = ("deployment", "a", "b", "c", "d")
OPTIONAL_COLUMNS = ("stratum",)
# ASCII digits only: str.isdigit() also takes '²' (which int() refuses) and other scripts' digits.
_COUNT = re.compile(r"[0-9]+")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run_dir", nargs="?", type=Path, metavar="RUN_DIR", help="run directory of a sweep"
    )
    parser.add_argument(
        "--counts",
        type=Path,
        metavar="FILE.csv",
        help="joint counts instead of a run ('-': standard input)",
    )
    parser.add_argument(
        "--json",
        type=Path,
        metavar="FILE",
        help="also write the JSON to FILE; '-': to standard output, the table then to "
        "standard error (the output directory gets its selection.json all the same; with "
        "--counts and no --out, FILE is the only output)",
    )
    parser.add_argument(
        "--out",
        type=output_dir,
        metavar="DIR",
        help="directory for selection.md/json and figures (default: RUN_DIR/eval; with "
        "--counts, none)",
    )
    parser.add_argument(
        "--no-figures",
        action="store_true",
        help="skip the figures (PNG, SVG and PDF); those of an earlier selection in the output "
        "directory are removed, as the new selection.md no longer shows them",
    )
    parser.add_argument(
        "--seed", type=seed_flag, default=0, help="bootstrap seed (default: %(default)s)"
    )
    parser.add_argument(
        "--n-boot",
        type=n_boot_flag,
        default=BOOTSTRAP_RESAMPLES,
        metavar="B",
        help="bootstrap resamples of the between-stratum share (default: %(default)s)",
    )
    add_alias(parser, "--bootstrap", "--n-boot", dest="n_boot", type=n_boot_flag, metavar="B")


def parse_counts_csv(
    text: str, *, where: str
) -> tuple[dict[str, JointCounts], dict[str, dict[str, JointCounts]]]:
    """Deployment totals and per-stratum counts from CSV text (see the module docstring)."""
    rows = list(csv.reader(io.StringIO(text)))
    while rows and not any(cell.strip() for cell in rows[-1]):
        rows.pop()
    if not rows:
        raise UsageError(
            "empty counts file",
            where=where,
            fix="Start with the header line 'deployment,a,b,c,d' (optionally ',stratum').",
        )
    header = [h.strip().lower() for h in rows[0]]
    for column in REQUIRED_COLUMNS:
        if column not in header:
            raise UsageError(
                f"line 1: missing column '{column}'",
                where=where,
                fix="The header must name deployment,a,b,c,d (and optionally stratum).",
            )
    for column in header:
        if column not in REQUIRED_COLUMNS + OPTIONAL_COLUMNS:
            raise UsageError(
                f"line 1: unknown column '{column}'",
                where=where,
                fix="Accepted columns: deployment, a, b, c, d, stratum.",
            )
    twice = sorted({column for column in header if header.count(column) > 1})
    if twice:
        raise UsageError(
            f"line 1: column '{twice[0]}' is named twice",
            where=where,
            fix="Name each of deployment, a, b, c, d (and stratum) once.",
        )
    totals: dict[str, JointCounts] = {}
    strata: dict[str, dict[str, JointCounts]] = {}
    total_rows: set[str] = set()
    for number, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise UsageError(
                f"line {number}: {len(row)} fields, the header has {len(header)}",
                where=where,
                fix="Give one value per column.",
            )
        cells = {h: v.strip() for h, v in zip(header, row, strict=True)}
        name = cells["deployment"]
        if not name:
            raise UsageError(f"line {number}, column 'deployment': empty name", where=where)
        values = []
        for column in ("a", "b", "c", "d"):
            raw = cells[column]
            if not _COUNT.fullmatch(raw):
                raise UsageError(
                    f"line {number}, column '{column}': expected a non-negative integer, "
                    f"got '{raw}'",
                    where=where,
                    fix="Counts are whole numbers of traces.",
                )
            values.append(int(raw))
        counts = JointCounts(*values)
        stratum = cells.get("stratum", "")
        if stratum:
            per = strata.setdefault(name, {})
            if stratum in per:
                raise UsageError(
                    f"line {number}, column 'stratum': '{name}' stratum '{stratum}' repeats",
                    where=where,
                )
            if name in total_rows:
                raise UsageError(
                    f"line {number}, column 'stratum': '{name}' already has a row without a "
                    "stratum",
                    where=where,
                    fix="Give a deployment either one total row or one row per stratum.",
                )
            per[stratum] = counts
            totals[name] = totals.get(name, JointCounts(0, 0, 0, 0)) + counts
        else:
            if name in totals:
                raise UsageError(
                    f"line {number}, column 'deployment': '{name}' appears twice",
                    where=where,
                    fix="Give a deployment either one total row or one row per stratum.",
                )
            total_rows.add(name)
            totals[name] = counts
    if not totals:
        raise UsageError(
            "no data rows after the header",
            where=where,
            fix="Add one row per deployment (deployment,a,b,c,d) below the header.",
        )
    return totals, strata


def read_counts_text(path: Path) -> str:
    """The CSV's text (``-``: standard input's): UTF-8, with the byte-order mark spreadsheets
    put first removed (it would otherwise be part of the first column's name)."""
    raw = sys.stdin.buffer.read() if str(path) == STREAM else path.read_bytes()
    data = raw.removeprefix(b"\xef\xbb\xbf")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UsageError(
            f"line {line}: not UTF-8 text ({exc.reason})",
            where=_counts_where(path),
            fix="Save the counts as a UTF-8 CSV (a spreadsheet's 'CSV UTF-8'), or check that "
            "--counts names the CSV.",
        ) from exc


def evaluate_run(
    run_dir: Path, *, seed: int = 0, resamples: int = BOOTSTRAP_RESAMPLES
) -> SelectionReport:
    """The selection report of a run directory (or stream file) holding procedural traces.

    Besides the statistics, the report's JSON carries ``families`` (joint counts per
    deployment and family) and ``preserving`` (per deployment: readable preserving answers
    ``n`` and how many ``agree`` with the unchanged oracle).
    """
    from evaluator.source import iter_records, resolve_stream, run_endpoint_order

    stream = resolve_stream(run_dir)
    tasks: dict[str, None] = {}

    def noting_tasks(records: Iterable[JSONDict]) -> Iterator[JSONDict]:
        for record in records:
            task = record.get("task")
            if isinstance(task, str):
                tasks.setdefault(task)
            yield record

    traces = score_traces(noting_tasks(iter_records(stream)), order=run_endpoint_order(stream))
    if not traces.deployments:
        others = [task for task in tasks if task != "procedural"]
        if others and "procedural" not in tasks:
            # Another task's run: pointing at a procedural sweep "into this directory" would
            # send the user to grow a run of another plan, which `cotaudit run` refuses.
            audit = (
                f"Audit it with `cotaudit evaluate {run_dir}`, or give"
                if others[0] == "prontoqa"
                else "Give"
            )
            raise UsageError(
                f"this is a '{others[0]}' run, not a selection study: the stream holds no "
                "procedural responses, the only ones cotaudit selection reads",
                where=str(stream),
                fix=f"{audit} the run directory of a procedural sweep (`cotaudit demo --study "
                'selection`, or a config with [task] kind = "procedural").',
            )
        raise UsageError(
            "the stream holds no procedural responses",
            where="standard input" if str(stream) == "-" else str(stream),
            fix="Give the results.jsonl of a procedural sweep."
            if str(stream) == "-"
            else 'Run a sweep with [task] kind = "procedural" into this directory first.',
        )
    report = analyse(
        traces.deployments,
        strata=traces.strata,
        rng=seed,
        resamples=resamples,
        excluded=traces.excluded,
    )
    extra = {
        "families": {
            name: {f: _counts_json(c) for f, c in per.items()}
            for name, per in traces.families.items()
        },
        "preserving": {k: dict(v) for k, v in traces.preserving.items()},
    }
    return SelectionReport(
        report.deployments,
        report.pooled,
        report.leave_one_out,
        report.strata,
        report.excluded,
        extra,
    )


def write_outputs(
    report: SelectionReport, out_dir: Path | None, json_path: Path | None, *, figures: bool
) -> tuple[list[Path], list[Path]]:
    """Write ``selection.json``, ``selection.md`` and the figures into ``out_dir`` (when given),
    and the JSON also to ``json_path`` (when given and not that ``selection.json``; ``-``: to
    standard output); return the files written and the earlier figures removed.

    ``out_dir``'s JSON is written even where ``json_path`` names another file: its page is
    replaced, and a ``selection.json`` left from an earlier study would disagree with it. The
    figures go first; the JSON files and the page, which must agree, are then replaced
    together (``replacing_together``): a failure writing any leaves the earlier set. Without
    ``figures``, the figures of an earlier selection are then removed
    (:func:`remove_earlier_figures`): the new page does not link them, and they would show
    another study beside it."""
    files: list[tuple[Path, bytes]] = []
    names: list[str] = []
    data = json_bytes(report)
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        names = write_figures(report, out_dir) if figures else []
        files.append((out_dir / JSON_NAME, data))
    if is_stdout(json_path):
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    elif json_path is not None and not any(_same_file(path, json_path) for path, _ in files):
        files.append((json_path, data))
    if out_dir is not None:
        files.append((out_dir / PAGE_NAME, render_markdown(report, names).encode("utf-8")))
    if files:
        with replacing_together(*(path for path, _ in files)) as handles:
            for handle, (_, content) in zip(handles, files, strict=True):
                handle.write(content)
    removed: list[Path] = []
    if out_dir is not None and not figures:
        # Only once the new set is in place: a failure before it leaves the earlier set whole.
        removed = remove_earlier_figures(out_dir, keep=[path for path, _ in files])
    written = [*(path for path, _ in files), *(out_dir / n for n in names if out_dir is not None)]
    return written, removed


# Where each format of figure (``evaluator.figures.FORMATS``, which imports matplotlib) says
# that matplotlib drew it, and how far from the file's start (or, for the PDF, whose
# information dictionary comes last, from its end).
DRAWN_BY = {
    "png": (b"tEXtSoftware\x00Matplotlib", 1024),
    "svg": (b"<dc:title>Matplotlib v", 4096),
    "pdf": (b"/Producer (Matplotlib pdf backend", -4096),
}


def figure_files(out_dir: Path) -> list[Path]:
    """The files the selection's figures are written to in ``out_dir``: each of
    :data:`FIGURES` as PNG, SVG and PDF."""
    return [out_dir / f"{Path(f).stem}.{ext}" for f in FIGURES for ext in DRAWN_BY]


def drawn_by_matplotlib(path: Path) -> bool:
    """Whether ``path`` is a regular file (not a link) that matplotlib wrote, as it writes the
    selection's figures: its PNG's software text, its SVG's creator, its PDF's producer."""
    mark, reach = DRAWN_BY.get(path.suffix.lstrip("."), (b"", 0))
    if not mark or path.is_symlink() or not path.is_file():
        return False
    with path.open("rb") as handle:
        if reach < 0:
            handle.seek(max(0, path.stat().st_size + reach))
        return mark in handle.read(abs(reach))


def remove_earlier_figures(out_dir: Path, *, keep: Iterable[Path] = ()) -> list[Path]:
    """Remove from ``out_dir`` the figures an earlier selection wrote there, except the paths
    in ``keep``; return those removed. Only the files of :func:`figure_files`, by those names,
    and of those only the ones matplotlib drew (:func:`drawn_by_matplotlib`): a file of such
    a name that it did not (the user's own), a link or a directory stays."""
    kept = {path.resolve() for path in keep}
    removed = []
    for path in figure_files(out_dir):
        if path.resolve() not in kept and drawn_by_matplotlib(path):
            path.unlink()
            removed.append(path)
    return removed


def run(args: argparse.Namespace) -> int:
    if (args.run_dir is None) == (args.counts is None):
        raise UsageError(
            "give either RUN_DIR or --counts FILE.csv (exactly one)",
            fix="e.g. `cotaudit selection runs/demo` or `cotaudit selection --counts t.csv`.",
        )
    if args.counts is not None:
        path: Path = args.counts
        if str(path) != STREAM and not path.is_file():
            raise UsageError(
                "a directory, not a counts file" if path.is_dir() else "no such counts file",
                where=f"--counts {path}",
                fix="Give a CSV file with the header deployment,a,b,c,d (and optionally stratum).",
            )
        out_dir: Path | None = args.out
    else:
        target = Path(args.run_dir)
        if str(target) == "-" and args.out is None:
            raise UsageError(
                "reading standard input (-) needs --out DIR for the outputs",
                where="RUN_DIR -",
                fix="Give --out DIR (created if missing): cotaudit selection - --out DIR.",
            )
        out_dir = args.out or (target.parent if target.is_file() else target) / "eval"
    json_path: Path | None = args.json
    # Without --out, the directory is RUN_DIR/eval: the messages name what the user gave.
    default_of = f"RUN_DIR {args.run_dir}" if args.out is None and args.counts is None else None
    check_outputs(out_dir, json_path, default_of=default_of)
    if args.out is not None:
        from evaluator.verification import refuse_evaluation_dir

        refuse_evaluation_dir(args.out, flag="--out", example="selection")
    if args.counts is not None:
        totals, strata = parse_counts_csv(read_counts_text(path), where=_counts_where(path))
        report = analyse(totals, strata=strata, rng=args.seed, resamples=args.n_boot)
    else:
        report = evaluate_run(args.run_dir, seed=args.seed, resamples=args.n_boot)
    # With the JSON on standard output, what else is printed goes beside it, so stdout parses.
    said = sys.stderr if is_stdout(json_path) else sys.stdout
    width = terminal_width(sys.__stderr__ if said is sys.stderr else None)
    print(render_table(report, width=width), file=said)
    written, removed = write_outputs(report, out_dir, json_path, figures=not args.no_figures)
    for line in outputs_lines(written, removed, width=width):
        print(line, file=said)
    return 0


def outputs_lines(
    written: list[Path], removed: list[Path], *, width: int | None = None
) -> list[str]:
    """What :func:`write_outputs` did, for the terminal: the files written, then the earlier
    figures removed (without figures). Each list is one line where it fits ``width``
    characters (the terminal's by default), else a path to a line, as ``cotaudit compare``
    says what it wrote: a path the terminal wraps cannot be copied whole."""
    width = terminal_width() if width is None else width
    lines: list[str] = []
    if written:
        wrote = "wrote " + ", ".join(str(p) for p in written)
        lines += ["", wrote] if len(wrote) <= width else ["", *(f"wrote {p}" for p in written)]
    if removed:
        said = "removed the earlier selection's figures (no figures drawn this time)"
        line = f"{said}: " + ", ".join(str(p) for p in removed)
        lines += [line] if len(line) <= width else [f"{said}:", *(f"  {p}" for p in removed)]
    return lines


def check_outputs(
    out_dir: Path | None,
    json_path: Path | None,
    *,
    default_of: str | None = None,
) -> None:
    """Refuse, before any work, outputs that could lose data (``cotaudit.output_file``):
    ``--out DIR`` at or under a file, and a ``--json`` file (or the ``selection.json`` or
    ``selection.md`` the directory already holds) that no selection wrote. ``--out DIR`` is
    created with its parents; ``--json FILE`` needs an existing directory.
    ``default_of``: no ``--out`` was given, and ``out_dir`` is the default for it
    (``RUN_DIR RUN``)."""
    if out_dir is not None:
        check_output_dir(
            out_dir,
            flag="--out",
            holds="selection.md, selection.json and figures",
            default_of=default_of,
        )
    if is_stdout(json_path):
        json_path = None  # standard output: no file to check
    if json_path is not None and out_dir is not None:
        # --json naming the page or a figure: the one would be written over the other.
        taken = {out_dir / PAGE_NAME, *figure_files(out_dir)}
        clash = next((p for p in taken if _same_file(p, json_path)), None)
        if clash is not None:
            raise UsageError(
                f"{json_path} is the {clash.name} that the selection writes into {out_dir}: "
                "the one would be written over the other",
                where="--json",
                fix=f"Give --json another file, or leave it out: {out_dir / JSON_NAME} is "
                "written all the same.",
            )
    if json_path is not None:
        check_output_file(json_path, SELECTION_REPORT, flag="--json")
    if out_dir is not None and out_dir.is_dir():
        for name, kind in ((JSON_NAME, SELECTION_REPORT), (PAGE_NAME, SELECTION_PAGE)):
            check_output_file(
                out_dir / name, kind, flag="--out", in_dir=True, default_of=default_of
            )


def _counts_where(path: Path) -> str:
    return "standard input" if str(path) == STREAM else str(path)


def _same_file(a: Path, b: Path) -> bool:
    """``a`` and ``b`` name one file (as written: either may not exist yet)."""
    return a.resolve() == b.resolve()


def _counts_json(c: JointCounts) -> dict[str, int]:
    return {"n": c.n, "a": c.a, "b": c.b, "c": c.c, "d": c.d}
