"""The ``cotaudit`` command line.

Each subcommand lives in its own module, in the package that does its work (``runner.commands``,
``evaluator.commands``; ``cotaudit.commands`` for those that compose both halves), exposing
``HELP: str``, ``add_arguments(parser) -> None`` and ``run(args) -> int``. A module is
imported only when its subcommand runs, so ``cotaudit --help`` stays fast and evaluating
never loads the engine. A ``UsageError`` anywhere becomes a one-line message on stderr and
exit status 2; an ``OSError`` (a full disk, a permission) or a ``CacheError`` a one-line
message naming the file, with what to do (for a sweep, whether rerunning resumes), and exit
status 1; a closed standard output (``| head``) nothing at all
and exit status 141, as a shell reports a command that SIGPIPE ended.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from cotaudit import __version__
from cotaudit.errors import CacheError, UsageError

COMMANDS: dict[str, str] = {
    "run": "runner.commands.run",
    "plan": "runner.commands.plan",
    "serve": "runner.commands.serve",
    "import-evidence": "runner.commands.import_evidence",
    "demo": "cotaudit.commands.demo",
    "reproduce": "cotaudit.commands.reproduce",
    "evaluate": "evaluator.commands.evaluate",
    "verify": "cotaudit.commands.verify",
    "rescore": "evaluator.commands.rescore",
    "selection": "evaluator.commands.selection",
    "view": "evaluator.commands.view",
    "compare": "evaluator.commands.compare",
    "parse": "evaluator.commands.parse",
}

# Commands that write a results stream through the engine: after a failure they resume.
SWEEP_COMMANDS = frozenset({"run", "demo", "reproduce"})


EXIT_BROKEN_PIPE = 128 + 13  # 128 + SIGPIPE


def _discard_stdout() -> None:
    """Point standard output at the null device, so that the interpreter's flush at exit does
    not meet the closed pipe again (the recipe of Python's ``signal`` documentation)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor (a test's captured stdout)
        pass


def _load(name: str) -> ModuleType:
    return importlib.import_module(COMMANDS[name])


def build_parser(selected: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cotaudit",
        description="Audit whether a model's chain of thought depends on the premises it cites.",
    )
    parser.add_argument("--version", action="version", version=f"cotaudit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        if selected is not None and name != selected:
            sub.add_parser(name, help="")
            continue
        module = _load(name)
        cmd = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(cmd)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    selected = next((a for a in args_list if a in COMMANDS), None)
    parser = build_parser(selected)
    args = parser.parse_args(args_list)
    if args.command is None:
        parser.print_help()
        return 2
    module = _load(args.command)
    try:
        code: int = module.run(args)
    except UsageError as exc:
        print(f"cotaudit {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # Whoever read the output stopped reading (``| head``): nothing went wrong here, so
        # nothing to say. Later writes go nowhere, and the status is a shell's for a command
        # that SIGPIPE ended.
        _discard_stdout()
        return EXIT_BROKEN_PIPE
    except OSError as exc:
        # The machine, not the input: a full disk, a permission, a vanished directory. One
        # line instead of a traceback; whatever was written before is intact.
        where = f": {exc.filename}" if exc.filename else ""
        notes = getattr(exc, "__notes__", None)
        if args.command not in SWEEP_COMMANDS:
            advice = "Fix this and rerun the same command."
        elif notes:  # the engine's, for a run with no results yet: nothing to resume
            advice = " ".join(notes)
        else:
            advice = (
                "Lines already written are intact; fix this and rerun the same command: the "
                "run resumes where it stopped."
            )
        print(
            f"cotaudit {args.command}: error: {exc.strerror or exc}{where}. {advice}",
            file=sys.stderr,
        )
        return 1
    except CacheError as exc:
        print(f"cotaudit {args.command}: error: {exc}.", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
