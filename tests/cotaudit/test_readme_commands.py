"""Every ``cotaudit`` command the README shows parses as written: its command and flags exist
(argparse exits 2 on an unknown one), so the tour cannot drift from the command line."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from cotaudit import cli

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_commands() -> list[str]:
    """The ``cotaudit ...`` commands of the README's bash blocks and inline code spans."""
    text = README.read_text()
    found: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            for part in " ".join(shlex.split(line, comments=True)).split(" && "):
                words = part.split()
                if words and words[0] in ("cotaudit", ".venv/bin/cotaudit"):
                    found.append(" ".join(["cotaudit", *words[1:]]))
    for span in re.findall(r"`(cotaudit [^`\n]+)`", text):
        if not any(c in span for c in "[|<"):  # the table's synopses, not commands
            found.append(span)
    return found


def test_the_readme_shows_the_commands_a_user_starts_with() -> None:
    commands = readme_commands()
    assert "cotaudit demo" in commands
    assert any(c.startswith("cotaudit run --model local/faithful") for c in commands)
    assert README.read_text().count("source .venv/bin/activate") == 1


@pytest.mark.parametrize("command", readme_commands())
def test_each_readme_command_parses(command: str) -> None:
    argv = shlex.split(command)[1:]
    selected = next((a for a in argv if a in cli.COMMANDS), None)
    assert selected is not None, f"{command}: no such cotaudit command"
    try:
        cli.build_parser(selected).parse_args(argv)
    except SystemExit as exc:  # argparse: an unknown flag or a missing argument
        pytest.fail(f"the README's `{command}` does not parse (exit {exc.code})")
