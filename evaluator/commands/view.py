"""``cotaudit view RUN [RUN ...]``: one self-contained HTML page of evaluated runs.

The page (docs/viewer.md) needs no server and no network: open the printed path in a
browser. ``--serve`` also serves it on 127.0.0.1 until Ctrl-C, for browsers that restrict
``file://`` pages. The viewer reads only run files (``eval/`` and ``results.jsonl``).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import re
import sys
import time
from pathlib import Path

from cotaudit.errors import UsageError
from cotaudit.flags import integer_flag, is_stdout
from cotaudit.output_file import VIEW_PAGE, check_output_file
from evaluator.run_files import locate_run, run_labels
from evaluator.viewer.data import build_page_data
from evaluator.viewer.page import page_parts, write_page

HELP = (
    "Write one self-contained HTML page of evaluated runs (models side by side, every pair) "
    "to --out FILE (default: RUN/eval/view.html)."
)
PAGE_NAME = "view.html"
LOOPBACK = "127.0.0.1"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "runs",
        nargs="+",
        type=Path,
        metavar="RUN",
        help="evaluated run directories (holding eval/ and results.jsonl), or their eval dirs",
    )
    parser.add_argument(
        "--out",
        type=Path,
        metavar="FILE",
        help="the page's path; '-': standard output (default: RUN/eval/view.html for one run; "
        "for several, FIRST_RUN/eval/view-with-OTHER_LABELS.html)",
    )
    parser.add_argument(
        "--serve",
        action="store_true",
        help="also serve the page on 127.0.0.1 and print its URL (until Ctrl-C)",
    )
    parser.add_argument(
        "--port",
        type=integer_flag(low=0, high=65535, fix="give a port number, or 0 for any free port"),
        default=0,
        help="port for --serve; 0: any free port (default: 0)",
    )
    parser.add_argument(
        "--title", help="the page's title (default: 'cotaudit view: ' and the run labels)"
    )


def default_out(runs: list[Path]) -> Path:
    """``RUN/eval/view.html``; with several runs, a name beside the first that lists the others
    (so comparing runs never overwrites a run's own page)."""
    first = locate_run(runs[0]).eval_dir
    if len(runs) == 1:
        return first / PAGE_NAME
    others = run_labels(runs)[1:]
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", "+".join(others)).strip("_")[:80]
    return first / f"view-with-{slug}.html"


def _bind(directory: Path, port: int) -> http.server.ThreadingHTTPServer:
    """A server of ``directory`` on loopback, bound before the page is written (so a port in
    use is refused with nothing written)."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    try:
        return http.server.ThreadingHTTPServer((LOOPBACK, port), handler)
    except OSError as exc:
        raise UsageError(
            f"cannot serve on {LOOPBACK}:{port} ({exc.strerror or exc})",
            where="--port",
            fix="Choose another port, or 0 for any free one.",
        ) from exc


def _serve(server: http.server.ThreadingHTTPServer, path: Path) -> int:
    with server, contextlib.suppress(KeyboardInterrupt):
        bound = server.server_address[1]
        print(f"serving http://{LOOPBACK}:{bound}/{path.name} (Ctrl-C to stop)", flush=True)
        server.serve_forever()
    return 0


def _to_stdout(args: argparse.Namespace) -> int:
    """``--out -``: the page on standard output, the summary line on standard error."""
    if args.serve:
        raise UsageError(
            "--serve serves the page from a file, and --out - writes none",
            where="--out -",
            fix="Give --out FILE (or no --out) to serve the page.",
        )
    started = time.perf_counter()
    data = build_page_data(list(args.runs))
    title = args.title or "cotaudit view: " + ", ".join(r["label"] for r in data.index["runs"])
    size = 0
    for part in page_parts(data, title=title):
        encoded = part.encode("utf-8")
        sys.stdout.buffer.write(encoded)
        size += len(encoded)
    sys.stdout.buffer.flush()
    print(
        f"wrote the page to standard output ({size / 2**20:.1f} MiB) in "
        f"{time.perf_counter() - started:.1f} s",
        file=sys.stderr,
    )
    return 0


def run(args: argparse.Namespace) -> int:
    if is_stdout(args.out):
        return _to_stdout(args)
    runs = list(args.runs)
    out = Path(args.out) if args.out is not None else default_out(runs)
    check_output_file(
        out,
        VIEW_PAGE,
        flag="--out",
        default_of=None
        if args.out is not None
        else ("RUN " if len(runs) == 1 else "RUNs ") + ", ".join(str(r) for r in runs),
    )
    started = time.perf_counter()
    data = build_page_data(runs)
    server = _bind(out.parent.resolve(), args.port) if args.serve else None
    labels = [r["label"] for r in data.index["runs"]]
    title = args.title or "cotaudit view: " + ", ".join(labels)
    try:
        size = write_page(out, data, title=title)
    except BaseException:
        if server is not None:
            server.server_close()
        raise
    audits = len(data.index["audits"].get("model", []))
    models = len(data.index["models"])
    print(
        f"wrote {out} ({size / 2**20:.1f} MiB; {models} model{'s' if models != 1 else ''}, "
        f"{audits:,} audit{'s' if audits != 1 else ''}) in {time.perf_counter() - started:.1f} s",
        file=sys.stderr,
    )
    print(out)
    if server is not None:
        return _serve(server, out)
    return 0
