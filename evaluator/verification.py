"""``cotaudit verify``: everything an evaluation says, checked against the files it came from.

Given a run directory and its evaluation (``eval/``, with its manifest ``evaluation.json``),
:func:`verify_run` checks, and names each failure (docs/certificates.md, "What verify proves"):

1. **files**: every file of the evaluation has the SHA-256 and size its manifest records,
   none is missing and none was added (nor one every evaluation writes left out of the
   manifest), and its formats are the evaluation's; the run's ``manifest.json`` is the run
   evaluated:
   its fields that decide the requests and their answers as recorded (each that changed is
   named), its ``served`` entries of then still its first ones, and a change to the others
   (how the run was run: a resume with other settings) a note;
2. **stream**: ``results.jsonl`` is the stream evaluated: the same root over its lines
   (``evaluator.stream_digest``); where not, the lines that changed, appeared or went are
   named, with the record they hold; blank lines, which every reader skips and ``cotaudit
   run`` never writes, are named in a note (:class:`SkippedLines`);
3. **certificates**: the evaluation is run again from the stream, with the options in the
   manifest (and the records fed beside the stream, if any), and every stored certificate
   is checked against its recomputation (seal, source hashes, content;
   ``evaluator.certificates.CertificateCheck``);
4. **report**: the report recomputed from the stream equals ``report.json``, number for
   number (floats to 1e-9 relative), and ``report.md`` and the CSV tables equal what is
   rendered again from it (without an evidence pack's published cells where the pack is not
   at hand: :func:`without_pack`);
5. **root**: the root hash of the evaluation (SHA-256 of ``evaluation.json``) equals the
   quoted one, when one is given (``--root``): the one check that catches a run whose stream
   was edited and then evaluated again, since everything else is then consistent.

It prints the root hash either way, for a publisher to quote.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from cotaudit.caller_terms import label, option
from cotaudit.errors import UsageError
from cotaudit.schema import JSONDict
from evaluator.cascade import CASCADE_MODES
from evaluator.certificates import CERTIFICATE_FORMAT, CertificateCheck, require_current_format
from evaluator.evaldir import EVALUATION_FORMAT, EVALUATION_NAME, file_digest
from evaluator.evaluation_manifest import (
    DIGESTS_NAME,
    figure_from_entry,
    read_extra_records,
    read_manifest,
    run_manifest_digest,
)
from evaluator.pipeline import TRACE_CHOICES, EvaluateOptions, Evaluation, evaluate_stream
from evaluator.report import (
    NO_NUMBERS_ROW,
    PACK_COLUMNS,
    PACK_NOTE,
    ROWS_HEADER,
    TABLE1_ROWS,
    TABLE2_ROWS,
)
from evaluator.source import (
    STDIN,
    iter_raw_records,
    ordered_by_run,
    resolve_stream,
    run_endpoint_order,
)
from evaluator.stage_records import VANISHED_READINGS
from evaluator.stream_digest import iter_digests, line_changes

MAX_NAMED_LINES = 20  # changed stream lines named one by one; the count is always given
MAX_REPORT_DIFFERENCES = 20
RELATIVE_TOLERANCE = 1e-9  # floats of report.json: equal to this (they are recomputed exactly)
IGNORED_REPORT_KEYS = frozenset({"source"})  # the stream's path as typed on the command line


@dataclass(slots=True)
class Verification:
    """What :func:`verify_run` found: failures (each names what and where), notes (what
    could not be checked, and why), the root hash, and how many certificates were checked."""

    root: str
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    certificates: int = 0

    @property
    def ok(self) -> bool:
        return not self.failures


def _option_error(where: Path, key: str, value: object, allowed: str) -> UsageError:
    return UsageError(
        f"options.{key} is {value!r}, not one of {allowed}",
        where=str(where),
        fix="The evaluation's options were edited; re-evaluate the run with `cotaudit evaluate`.",
    )


def options_from(data: Mapping[str, Any], where: Path) -> EvaluateOptions:
    """The evaluation options recorded in a manifest or a report; ``UsageError`` naming the
    file and the option when one is not what ``cotaudit evaluate`` writes."""
    options = data.get("options")
    if not isinstance(options, Mapping):
        raise UsageError(
            "no options recorded",
            where=str(where),
            fix="Re-evaluate the run with `cotaudit evaluate RUN_DIR`.",
        )
    defaults = EvaluateOptions()
    mode = options.get("cascade_mode", defaults.cascade_mode)
    if mode not in CASCADE_MODES:
        raise _option_error(where, "cascade_mode", mode, ", ".join(CASCADE_MODES))
    vanished = options.get("vanished", defaults.vanished)
    if vanished not in VANISHED_READINGS:
        raise _option_error(where, "vanished", vanished, ", ".join(VANISHED_READINGS))
    trace = options.get("trace", defaults.trace)
    if trace not in TRACE_CHOICES:
        raise _option_error(where, "trace", trace, ", ".join(TRACE_CHOICES))
    majority = options.get("majority", True)
    if not isinstance(majority, bool):
        raise _option_error(where, "majority", majority, "true, false")
    numbers = {}
    for key, default in (("seed", defaults.seed), ("n_boot", defaults.n_boot)):
        value = options.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise _option_error(where, key, value, "a whole number >= 0")
        numbers[key] = value
    return EvaluateOptions(
        n_boot=numbers["n_boot"],
        seed=numbers["seed"],
        cascade_mode=mode,
        majority=majority,
        vanished=vanished,
        trace=trace,
    )


def check_files(eval_dir: Path, manifest: Mapping[str, Any], out: Verification) -> None:
    """Every file the manifest lists is in ``eval_dir`` with its SHA-256, and nothing else
    is (but ``cotaudit view``'s pages): each difference is a failure in ``out``."""
    files = manifest.get("files")
    if not isinstance(files, Mapping):
        out.failures.append(f"{eval_dir / EVALUATION_NAME}: lists no files")
        return
    for name, entry in sorted(files.items()):
        path = eval_dir / name
        if not path.is_file():
            out.failures.append(f"{path}: missing (the evaluation wrote it)")
            continue
        digest, size = file_digest(path)
        if not isinstance(entry, Mapping) or entry.get("sha256") != digest:
            out.failures.append(
                f"{path}: changed since the evaluation (its SHA-256 is not the one in "
                f"{EVALUATION_NAME}; {size} bytes, evaluated {_get(entry, 'bytes')})"
            )
    if DIGESTS_NAME not in files:
        out.failures.append(
            f"{eval_dir / EVALUATION_NAME}: lists no {DIGESTS_NAME}, which every evaluation "
            "writes (the evaluated lines' digests)"
        )
    for path in sorted(eval_dir.iterdir()):
        if path.name == EVALUATION_NAME or path.name in files:
            continue
        if _is_view_page(path.name):
            out.notes.append(
                f"{path}: a page `cotaudit view` wrote from the evaluation, not checked"
            )
        else:
            out.failures.append(f"{path}: not part of the evaluation (added since)")


EVALUATION_FILES = (EVALUATION_NAME, "certificates.jsonl")  # names only an evaluation writes


def refuse_evaluation_dir(path: Path, *, flag: str, example: str) -> None:
    """Refuse an output directory at or inside an evaluation of ``cotaudit evaluate``, before
    anything is written: a file added there fails this module's ``check_files`` (not part of
    the evaluation) and is deleted when the run is evaluated again (``evaluator.evaldir``
    replaces the whole directory). ``example``: the name of a directory to suggest beside it."""
    resolved = path.resolve()
    for above in (resolved, *resolved.parents):
        marker = next((name for name in EVALUATION_FILES if (above / name).is_file()), None)
        if marker is None:
            continue
        # As typed where it names the same directory, else the absolute path.
        shown = path if above == resolved and ".." not in path.parts else above
        what = "is an evaluation" if above == resolved else f"is inside the evaluation {shown}"
        raise UsageError(
            f"{path} {what} (cotaudit evaluate wrote it: it holds {marker}); a file added "
            "there fails `cotaudit verify` and is deleted when the run is evaluated again",
            where=flag,
            fix=f"Give {flag} a directory outside it, e.g. {flag} {shown.parent / example}.",
        )


def _is_view_page(name: str) -> bool:
    """``cotaudit view`` writes its page into ``eval/`` (``view.html``, ``view-with-*.html``):
    derived from the evaluation after it was made, so it is not one of its files."""
    return name == "view.html" or (name.startswith("view-with-") and name.endswith(".html"))


def _get(entry: object, key: str) -> object:
    return entry.get(key) if isinstance(entry, Mapping) else None


def _check_run_manifest(stream: Path | str, manifest: Mapping[str, Any], out: Verification) -> None:
    recorded = manifest.get("run_manifest")
    now = run_manifest_digest(stream)
    where = Path(stream).parent / "manifest.json"
    if recorded is None and now is not None:
        out.failures.append(f"{where}: appeared since the evaluation")
    elif recorded is not None and now is None:
        out.failures.append(f"{where}: gone since the evaluation")
    elif recorded is None or now is None or _get(recorded, "sha256") == now["sha256"]:
        return
    elif not isinstance(recorded, Mapping) or not isinstance(recorded.get("identity"), Mapping):
        out.failures.append(
            f"{where}: changed since the evaluation, which recorded only its SHA-256 (it was "
            "made before evaluations recorded a run manifest's fields), so what changed cannot "
            "be told. If the run was only resumed with other settings (--max-concurrency, "
            "rates, timeouts) or by another cotaudit version, evaluate it again (`cotaudit "
            "evaluate RUN_DIR`) and verify that evaluation"
        )
    elif "identity" not in now:
        out.failures.append(f"{where}: no longer a JSON object (changed since the evaluation)")
    else:
        _compare_run_manifests(where, recorded, now, out)


def _compare_run_manifests(
    where: Path, recorded: Mapping[str, Any], now: Mapping[str, Any], out: Verification
) -> None:
    """A run manifest that changed since the evaluation: a failure for each field that decides
    the run's requests and their answers (docs/certificates.md), a note for the rest."""
    failures = len(out.failures)
    changes = list(_field_changes(recorded["identity"], now["identity"], ""))
    for change in changes[:MAX_REPORT_DIFFERENCES]:
        out.failures.append(
            f"{where}: {change}: what decides the run's requests and their answers is not "
            "what was evaluated"
        )
    if len(changes) > MAX_REPORT_DIFFERENCES:
        out.failures.append(
            f"{where}: ... and {len(changes) - MAX_REPORT_DIFFERENCES} more changed fields"
        )
    before = _mapping(recorded.get("served"))
    after = _mapping(now.get("served"))
    later = []
    for name, entries in before.items():
        current = after.get(name)
        current = current if isinstance(current, list) else []
        if not isinstance(entries, list) or current[: len(entries)] != entries:
            out.failures.append(
                f"{where}: served.{name}: what preflight found serving endpoint {name} up to "
                "the evaluation was edited or removed since"
            )
        elif len(current) > len(entries):
            later.append(name)
    later += sorted(name for name in after if name not in before)
    if later:
        out.notes.append(
            f"{where}: served: a later preflight recorded what serves endpoint "
            f"{', '.join(later)} since the evaluation (a resume; the records evaluated were "
            "answered before it)"
        )
    old, new = _mapping(recorded.get("operational")), _mapping(now.get("operational"))
    operational = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    if operational and len(out.failures) == failures:
        out.notes.append(
            f"{where}: changed since the evaluation in {', '.join(operational)} only: how the "
            "run was run (a resume with other settings such as --max-concurrency, or by another "
            "cotaudit version), not what decides its requests and their answers, which is as "
            "evaluated"
        )


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _shown(value: Any) -> str:
    if value is None:
        return "absent"
    text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode("utf-8")
    return text if len(text) <= 80 else text[:77] + "..."


def _field_changes(old: Any, new: Any, path: str) -> Iterator[str]:
    """Each field that differs between two manifests' values, ``path changed since the
    evaluation (old -> new)``; lists of named tables (the endpoints) by name."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        for key in sorted(set(old) | set(new), key=str):
            yield from _field_changes(old.get(key), new.get(key), f"{path}.{key}" if path else key)
        return
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            name = a.get("name") if isinstance(a, Mapping) else None
            same = isinstance(b, Mapping) and name is not None and b.get("name") == name
            yield from _field_changes(a, b, f"{path}[{name if same else i}]")
        return
    if old != new:
        shown = f"{_shown(old)} -> {_shown(new)}"
        yield f"{path or 'its content'} changed since the evaluation ({shown})"


def _describe(record: Mapping[str, Any]) -> str:
    kind = record.get("kind")
    if kind == "response":
        return f"response {record.get('request_id')}"
    if kind == "problem":
        return f"problem {record.get('problem_id')}"
    if kind == "truth":
        trace = record.get("trace") or "answer"
        return f"truth record of {record.get('problem_id')} ({record.get('model')}, {trace})"
    if kind == "sample_summary":
        return f"sample summary of {record.get('endpoint')}/{record.get('problem_id')}"
    return f"{kind} record"


def _records_at(
    stream: Path | str, numbers: set[int], described: Mapping[int, str] | None = None
) -> dict[int, str]:
    """What the lines ``numbers`` of the stream hold, read again from the file; from
    ``described`` (each record's, by line number, kept as it was read) for standard input,
    which cannot be read twice: a number it lacks is a blank line."""
    found: dict[int, str] = {}
    if not numbers:
        return found
    if described is not None:
        return {number: described.get(number, "blank line") for number in numbers}
    for number, _, record in iter_raw_records(stream):
        if number in numbers:
            found[number] = "blank line" if record is None else _describe(record)
            if len(found) == len(numbers):
                break
    return found


def _check_stream(
    stream: Path | str,
    eval_dir: Path,
    manifest: Mapping[str, Any],
    lines: int,
    root: str,
    digests: bytes,
    out: Verification,
    described: Mapping[int, str] | None = None,
) -> None:
    recorded = manifest.get("stream")
    where = "<stdin>" if stream == STDIN else str(stream)  # as the blank-line note names it
    if not isinstance(recorded, Mapping):
        out.failures.append(f"{eval_dir / EVALUATION_NAME}: records no stream digest")
        return
    if recorded.get("root") == root and recorded.get("lines") == lines:
        return
    stored_digests = eval_dir / DIGESTS_NAME
    before = list(iter_digests(stored_digests.read_bytes())) if stored_digests.is_file() else []
    if len(before) != recorded.get("lines"):
        # Without the evaluated lines' digests every line would be named as changed: say what
        # is known (the root and the count) and why the lines cannot be named.
        why = "is missing" if not stored_digests.is_file() else "is not of the evaluated stream"
        out.failures.append(
            f"{where}: not the stream evaluated ({lines:,} lines, root {root}; evaluated "
            f"{_count(recorded.get('lines'))} lines, root {recorded.get('root')}); which lines "
            f"changed cannot be told: {stored_digests} {why}"
        )
        return
    changes = line_changes(before, iter_digests(digests))
    if not changes.not_evaluated and not changes.gone:
        out.failures.append(
            f"{where}: its lines were reordered since the evaluation (root {root}, "
            f"evaluated {recorded.get('root')})"
        )
        return
    shown = set(changes.not_evaluated[:MAX_NAMED_LINES])
    names = _records_at(stream, shown, described)
    for number in changes.not_evaluated[:MAX_NAMED_LINES]:
        grown = number > int(recorded.get("lines") or 0)
        what = "added since the evaluation" if grown else "changed since the evaluation"
        out.failures.append(f"{where}:{number}: {names.get(number, 'a line')} {what}")
    if len(changes.not_evaluated) > MAX_NAMED_LINES:
        out.failures.append(
            f"{where}: ... and {len(changes.not_evaluated) - MAX_NAMED_LINES} more lines "
            "not in the evaluated stream"
        )
    for number in changes.gone[:MAX_NAMED_LINES]:
        out.failures.append(
            f"{where}: evaluated line {number} is no longer in the stream (changed or removed)"
        )
    if len(changes.gone) > MAX_NAMED_LINES:
        out.failures.append(
            f"{where}: ... and {len(changes.gone) - MAX_NAMED_LINES} more evaluated lines gone"
        )


def _count(value: object) -> str:
    return f"{value:,}" if isinstance(value, int) else repr(value)


def _numbers_equal(a: float, b: float) -> bool:
    if math.isnan(a) and math.isnan(b):
        return True
    return math.isclose(a, b, rel_tol=RELATIVE_TOLERANCE, abs_tol=1e-12)


def report_differences(stored: Any, fresh: Any, path: str = "") -> Iterator[str]:
    """Where two reports differ: numbers compared as numbers (``RELATIVE_TOLERANCE``), the
    rest exactly; each difference as ``path: stored vs recomputed``."""
    if isinstance(stored, Mapping) and isinstance(fresh, Mapping):
        for key in sorted(set(stored) | set(fresh), key=str):
            if not path and key in IGNORED_REPORT_KEYS:
                continue
            here = f"{path}.{key}" if path else str(key)
            if key not in fresh:
                yield f"{here} is not in the recomputed report"
            elif key not in stored:
                yield f"{here} is missing (the recomputed report has it)"
            else:
                yield from report_differences(stored[key], fresh[key], here)
        return
    if isinstance(stored, list) and isinstance(fresh, list):
        if len(stored) != len(fresh):
            yield f"{path} has {len(stored)} entries, recomputed {len(fresh)}"
            return
        for i, (a, b) in enumerate(zip(stored, fresh, strict=True)):
            yield from report_differences(a, b, f"{path}[{i}]")
        return
    numbers = (int, float)
    if (
        isinstance(stored, numbers)
        and isinstance(fresh, numbers)
        and not isinstance(stored, bool)
        and not isinstance(fresh, bool)
    ):
        if not _numbers_equal(float(stored), float(fresh)):
            yield f"{path} is {stored!r}, recomputed from the stream {fresh!r}"
        return
    if stored != fresh:
        yield f"{path} is {_short(stored)}, recomputed from the stream {_short(fresh)}"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _recomputed_report(
    evaluation: Evaluation,
    stream: Path | str,
    options: EvaluateOptions,
    stored: Mapping[str, Any],
    manifest: Mapping[str, Any],
) -> JSONDict:
    report = evaluation.report()
    report["models"] = ordered_by_run(report["models"], run_endpoint_order(stream))
    report["source"] = stored.get("source", str(stream))
    report["options"] = options.as_json()
    pack = _published_pack(manifest)
    if pack is not None:
        report["published_pack"] = pack
    return report


def _published_pack(manifest: Mapping[str, Any]) -> str | None:
    render = manifest.get("render")
    pack = render.get("published_pack") if isinstance(render, Mapping) else None
    return None if pack is None else str(pack)


# The rows a pack can add to a table where we have no numbers: those with a published key.
PACK_ROW_LABELS = frozenset(label for _, label, key in (*TABLE1_ROWS, *TABLE2_ROWS) if key)


def _pack_only_row(line: str) -> bool:
    """A row of one of the pack's rows with no numbers of ours (its published cells taken
    off): ``| <label> | n/a | n/a | n/a | n/a | n/a |``, the label as the renderer gives it
    (with the subset it is computed on, for self-consistency)."""
    if not (line.startswith("| ") and line.endswith(NO_NUMBERS_ROW)):
        return False
    label = line[2 : -len(NO_NUMBERS_ROW)]
    return label in PACK_ROW_LABELS or (
        label.endswith(" problems with samples)") and label.split(" (the ")[0] in PACK_ROW_LABELS
    )


def without_pack(markdown: str) -> list[tuple[int, str]]:
    """``report.md``'s lines (with their 1-based numbers) without what an evidence pack adds
    to it, where the renderer puts it (``evaluator.report``): the note right above a table
    with the published columns, those three columns, and the pack's rows with no numbers of
    ours (shown because the pack has them; in any row table, so that the recomputed report,
    rendered without the pack, loses them too). Rendered without a pack, a report loses by
    this only such rows, which carry nothing to check.

    Which tables of report.md had the pack's cells is recorded nowhere else (the manifest
    and report.json name the pack, not what of it each model's section showed), so it is
    read from the tables' headers; nothing outside a row table is taken out."""
    lines = markdown.split("\n")
    out: list[tuple[int, str]] = []
    in_table = with_pack = False
    for number, line in enumerate(lines, start=1):
        if line == PACK_NOTE and lines[number : number + 2] == ["", ROWS_HEADER + PACK_COLUMNS]:
            continue
        if (
            line == ""
            and number >= 2
            and lines[number - 2] == PACK_NOTE
            and lines[number : number + 1] == [ROWS_HEADER + PACK_COLUMNS]
        ):
            continue
        if line in (ROWS_HEADER, ROWS_HEADER + PACK_COLUMNS):
            in_table, with_pack = True, line != ROWS_HEADER
            out.append((number, ROWS_HEADER))
            continue
        if not (in_table and line.startswith("|")):
            in_table = False
            out.append((number, line))
            continue
        if with_pack:
            if set(line) <= {"|", "-"}:
                line = "|" + "---|" * (line.count("|") - 1 - 3)
            elif len(cells := line.split(" | ")) > 3:
                line = " | ".join(cells[:-3]) + " |"
        if not _pack_only_row(line):
            out.append((number, line))
    return out


def _lines(text: str) -> list[tuple[int, str]]:
    return list(enumerate(text.split("\n"), start=1))


def _first_difference(stored: list[tuple[int, str]], fresh: list[tuple[int, str]]) -> str:
    """Where the stored lines first differ from the fresh ones: ``line N: 'stored', rendered
    again 'fresh'`` (N: the stored file's line)."""
    for (number, x), (_, y) in zip(stored, fresh, strict=False):
        if x != y:
            return f"line {number}: {_short(x)}, rendered again {_short(y)}"
    n = min(len(stored), len(fresh))
    if len(stored) > n:
        number, x = stored[n]
        return f"line {number}: {_short(x)} and what follows is not in the report rendered again"
    last = stored[-1][0] if stored else 0
    return f"it ends at line {last}; rendered again it goes on with {_short(fresh[n][1])}"


def _check_renders(
    eval_dir: Path,
    report: JSONDict,
    manifest: Mapping[str, Any],
    out: Verification,
) -> None:
    from evaluator.report import load_published, render_markdown, write_csv_tables
    from evaluator.traces import render_trace_comparison

    render = manifest.get("render") if isinstance(manifest.get("render"), Mapping) else {}
    assert isinstance(render, Mapping)
    published: dict[str, Any] = {}
    pack = _published_pack(manifest)
    pack_at_hand = pack is not None and Path(pack).is_dir()
    if pack_at_hand:
        assert pack is not None
        for name in report["models"]:
            rows = load_published(Path(pack), name)
            if rows:
                published[name] = rows
    elif pack is not None:
        out.notes.append(
            f"report.md checked without the published numbers of the evidence pack {pack} "
            "beside its tables: the pack is not there (give it there to check them)"
        )
    where = eval_dir / EVALUATION_NAME
    recorded = render.get("figures") or {}
    figures = {
        str(name): [figure_from_entry(f, where) for f in entries]
        for name, entries in (recorded.items() if isinstance(recorded, Mapping) else ())
        if isinstance(entries, list)
    }
    comparison = render.get("comparison_figure")
    markdown = render_markdown(
        report,
        published=published,
        figures=figures,
        comparison_figure=None if comparison is None else figure_from_entry(comparison, where),
    ) + render_trace_comparison(report)
    stored_md = eval_dir / "report.md"
    if not stored_md.is_file():
        out.failures.append(f"{stored_md}: missing (every evaluation writes it)")
    else:
        stored_text = stored_md.read_text(encoding="utf-8", errors="replace")
        if stored_text != markdown:
            # Without the pack, what it added is taken out of both before they are compared.
            lines = without_pack if pack is not None and not pack_at_hand else _lines
            stored_lines, fresh_lines = lines(stored_text), lines(markdown)
            if [x for _, x in stored_lines] != [y for _, y in fresh_lines]:
                out.failures.append(
                    f"{stored_md}: differs from the report rendered again from the stream, "
                    f"at {_first_difference(stored_lines, fresh_lines)}"
                )
    with tempfile.TemporaryDirectory(prefix="cotaudit-verify-") as scratch:
        for path in write_csv_tables(report, Path(scratch)):
            stored_csv = eval_dir / path.name
            if not stored_csv.is_file():
                out.failures.append(f"{stored_csv}: missing (every evaluation writes it)")
            elif stored_csv.read_bytes() != path.read_bytes():
                out.failures.append(
                    f"{stored_csv}: differs from the table written again from the stream"
                )


def _check_formats(where: Path, manifest: Mapping[str, Any], out: Verification) -> None:
    # The certificates' own format was checked (require_current_format); the manifest must
    # say what it holds, or it claims an evaluation other than the one verified.
    for key, value in (("format", EVALUATION_FORMAT), ("certificate_format", CERTIFICATE_FORMAT)):
        if manifest.get(key) != value:
            out.failures.append(
                f"{where}: {key} is {_short(manifest.get(key))}, but the evaluation it seals is "
                f"of {key} {value}"
            )


def _no_evaluation(run: Path, eval_dir: Path, *, explicit: bool) -> UsageError:
    """What stands where the evaluation should be, and what to do: the message for a run
    never evaluated, a selection study (which ``cotaudit evaluate`` refuses), or an
    ``--eval-dir`` that is missing, a file or another directory."""
    where = f"{label('eval_dir')} {eval_dir}" if explicit else str(eval_dir)
    if (eval_dir / "selection.json").is_file():
        return UsageError(
            "this is a selection study's output (selection.json), not an evaluation of "
            "cotaudit evaluate: verify checks grounding evaluations",
            where=where,
            fix=f"Read {eval_dir / 'selection.md'} for its results"
            + ("." if explicit else f"; `cotaudit selection {run}` computes them again."),
        )
    if explicit and not eval_dir.is_dir():
        what = "a file, not a directory" if eval_dir.exists() else "no such directory"
        return UsageError(
            what,
            where=where,
            fix=f"Give {option('eval_dir')} the directory `cotaudit evaluate --out` wrote (it "
            "holds evaluation.json and certificates.jsonl).",
        )
    if explicit:
        return UsageError(
            "not an evaluation: no certificates.jsonl in it",
            where=where,
            fix=f"Give {option('eval_dir')} the directory `cotaudit evaluate --out` wrote (it "
            "holds evaluation.json and certificates.jsonl).",
        )
    return UsageError(
        f"not evaluated: there is no {eval_dir / 'certificates.jsonl'}",
        where=str(run),
        fix=f"Run `cotaudit evaluate {run}` first (or give {option('eval_dir')} where "
        "`cotaudit evaluate --out` put it).",
    )


def _stdin_eval_dir(eval_dir: Path | None) -> Path:
    """The evaluation to check against a stream read from standard input: only ``--eval-dir``
    can say where it is (``RUN_DIR/eval`` has no run directory to be under)."""
    if eval_dir is None:
        raise UsageError(
            "reading the stream from standard input needs --eval-dir DIR",
            where="--eval-dir",
            fix="Add --eval-dir DIR, the evaluation (`cotaudit evaluate --out DIR` wrote it), "
            "e.g. cotaudit verify - --eval-dir RUN_DIR/eval < RUN_DIR/results.jsonl; or give "
            "the run directory instead of '-'.",
        )
    return eval_dir


def _require_the_evaluated_source(
    run: Path, stream: Path | str, eval_dir: Path, manifest: Mapping[str, Any]
) -> None:
    """``UsageError`` where the stream given is of another kind than the one evaluated, which
    no stream given so could pass: standard input for an evaluation of a run directory with a
    ``manifest.json`` (standard input has no manifest to check against it), or a run
    directory with one for an evaluation of standard input (which read none). Either would
    otherwise fail as if the run had been tampered with (``manifest.json`` gone or appeared,
    the report's ``planned_requests`` differing)."""
    recorded = manifest.get("stream")
    path = recorded.get("path") if isinstance(recorded, Mapping) else None
    evaluated = manifest.get("run_manifest")
    if stream == STDIN and evaluated is not None:
        beside = Path(path).parent if isinstance(path, str) and path != STDIN else None
        shown = beside if beside is not None and (beside / "manifest.json").is_file() else None
        raise UsageError(
            f"{eval_dir} is the evaluation of a run directory, and was checked against its "
            "manifest.json; a stream on standard input has no manifest beside it to check",
            where=str(run),
            fix=f"Give the run directory instead of '-': cotaudit verify "
            f"{shown or 'RUN_DIR'} --eval-dir {eval_dir}.",
        )
    if (
        stream != STDIN
        and path == STDIN
        and evaluated is None
        and run_manifest_digest(stream) is not None
    ):
        beside = Path(stream).parent
        raise UsageError(
            f"{eval_dir} is an evaluation of standard input, which read no run manifest; "
            f"this stream has one beside it ({beside / 'manifest.json'}), which that "
            "evaluation never saw",
            where=str(run),
            fix=f"Verify it as it was made: cotaudit verify - --eval-dir {eval_dir} < "
            f"{stream}; or evaluate the run directory (cotaudit evaluate {beside}) to "
            "have its manifest checked too.",
        )


class SkippedLines:
    """The blank lines of the stream, which the reader skips (``evaluator.source``): told
    from the line numbers of the records it passes on (a number left out is a blank line),
    in the one pass over the stream. ``watch`` sees every record, as ``evaluate_stream``'s
    does."""

    def __init__(
        self, watch: Callable[[int, JSONDict], None] | None = None, *, describe: bool = False
    ) -> None:
        self.records = 0
        self.first: int | None = None  # the first blank line's number
        self._watch = watch
        # ``describe``: what each record is, by line number, for naming the lines that changed
        # after the one pass (standard input cannot be read again to find them)
        self.described: dict[int, str] | None = {} if describe else None

    def watch(self, number: int, record: JSONDict) -> None:
        self.records += 1
        if self.first is None and number != self.records:
            self.first = self.records
        if self.described is not None:
            self.described[number] = _describe(record)
        if self._watch is not None:
            self._watch(number, record)

    def note(self, stream: Path | str, lines: int, out: Verification) -> None:
        """A note in ``out`` naming the blank lines among the stream's ``lines`` complete
        ones (docs/certificates.md, "Blank lines"): they carry nothing, but `cotaudit run`
        never writes one, so something else edited or joined the stream."""
        blank = lines - self.records
        if blank == 0:
            return
        first = self.first if self.first is not None else self.records + 1
        where = "<stdin>" if stream == STDIN else str(stream)
        what = "a blank line" if blank == 1 else f"the first of {blank:,} blank lines"
        out.notes.append(
            f"{where}:{first}: {what}, which `cotaudit run` never writes (something else "
            "edited or joined the stream); every reader skips blank lines, so they change no "
            "certificate and no number, and the stream root covers them as they are"
        )


def verify_run(
    run: Path,
    eval_dir: Path | None = None,
    *,
    workers: int | None = None,
    expected_root: str | None = None,
    watch: Callable[[int, JSONDict], None] | None = None,
) -> Verification:
    """Verify an evaluated run (see the module docstring); ``UsageError`` for what cannot be
    verified at all (no evaluation, an evaluation of another format, unreadable options, a
    stream on standard input where it cannot stand for the one evaluated, or none piped in).

    ``watch`` sees every record of the stream with its line number, in the one pass that
    reads it (``cotaudit verify`` checks them against the run's plan)."""
    stream = resolve_stream(run)
    if stream == STDIN:
        eval_dir = _stdin_eval_dir(eval_dir)
    explicit = eval_dir is not None
    eval_dir = eval_dir or Path(stream).parent / "eval"
    certificates = eval_dir / "certificates.jsonl"
    if not certificates.is_file():
        raise _no_evaluation(run, eval_dir, explicit=explicit)
    require_current_format(certificates)
    manifest, root = read_manifest(eval_dir)
    _require_the_evaluated_source(run, stream, eval_dir, manifest)
    options = options_from(manifest, eval_dir / EVALUATION_NAME)
    out = Verification(root)
    _check_formats(eval_dir / EVALUATION_NAME, manifest, out)
    report_path = eval_dir / "report.json"
    stored_report: JSONDict = {}
    if report_path.is_file():
        try:
            loaded = orjson.loads(report_path.read_bytes())
        except orjson.JSONDecodeError:
            loaded = None
        if isinstance(loaded, dict):
            stored_report = loaded
        else:
            out.failures.append(f"{report_path}: not a JSON object")
    if stored_report:
        try:
            recorded = options_from(stored_report, report_path)
        except UsageError as exc:
            out.failures.append(str(exc))
        else:
            if recorded != options:
                out.failures.append(
                    f"{report_path}: its options differ from the evaluation's ({EVALUATION_NAME})"
                )
    check_files(eval_dir, manifest, out)
    _check_run_manifest(stream, manifest, out)
    extras = []
    if manifest.get("extra_records"):
        extra_path = eval_dir / str(manifest["extra_records"])
        if extra_path.is_file():
            extras = list(read_extra_records(extra_path))
        else:
            out.failures.append(
                f"{extra_path}: missing (the evaluation fed these records beside the stream; "
                "recomputed without them)"
            )
    check = CertificateCheck(certificates)
    skipped = SkippedLines(watch, describe=stream == STDIN)
    try:
        result = evaluate_stream(
            stream,
            options,
            workers=workers,
            extra_records=extras,
            on_certificates=check.feed,
            watch=skipped.watch,
        )
        checked = check.finish()
    finally:
        check.close()
    digest = result.digest
    if stream == STDIN and skipped.records == 0:
        raise UsageError(
            "standard input held no record (was the stream piped in?)",
            where=str(run),
            fix=f"Pipe the stream {eval_dir} was computed from: cotaudit verify - --eval-dir "
            f"{eval_dir} < RUN_DIR/results.jsonl, or give the run directory instead of '-'.",
        )
    skipped.note(stream, digest.lines, out)
    _check_stream(
        stream,
        eval_dir,
        manifest,
        digest.lines,
        digest.root,
        digest.line_digests,
        out,
        skipped.described,
    )
    out.certificates = checked.checked
    out.failures.extend(checked.failures)
    if checked.checked == 0:
        out.failures.append(f"{certificates}: holds no certificates")
    fresh = _recomputed_report(result.evaluation, stream, options, stored_report, manifest)
    if stored_report:
        differences = list(report_differences(stored_report, fresh))
        for difference in differences[:MAX_REPORT_DIFFERENCES]:
            out.failures.append(f"{report_path}: {difference}")
        if len(differences) > MAX_REPORT_DIFFERENCES:
            out.failures.append(
                f"{report_path}: ... and {len(differences) - MAX_REPORT_DIFFERENCES} more "
                "differences"
            )
    elif not report_path.is_file():
        out.failures.append(f"{report_path}: missing")
    _check_renders(eval_dir, fresh, manifest, out)
    if expected_root is not None and expected_root.strip().lower() != root:
        out.failures.append(
            f"{eval_dir / EVALUATION_NAME}: the evaluation's root hash is {root}, not the "
            f"quoted {expected_root.strip()}"
        )
    return out
