"""The command line's conventions (docs/command-line.md): every default shown in ``--help``,
one name per idea across commands, old spellings accepted (hidden) and saying so."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from cotaudit import cli

# Option -> the canonical spelling of its idea; every command must use the canonical one.
RENAMED = {"--cascade": "--cascade-mode", "--bootstrap": "--n-boot", "--no-progress": "--quiet"}
# Commands still showing an old spelling (none left: `run` took --quiet with the rest).
PENDING: set[tuple[str, str]] = set()


def _parser(name: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"cotaudit {name}")
    cli._load(name).add_arguments(parser)
    return parser


def _options(help_text: str) -> dict[str, str]:
    """Each option of a help text (its first spelling) -> its whole help, joined."""
    options: dict[str, str] = {}
    current = None
    for line in help_text.splitlines():
        match = re.match(r"^  (-{1,2}[\w-]+|[A-Z_|-]+)(?:[ ,]|$)(.*)", line)
        if match and not line.startswith("   "):
            current = match.group(1)
            options[current] = match.group(2)
        elif current and line.startswith("    "):
            options[current] += " " + line.strip()
        else:
            current = None
    return options


@pytest.mark.parametrize("name", list(cli.COMMANDS))
def test_every_default_is_shown_in_help(name: str) -> None:
    parser = _parser(name)
    text = parser.format_help()
    missing = []
    for option, help_line in _options(text).items():
        if option in ("-h",):
            continue
        dest = option.lstrip("-").replace("-", "_").split("|")[0].lower()
        default = parser.get_default(dest)
        if default in (None, False, [], "", argparse.SUPPRESS):
            continue
        if "default" not in help_line:
            missing.append(f"{option} (default {default!r})")
    assert not missing, f"cotaudit {name} --help does not show: {', '.join(missing)}"


@pytest.mark.parametrize("name", list(cli.COMMANDS))
def test_one_name_per_idea_across_commands(name: str) -> None:
    shown = set(_options(_parser(name).format_help()))
    old = {o for o in shown & set(RENAMED) if (name, o) not in PENDING}
    assert not old, f"cotaudit {name} still shows {old}; use {[RENAMED[o] for o in old]}"


@pytest.mark.parametrize(
    ("name", "old", "value", "dest", "expected"),
    [
        ("rescore", "--cascade", "dag_parent", "cascade_mode", "dag_parent"),
        ("selection", "--bootstrap", "50", "n_boot", 50),
        ("evaluate", "--no-progress", None, "quiet", True),
        ("run", "--no-progress", None, "quiet", True),
    ],
)
def test_old_spellings_still_work_and_say_what_the_new_one_is(
    name: str,
    old: str,
    value: str | None,
    dest: str,
    expected: object,
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = _parser(name)
    positional = {"rescore": ["PACK"], "selection": [], "evaluate": ["RUN"], "run": ["C"]}[name]
    args = parser.parse_args([*positional, old, *([value] if value else [])])
    assert getattr(args, dest) == expected
    err = capsys.readouterr().err
    assert f"{old} is now spelled {RENAMED[old]}" in err
    assert not re.search(rf"{re.escape(old)}(?![\w-])", parser.format_help())  # hidden


def test_the_decisions_are_written_down() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "command-line.md").read_text()
    for old, new in RENAMED.items():
        assert old in doc and new in doc
