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

``cotaudit help COMMAND`` is ``cotaudit COMMAND --help``. A misspelt command, or an option the
command does not have, is refused (exit 2) under that command's usage, naming the nearest one
(``cotaudit evalute`` -> ``evaluate``, ``--n-bot`` -> ``--n-boot``).
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
from cotaudit.values import nearest

COMMANDS: dict[str, str] = {
    "run": "runner.commands.run",
    "plan": "runner.commands.plan",
    "serve": "runner.commands.serve",
    "import-evidence": "runner.commands.import_evidence",
    "merge": "runner.commands.merge",
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
    """The parser of ``cotaudit``; only ``selected``'s options are loaded (all for None)."""
    return _build(selected)[0]


def _build(
    selected: str | None,
) -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    parser = argparse.ArgumentParser(
        prog="cotaudit",
        description="Audit whether a model's chain of thought depends on the premises it cites.",
        epilog="`cotaudit help COMMAND` or `cotaudit COMMAND --help` shows a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"cotaudit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    loaded: dict[str, argparse.ArgumentParser] = {}
    for name in COMMANDS:
        if selected is not None and name != selected:
            sub.add_parser(name, help="")
            continue
        module = _load(name)
        cmd = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(cmd)
        loaded[name] = cmd
    return parser, loaded


def _command_at(argv: Sequence[str]) -> int | None:
    """Where the command is in ``argv``: the first word that is not an option (``cotaudit``
    itself takes none with a value)."""
    return next((i for i, word in enumerate(argv) if not word.startswith("-")), None)


def _unknown_option(parser: argparse.ArgumentParser, words: Sequence[str]) -> str | None:
    """The message for the first long option of ``words`` that ``parser`` does not have (nor
    abbreviates), naming the nearest it has; None when every one is known.

    argparse would report it only after the whole line, under ``cotaudit``'s usage rather than
    the command's, and lump it with the words that followed it (``unrecognized arguments:
    --n-bot 5``), a required option missing taking precedence."""
    known = [o for action in parser._actions for o in action.option_strings]
    shown = [
        o
        for action in parser._actions
        if action.help != argparse.SUPPRESS
        for o in action.option_strings
        if o.startswith("--")
    ]
    for word in words:
        if word == "--":  # the rest are arguments, whatever they look like
            return None
        if not word.startswith("--"):
            continue
        option = word.split("=", 1)[0]
        if option in known or any(o.startswith(option) for o in known if o.startswith("--")):
            continue  # argparse takes an unambiguous abbreviation and refuses an ambiguous one
        near = nearest(option, shown)
        hint = f"; did you mean {near}?" if near else ""
        return f"unrecognized option {option}{hint} ({parser.prog} --help lists its options)"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:
        # Anywhere: while a command's modules load (a second, before it has done anything)
        # as well as while it runs; a command that was doing something has said what.
        return 130


def _main(argv: Sequence[str] | None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    at = _command_at(args_list)
    if at is not None and args_list[at] == "help":  # `cotaudit help [COMMAND]`
        args_list = [*args_list[at + 1 : at + 2], "--help"]
        at = 0 if len(args_list) == 2 else None
    selected = args_list[at] if at is not None else None
    if selected is not None and selected not in COMMANDS:
        near = nearest(selected, COMMANDS)
        hint = f"; did you mean '{near}'?" if near else ""
        build_parser(selected).error(  # no command's options: only the usage is shown
            f"unknown command '{selected}'{hint} (`cotaudit --help` lists the commands)"
        )
    parser, loaded = _build(selected)
    command = loaded.get(selected) if selected is not None else None
    if command is not None and at is not None:
        unknown = _unknown_option(command, args_list[at + 1 :])
        if unknown is not None:
            command.error(unknown)
    args, extras = parser.parse_known_args(args_list)
    if extras:
        (command or parser).error(f"unrecognized arguments: {' '.join(extras)}")
    if args.command is None:
        parser.print_help()
        return 2
    module = _load(args.command)
    try:
        code: int = module.run(args)
    except UsageError as exc:
        print(f"cotaudit {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        # Whoever read the output stopped reading (``| head``): nothing went wrong here, so
        # nothing to say. Later writes go nowhere, and the status is a shell's for a command
        # that SIGPIPE ended.
        _discard_stdout()
        return EXIT_BROKEN_PIPE
    except OSError as exc:
        # The machine, not the input: a full disk, a permission, a vanished directory. One
        # line instead of a traceback; whatever was written before is intact, but after a
        # failed fsync, whose error carries its own note of what is and is not known.
        where = f": {exc.filename}" if exc.filename else ""
        notes = getattr(exc, "__notes__", None)
        if args.command not in SWEEP_COMMANDS:
            advice = "Fix this and rerun the same command."
        elif notes:  # the engine's (no results yet: nothing to resume) or the writer's (fsync)
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
