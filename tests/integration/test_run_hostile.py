"""``cotaudit run`` and ``cotaudit plan`` as an expert user meets them: a setting the run
cannot honour is said once as it starts, and each bad config or flag gets one line (what,
where, what to do), exit status 2, no traceback, and nothing written."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from cotaudit.cli import main
from cotaudit.schema import read_records
from runner.server.lifecycle import ServerThread

# An Anthropic-protocol endpoint at the local server's loopback URL: no key needed there.
ANTHROPIC_SEEDED = """\
run_dir = "run"
cache_dir = "cache"
[task]
kind = "prontoqa"
source = "generate"
n = 1
seed = 0
samples = 2
[[endpoints]]
name = "claude"
provider = "anthropic"
model = "faithful"
base_url = "BASE_URL"
seed = 7
requests_per_minute = 600000
tokens_per_minute = 1e10
"""

SEED_WARNING = (
    "cotaudit: warning: endpoint 'claude' (CONFIG: endpoints[0].seed = 7): the seed is not "
    "sent, since Anthropic's Messages API has no seed parameter; repeated samples are not "
    "reproducible by seed"
)


def _seeded(tmp_path: Path, base_url: str) -> Path:
    path = tmp_path / "claude.toml"
    path.write_text(ANTHROPIC_SEEDED.replace("BASE_URL", base_url))
    return path


@pytest.mark.parametrize("quiet", [[], ["--quiet"]])
def test_an_anthropic_seed_is_said_to_be_unsent_once_as_the_run_starts(
    tmp_path: Path,
    local_server: ServerThread,
    capsys: pytest.CaptureFixture[str],
    quiet: list[str],
) -> None:
    config = _seeded(tmp_path, local_server.base_url)
    assert main(["run", str(config), *quiet]) == 0
    err = capsys.readouterr().err
    warning = SEED_WARNING.replace("CONFIG", str(config))
    # --quiet silences progress, not warnings (as the preflight's).
    assert err.count(warning) == 1, err
    assert err.index(warning) < err.index("cotaudit run: ")  # at the start, before the summary
    responses = [
        r for r in read_records(tmp_path / "run" / "results.jsonl") if r["kind"] == "response"
    ]
    assert responses and all(r["params"]["seed"] is None for r in responses)


def test_a_dry_run_and_a_plan_say_it_too(
    tmp_path: Path, local_server: ServerThread, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _seeded(tmp_path, local_server.base_url)
    warning = SEED_WARNING.replace("CONFIG", str(config))
    assert main(["run", str(config), "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert err.count(warning) == 1 and out.startswith("claude: ")  # the estimate stays alone
    assert main(["plan", str(config), "--out", str(tmp_path / "plan.jsonl")]) == 0
    assert capsys.readouterr().err.count(warning) == 1
    assert not (tmp_path / "run").exists()


def test_a_seed_that_is_sent_gets_no_warning(
    tmp_path: Path, local_server: ServerThread, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _seeded(tmp_path, local_server.base_url)
    config.write_text(config.read_text().replace('"anthropic"', '"openai"'))
    assert main(["run", str(config), "--dry-run"]) == 0
    assert "warning" not in capsys.readouterr().err


# Bad configs and flags -------------------------------------------------------------------

BASE = """\
run_dir = "run"
cache_dir = "cache"
[task]
kind = "prontoqa"
source = "generate"
n = 2
seed = 0
[[endpoints]]
name = "faithful"
provider = "local"
model = "faithful"
requests_per_minute = 600000
tokens_per_minute = 1e10
"""
PASTED_KEY = "gsk_Q7fLm2VxR9tB4nK8wZ3pH6yJ1cD5"  # passes a bare identifier check


def _with(old: str, new: str) -> str:
    assert old in BASE
    return BASE.replace(old, new, 1)


PROMPTS_TASK = 'kind = "prompts"\npath = "PATH"\n'
GENERATED = 'kind = "prontoqa"\nsource = "generate"\nn = 2\nseed = 0\n'

# (case, config text, extra flags, what the one line must say)
HOSTILE: list[tuple[str, str, list[str], str]] = [
    (
        "rpm as text",
        _with("requests_per_minute = 600000", 'requests_per_minute = "fast"'),
        [],
        "endpoints[0].requests_per_minute: 'requests_per_minute' must be a number > 0, "
        'got the string "fast"',
    ),
    ("rpm 0", _with("= 600000", "= 0"), [], "must be a number > 0, got 0"),
    ("concurrency -1", BASE + "max_concurrency = -1\n", [], 'must be "auto" or an integer >= 1'),
    ("concurrency 0", BASE + "max_concurrency = 0\n", [], "got 0"),
    ("max_tokens 0", BASE + "max_tokens = 0\n", [], "'max_tokens' must be an integer >= 1"),
    ("temperature 5", _with("seed = 0\n", "seed = 0\nsample_temperature = 5\n"), [], "[0, 2]"),
    ("n 0", _with("n = 2", "n = 0"), [], "[task].n: 'n' must be an integer >= 1, got 0"),
    (
        "typo",
        BASE + "max_concurency = 4\n",
        [],
        "endpoints[0].max_concurency: unknown key 'max_concurency' at an endpoint. "
        "Did you mean 'max_concurrency'?",
    ),
    (
        "duplicate name",
        BASE + '[[endpoints]]\nname = "faithful"\nprovider = "local"\nmodel = "echo"\n',
        [],
        "endpoints[1].name: duplicate endpoint name 'faithful'",
    ),
    (
        "missing task file",
        _with(GENERATED, PROMPTS_TASK.replace("PATH", "nope.jsonl")),
        [],
        "nope.jsonl does not exist",
    ),
    (
        "task file a directory",
        _with(GENERATED, PROMPTS_TASK.replace("PATH", "adir")),
        [],
        "adir is not a file",
    ),
    (
        "base_url without scheme",
        BASE + 'base_url = "127.0.0.1:8000/v1"\n',
        [],
        "is not an http(s) URL",
    ),
    (
        "key as api_key_env",
        BASE + f'api_key_env = "{PASTED_KEY}"\n',
        [],
        "api_key_env holds what looks like a key",
    ),
    (
        "key inline",
        BASE + f'api_key = "{PASTED_KEY}"\n',
        [],
        "A key is never written in the config",
    ),
    ("TOML syntax", BASE + "max_tokens = = 3\n", [], "c.toml:14:14: not valid TOML"),
    ("shard 3/2", BASE, ["--shard", "3/2"], "--shard: bad shard '3/2'"),
    ("run dir a file", BASE, ["--run-dir", "afile"], "the run directory is a file"),
    ("run dir empty", BASE, ["--run-dir", ""], "--run-dir: --run-dir is empty"),
]


# A plan writes no run directory (only --out): a run_dir that is a file is no matter to it,
# and --run-dir is refused there whatever it names (tests/runner/test_plan_operational_flags.py).
CASES = [
    (command, *case)
    for command in ("run", "plan")
    for case in HOSTILE
    if not (command == "plan" and case[0] in ("run dir a file", "run dir empty"))
]


@pytest.mark.parametrize(
    ("command", "case", "text", "flags", "expected"),
    CASES,
    ids=[f"{c[0]}: {c[1]}" for c in CASES],
)
def test_a_bad_config_or_flag_gets_one_line_exit_2_and_nothing_written(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: str,
    case: str,
    text: str,
    flags: list[str],
    expected: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("x")
    config = tmp_path / "c.toml"
    config.write_text(text)
    before = sorted(tmp_path.rglob("*"))
    out = ["--out", str(tmp_path / "plan.jsonl")] if command == "plan" else ["--quiet"]
    assert main([command, str(config), *out, *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"cotaudit {command}: error: ") and err.count("\n") == 1, err
    assert expected in err, err
    assert "Traceback" not in err and PASTED_KEY not in err and PASTED_KEY[:8] not in err
    assert sorted(tmp_path.rglob("*")) == before


def test_a_run_directory_of_another_config_is_refused_and_left_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.toml"
    config.write_text(BASE)
    assert main(["run", str(config), "--quiet"]) == 0
    manifest = tmp_path / "run" / "manifest.json"
    before = {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir() if p.name != ".lock"}
    other = tmp_path / "other.toml"
    other.write_text(_with('model = "faithful"', 'model = "echo"'))
    capsys.readouterr()
    assert main(["run", str(other), "--quiet", "--run-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "belongs to another config" in err
    assert '"faithful" -> "echo"' in err and "Start a new run directory" in err
    after = {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir() if p.name != ".lock"}
    assert after == before and orjson.loads(manifest.read_bytes())["config"]
