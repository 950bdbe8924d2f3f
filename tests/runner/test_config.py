"""Sweep config validation: every bad field is named; the CLI exits 2 and writes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cotaudit.cli import main
from cotaudit.errors import UsageError
from runner.config import EndpointConfig, config_from_mapping, load_config

GOOD = """\
run_dir = "runs/demo"
cache_dir = "cache"
[task]
kind = "prompts"
path = "prompts.jsonl"
[[endpoints]]
name = "gpt4o"
provider = "openai"
base_url = "https://api.openai.com/v1"
model = "gpt-4o-2024-08-06"
api_key_env = "OPENAI_API_KEY"
requests_per_minute = 500
tokens_per_minute = 800000
max_concurrency = 32
timeout_s = 120
max_tokens = 512
top_p = 0.9
seed = 7
stop = ["END"]
price_input_per_mtok = 2.5
price_output_per_mtok = 10
headers = { "OpenAI-Organization" = "org-x" }
"""


def _write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "prompts.jsonl").write_text('{"id": "a", "prompt": "hi"}\n')
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    return path


def test_good_config_loads_with_paths_relative_to_the_file(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, GOOD))
    assert config.run_dir == tmp_path / "runs" / "demo"
    assert config.cache_dir == tmp_path / "cache"
    ep = config.endpoints[0]
    assert (ep.name, ep.provider, ep.model, ep.max_concurrency) == (
        "gpt4o",
        "openai",
        "gpt-4o-2024-08-06",
        32,
    )
    assert ep.stop == ("END",)
    ident = ep.identity()
    assert ident.host == "api.openai.com"
    assert ident.cache_identity == "https://api.openai.com/v1"
    assert ident.params == {"max_tokens": 512, "top_p": 0.9, "seed": 7, "stop": ["END"]}
    assert config.build_task().name == "prompts"


def test_local_identity_is_stable_whatever_the_port() -> None:
    a = EndpointConfig("l", "local", "echo", base_url="http://127.0.0.1:1234/v1")
    b = EndpointConfig("l", "local", "echo")
    assert a.identity().cache_identity == b.identity().cache_identity == "local"
    assert b.embedded and not a.embedded


def _bad(replace: tuple[str, str]) -> str:
    old, new = replace
    assert old in GOOD, old
    return GOOD.replace(old, new)


def _retry(setting: str) -> tuple[str, str]:
    """A replacement that adds ``retry = { setting }`` at the top level."""
    return ('run_dir = "runs/demo"', f'run_dir = "runs/demo"\nretry = {{ {setting} }}')


BAD_CASES: list[tuple[str, tuple[str, str], str]] = [
    ("unknown top key", ('run_dir = "runs/demo"', 'run_dir = "r"\nrundir = "x"'), "rundir"),
    ("missing run_dir", ('run_dir = "runs/demo"\n', ""), "run_dir"),
    ("bad provider", ('provider = "openai"', 'provider = "azure"'), "provider"),
    ("missing model", ('model = "gpt-4o-2024-08-06"\n', ""), "model"),
    (
        "unknown endpoint key",
        ("max_tokens = 512", "max_tokens = 512\ntemperature = 0"),
        "temperature",
    ),
    (
        "negative rpm",
        ("requests_per_minute = 500", "requests_per_minute = -1"),
        "requests_per_minute",
    ),
    ("zero tpm", ("tokens_per_minute = 800000", "tokens_per_minute = 0"), "tokens_per_minute"),
    ("float concurrency", ("max_concurrency = 32", "max_concurrency = 2.5"), "max_concurrency"),
    ("string timeout", ("timeout_s = 120", 'timeout_s = "fast"'), "timeout_s"),
    ("top_p range", ("top_p = 0.9", "top_p = 3"), "top_p"),
    ("seed type", ("seed = 7", "seed = 1.5"), "seed"),
    ("stop type", ('stop = ["END"]', "stop = [1]"), "stop"),
    ("base_url scheme", ('base_url = "https://api.openai.com/v1"', 'base_url = "api"'), "base_url"),
    (
        "credential in base_url",
        ('base_url = "https://api.openai.com/v1"', 'base_url = "https://u:p@h/v1"'),
        "base_url",
    ),
    (
        "key instead of name",
        ('api_key_env = "OPENAI_API_KEY"', 'api_key_env = "sk-1-2"'),
        "api_key_env",
    ),
    ("missing key env", ('api_key_env = "OPENAI_API_KEY"\n', ""), "api_key_env"),
    (
        "secret header",
        ('headers = { "OpenAI-Organization" = "org-x" }', 'headers = { Authorization = "x" }'),
        "Authorization",
    ),
    (
        "header line break",
        ('headers = { "OpenAI-Organization" = "org-x" }', 'headers = { X-A = "1\\r\\nX-B: 2" }'),
        "headers.X-A",
    ),
    (
        "the removed http_client",
        ("timeout_s = 120", 'timeout_s = 120\nhttp_client = "aiohttp"'),
        "http_client",
    ),
    (
        "concurrency neither auto nor a count",
        ("max_concurrency = 32", 'max_concurrency = "fast"'),
        "max_concurrency",
    ),
    ("concurrency a float", ("max_concurrency = 32", "max_concurrency = 2.5"), "max_concurrency"),
    ("outage budget zero", ("timeout_s = 120", "timeout_s = 120\noutage_budget_s = 0"), "outage"),
    ("bad task kind", ('kind = "prompts"', 'kind = "poems"'), "kind"),
    ("missing prompts file", ('path = "prompts.jsonl"', 'path = "nope.jsonl"'), "path"),
    ("price negative", ("price_input_per_mtok = 2.5", "price_input_per_mtok = -2"), "price_input"),
    ("nan rpm", ("requests_per_minute = 500", "requests_per_minute = nan"), "requests_per_minute"),
    ("inf tpm", ("tokens_per_minute = 800000", "tokens_per_minute = inf"), "tokens_per_minute"),
    ("inf concurrency", ("max_concurrency = 32", "max_concurrency = inf"), "max_concurrency"),
    (
        "concurrency past 64 bits",
        ("max_concurrency = 32", "max_concurrency = 100000000000000000000000"),
        "max_concurrency",
    ),
    ("inf timeout", ("timeout_s = 120", "timeout_s = inf"), "timeout_s"),
    ("nan top_p", ("top_p = 0.9", "top_p = nan"), "top_p"),
    ("seed past 64 bits", ("seed = 7", "seed = 100000000000000000000000"), "seed"),
    ("max_tokens past 64 bits", ("max_tokens = 512", "max_tokens = 9223372036854775808"), "max_"),
    ("nan price", ("price_input_per_mtok = 2.5", "price_input_per_mtok = nan"), "price_input"),
    (
        "inf outage budget",
        ("timeout_s = 120", "timeout_s = 120\noutage_budget_s = inf"),
        "outage_budget_s",
    ),
    ("nan base delay", _retry("base_delay_s = nan"), "[retry].base_delay_s"),
    ("negative base delay", _retry("base_delay_s = -1"), "[retry].base_delay_s"),
    ("inf max delay", _retry("max_delay_s = inf"), "[retry].max_delay_s"),
    ("inf time budget", _retry("time_budget_s = inf"), "[retry].time_budget_s"),
    (
        "attempts past 64 bits",
        _retry("max_attempts = 100000000000000000000000"),
        "[retry].max_attempts",
    ),
    (
        "limit past 64 bits",
        ('run_dir = "runs/demo"', 'run_dir = "r"\nlimit = 100000000000000000000000'),
        ": limit",
    ),
    ("inf limit", ('run_dir = "runs/demo"', 'run_dir = "r"\nlimit = inf'), ": limit"),
]


@pytest.mark.parametrize(("label", "replace", "field"), BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_each_bad_field_is_named(
    tmp_path: Path, label: str, replace: tuple[str, str], field: str
) -> None:
    path = _write(tmp_path, _bad(replace))
    with pytest.raises(UsageError) as info:
        config = load_config(path)
        config.build_task()
    message = str(info.value)
    assert field in message, message
    assert str(path) in message, message


def test_duplicate_endpoint_names_are_refused(tmp_path: Path) -> None:
    text = GOOD + GOOD[GOOD.index("[[endpoints]]") :]
    with pytest.raises(UsageError, match=r"endpoints\[1\]\.name"):
        load_config(_write(tmp_path, text))


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not valid TOML"):
        load_config(_write(tmp_path, "run_dir = \n"))


def test_programmatic_config_matches_the_file(tmp_path: Path) -> None:
    from_file = load_config(_write(tmp_path, GOOD))
    table: dict[str, Any] = {
        "run_dir": "runs/demo",
        "cache_dir": "cache",
        "task": {"kind": "prompts", "path": "prompts.jsonl"},
        "endpoints": [from_file.endpoints[0].to_mapping()],
    }
    built = config_from_mapping(table, config_dir=tmp_path)
    assert built.endpoints == from_file.endpoints
    assert built.plan_hash() == from_file.plan_hash()


def test_plan_hash_ignores_operational_settings_but_not_outputs(tmp_path: Path) -> None:
    base = load_config(_write(tmp_path, GOOD)).plan_hash()
    faster = _bad(("requests_per_minute = 500", "requests_per_minute = 9000"))
    assert load_config(_write(tmp_path, faster)).plan_hash() == base
    other_model = _bad(('model = "gpt-4o-2024-08-06"', 'model = "gpt-4o-mini"'))
    assert load_config(_write(tmp_path, other_model)).plan_hash() != base
    longer = _bad(("max_tokens = 512", "max_tokens = 1024"))
    assert load_config(_write(tmp_path, longer)).plan_hash() != base


def test_manifest_config_never_holds_a_key_value(tmp_path: Path) -> None:
    table = load_config(_write(tmp_path, GOOD)).to_mapping()
    assert table["endpoints"][0]["api_key_env"] == "OPENAI_API_KEY"


@pytest.mark.parametrize(
    "endpoint",
    [
        {"provider": "anthropic", "model": "m", "thinking_budget": 1024, "max_tokens": 2048},
        {"provider": "anthropic", "model": "m", "omit_sampling": True},
        {"provider": "openai", "model": "m", "reasoning_effort": "low", "omit_sampling": True},
        {"provider": "openai", "model": "m", "max_tokens_param": "max_completion_tokens"},
        {"provider": "local", "model": "faithful"},
    ],
)
def test_a_manifests_config_reads_back_as_the_same_config(endpoint: dict[str, Any]) -> None:
    # verify rebuilds the plan from the manifest's config: what to_mapping writes (every
    # endpoint's defaults spelled out) must load again, to the same config.
    if endpoint["provider"] != "local":
        endpoint = {**endpoint, "base_url": "http://127.0.0.1:1"}
    table = {
        "run_dir": "run",
        "task": {"kind": "prontoqa", "source": "generate", "n": 2},
        "endpoints": [{"name": "e", **endpoint}],
    }
    config = config_from_mapping(table, config_dir=Path("/nonexistent"))
    again = config_from_mapping(config.to_mapping(), config_dir=Path("/nonexistent"))
    assert again.to_mapping() == config.to_mapping()
    assert again.plan_hash() == config.plan_hash()


def test_cli_exits_2_names_the_field_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, _bad(("max_concurrency = 32", "max_concurrency = 0")))
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["run", str(path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "max_concurrency" in err and str(path) in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_concurrency_is_auto_unless_an_endpoint_sets_a_count(tmp_path: Path) -> None:
    unset = load_config(_write(tmp_path, _bad(("max_concurrency = 32\n", ""))))
    assert unset.endpoints[0].max_concurrency == "auto"
    auto = load_config(_write(tmp_path, _bad(("max_concurrency = 32", 'max_concurrency = "auto"'))))
    assert auto.endpoints[0].max_concurrency == "auto"
    assert auto.endpoints[0].to_mapping()["max_concurrency"] == "auto"
    fixed = load_config(_write(tmp_path, GOOD))
    assert fixed.endpoints[0].max_concurrency == 32
    assert unset.plan_hash() == fixed.plan_hash()  # operational, like the rates


@pytest.mark.parametrize(
    ("replace", "message"),
    [
        (
            ("requests_per_minute = 500", "requests_per_minute = nan"),
            "'requests_per_minute' must be a finite number > 0, got nan",
        ),
        (
            ("max_concurrency = 32", "max_concurrency = inf"),
            "'max_concurrency' must be \"auto\" or an integer >= 1, got inf",
        ),
        (
            ("seed = 7", "seed = 100000000000000000000000"),
            "'seed' must be an integer in [-9223372036854775808, 9223372036854775807] (64 bits), "
            "got 100000000000000000000000",
        ),
        (('model = "gpt-4o-2024-08-06"', 'model = ["nope"]'), 'got the list ["nope"]'),
        (
            ('model = "gpt-4o-2024-08-06"', "model = { a = 1 }"),
            "must be a non-empty string, got a table",
        ),
        (
            ('stop = ["END"]', "stop = [1]"),
            "'stop' must be a string or a list of strings, got the list [1]",
        ),
        (("seed = 7", 'seed = "7"'), "'seed' must be an integer, got the string \"7\""),
        (("top_p = 0.9", "top_p = true"), "'top_p' must be a number in [0, 1], got true"),
        # The check accepts 0 (retry at once): the message says so, not "positive".
        (_retry("base_delay_s = -1"), "'base_delay_s' must be a number >= 0, got -1"),
    ],
)
def test_messages_show_the_value_as_written_never_a_python_repr(
    tmp_path: Path, replace: tuple[str, str], message: str
) -> None:
    with pytest.raises(UsageError) as info:
        load_config(_write(tmp_path, _bad(replace)))
    text = str(info.value)
    assert message in text, text
    assert "['" not in text and "None" not in text and "{'" not in text


def test_a_base_delay_of_0_retries_at_once_and_is_accepted(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD + "[retry]\nbase_delay_s = 0\nmax_delay_s = 0\n")
    retry = load_config(path).retry
    assert (retry.base_delay_s, retry.max_delay_s) == (0.0, 0.0)


@pytest.mark.parametrize("where", ["cache", "cache/sub"])
def test_a_cache_dir_that_is_a_file_exits_2_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    path = _write(tmp_path, GOOD.replace('cache_dir = "cache"', f'cache_dir = "{where}"'))
    (tmp_path / "cache").write_text("my notes\n", encoding="utf-8")
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(UsageError, match="is a file") as info:
        load_config(path)
    assert f"{path}: cache_dir" in str(info.value) and "Point cache_dir at a directory" in str(
        info.value
    )
    assert main(["run", str(path), "--quiet", "--no-preflight"]) == 2
    err = capsys.readouterr().err
    assert "cache_dir" in err and "is a file" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert (tmp_path / "cache").read_text(encoding="utf-8") == "my notes\n"


def test_the_default_timeout_is_the_sdks_600_s_and_an_explicit_one_is_kept(
    tmp_path: Path,
) -> None:
    unset = load_config(_write(tmp_path, _bad(("timeout_s = 120\n", ""))))
    assert unset.endpoints[0].timeout_s == 600.0
    assert unset.to_mapping()["endpoints"][0]["timeout_s"] == 600.0
    assert load_config(_write(tmp_path, GOOD)).endpoints[0].timeout_s == 120.0


ANTHROPIC = """\
run_dir = "runs/demo"
cache_dir = "cache"
[task]
TASK
[[endpoints]]
name = "claude"
provider = "anthropic"
model = "claude-sonnet-4-5"
api_key_env = "ANTHROPIC_API_KEY"
max_tokens = 4096
ENDPOINT
"""


def _run_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> str:
    """``cotaudit run`` on ``text``: exit 2, nothing written; the message."""
    path = _write(tmp_path, text)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["run", str(path), "--quiet", "--no-preflight"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and str(path) in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    return err


@pytest.mark.parametrize("field", ["top_k", "top_p", "temperature"])
def test_thinking_refuses_sampling_fields_in_extra_body(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str
) -> None:
    # Preflight's ping goes without thinking, so it passed and every request was a 400.
    text = ANTHROPIC.replace("TASK", 'kind = "prompts"\npath = "prompts.jsonl"').replace(
        "ENDPOINT", f"thinking_budget = 2048\nextra_body = {{ {field} = 1 }}"
    )
    err = _run_refused(tmp_path, capsys, text)
    assert f"endpoints[0].extra_body.{field}" in err and "thinking" in err
    # Without thinking, Anthropic takes top_k.
    plain = ANTHROPIC.replace("TASK", 'kind = "prompts"\npath = "prompts.jsonl"').replace(
        "ENDPOINT", "extra_body = { top_k = 20 }"
    )
    assert load_config(_write(tmp_path, plain)).endpoints[0].extra_body == {"top_k": 20}


def test_the_extra_body_example_shown_with_thinking_has_no_sampling_field(
    tmp_path: Path,
) -> None:
    text = ANTHROPIC.replace("TASK", 'kind = "prompts"\npath = "prompts.jsonl"')
    with pytest.raises(UsageError) as info:
        load_config(_write(tmp_path, text.replace("ENDPOINT", 'extra_body = "top_k=20"')))
    assert "top_k = 20" in str(info.value)  # the vLLM example, without thinking
    thinking = text.replace("ENDPOINT", 'thinking_budget = 2048\nextra_body = "top_k=20"')
    with pytest.raises(UsageError) as info:
        load_config(_write(tmp_path, thinking))
    assert "extra_body" in str(info.value) and "top_k = 20" not in str(info.value)


@pytest.mark.parametrize(
    ("task", "where"),
    [
        ('kind = "prontoqa"\nsource = "generate"\nn = 2\nsample_temperature = 1.2', "[task]"),
        ('kind = "procedural"\nper_stratum = 1\ntemperature = 1.5', "[task]"),
        ('kind = "prompts"\npath = "prompts.jsonl"\ntemperature = 1.1', "[task]"),
        ('kind = "prompts"\npath = "hot.jsonl"', "hot.jsonl:2: temperature"),
    ],
)
def test_an_anthropic_endpoint_refuses_a_task_temperature_above_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], task: str, where: str
) -> None:
    (tmp_path / "hot.jsonl").write_text(
        '{"id": "a", "prompt": "hi"}\n{"id": "b", "prompt": "ho", "temperature": 1.4}\n'
    )
    text = ANTHROPIC.replace("TASK", task).replace("ENDPOINT", "")
    err = _run_refused(tmp_path, capsys, text)
    assert where in err and 'endpoints[0].provider = "anthropic"' in err, err
    assert "omit_sampling = true" in err
    # Not sent, nothing refused: with omit_sampling or thinking, or to OpenAI (0 to 2).
    for endpoint in ("omit_sampling = true", "thinking_budget = 2048"):
        quiet = ANTHROPIC.replace("TASK", task).replace("ENDPOINT", endpoint)
        load_config(_write(tmp_path, quiet)).build_task()
    openai = text.replace('provider = "anthropic"', 'provider = "openai"')
    load_config(_write(tmp_path, openai)).build_task()


def test_a_task_without_samples_sends_no_sample_temperature(tmp_path: Path) -> None:
    task = 'kind = "prontoqa"\nsource = "generate"\nn = 2\nsamples = 0\nsample_temperature = 1.5'
    text = ANTHROPIC.replace("TASK", task).replace("ENDPOINT", "")
    load_config(_write(tmp_path, text)).build_task()


@pytest.mark.parametrize("value", ['"auto"', "true", "false"])
def test_inline_think_takes_auto_true_or_false(tmp_path: Path, value: str) -> None:
    ep = load_config(_write(tmp_path, GOOD + f"inline_think = {value}\n")).endpoints[0]
    assert ep.inline_think == {"true": True, "false": False}.get(value, "auto")


def test_inline_think_refuses_anything_else(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as info:
        load_config(_write(tmp_path, GOOD + 'inline_think = "yes"\n'))
    assert "endpoints[0].inline_think" in str(info.value) and '"yes"' in str(info.value)
