"""Hostile configs at ``load_config``: a typo is named with its nearest key, a key pasted into
the config is never repeated, and a syntax error is placed at FILE:LINE:COLUMN."""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest

from cotaudit.errors import UsageError
from runner.config import config_from_mapping, load_config

BASE = """\
run_dir = "run"
cache_dir = "cache"
[task]
kind = "prompts"
path = "prompts.jsonl"
[[endpoints]]
name = "local"
provider = "openai"
model = "m"
base_url = "http://127.0.0.1:9/v1"
"""

# A key of the shape that passes a bare identifier check (letters, digits, '_'): Groq's.
PASTED_KEY = "gsk_Q7fLm2VxR9tB4nK8wZ3pH6yJ1cD5"


def _load_error(tmp_path: Path, text: str | bytes) -> UsageError:
    (tmp_path / "prompts.jsonl").write_text('{"id": "a", "prompt": "hi"}\n')
    path = tmp_path / "sweep.toml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    with pytest.raises(UsageError) as info:
        load_config(path)
    return info.value


@pytest.mark.parametrize(
    ("text", "where", "fix"),
    [
        (BASE + "max_concurency = 4\n", "endpoints[0].max_concurency", "'max_concurrency'"),
        (BASE + "[retry]\nmax_atempts = 3\n", "[retry].max_atempts", "'max_attempts'"),
        (BASE.replace("run_dir", "rundir"), "sweep.toml: rundir", "'run_dir'"),
        # An endpoint's key above the first [[endpoints]] table lands at the top level.
        ("max_concurrency = 4\n" + BASE, "sweep.toml: max_concurrency", "each [[endpoints]]"),
    ],
)
def test_an_unknown_key_is_placed_and_its_nearest_accepted_key_named(
    tmp_path: Path, text: str, where: str, fix: str
) -> None:
    error = _load_error(tmp_path, text)
    assert error.where is not None and error.where.endswith(where), error.where
    assert error.fix is not None and fix in error.fix, error.fix


def _task(table: str) -> str:
    return BASE.replace('kind = "prompts"\npath = "prompts.jsonl"\n', table)


@pytest.mark.parametrize(
    ("text", "what", "fix"),
    [
        (
            _task('kind = "prompts"\npath = "prompts.jsonl"\nsystm = "Be brief."\n'),
            "unknown key 'systm'",
            "Did you mean 'system'? Accepted keys for kind = \"prompts\"",
        ),
        (
            _task('kind = "procedural"\nper_strata = 2\n'),
            "unknown key 'per_strata'",
            "Did you mean 'per_stratum'? Accepted keys for kind = \"procedural\"",
        ),
        (
            _task('kind = "prontoqa"\nsource = "generate"\nsampels = 2\n'),
            "unknown key 'sampels'",
            "Did you mean 'samples'?",
        ),
        (  # a key of the other sources is named as such, not "corrected" to a near spelling
            _task('kind = "prontoqa"\nsource = "generate"\npath = "x.json"\n'),
            "'path' applies to the file sources (paper50, logiclm, native), not to source = "
            '"generate"',
            'Accepted keys for source = "generate"',
        ),
        (_task('kind = "prontqa"\n'), 'unknown task kind "prontqa"', "Did you mean 'prontoqa'?"),
        (_task("kind = 3\n"), "the task kind must be a string, not 3", "Use one of:"),
    ],
)
def test_a_task_table_mistake_is_named_with_what_was_meant(
    tmp_path: Path, text: str, what: str, fix: str
) -> None:
    (tmp_path / "sweep.toml").write_text(text)
    with pytest.raises(UsageError) as info:
        load_config(tmp_path / "sweep.toml").build_task()
    error = info.value
    assert what in error.what, error.what
    assert error.fix is not None and fix in error.fix, error.fix


@pytest.mark.parametrize(
    "line",
    [
        f'api_key_env = "{PASTED_KEY}"',  # the key where its variable's name belongs
        'api_key_env = "sk-proj-abc123DEF456"',
        'api_key_env = "0123456789abcdef0123456789abcdef"',  # Azure's hex keys
        'api_key_env = "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY"',  # Mistral's: 32 of mixed case
        f'api_key = "{PASTED_KEY}"',
        f'apikey = "{PASTED_KEY}"',
    ],
)
def test_a_key_written_in_the_config_is_refused_and_never_repeated(
    tmp_path: Path, line: str
) -> None:
    error = _load_error(tmp_path, BASE + line + "\n")
    secret = line.split('"')[1]
    assert secret not in str(error) and secret[:8] not in str(error)
    assert error.fix is not None and 'api_key_env = "OPENAI_API_KEY"' in error.fix


@pytest.mark.parametrize(
    ("line", "where"),
    [
        (f'extra_body = {{ api_key = "{PASTED_KEY}" }}', "endpoints[0].extra_body.api_key"),
        (
            f'extra_body = {{ provider = {{ auth = ["x", "{PASTED_KEY}"] }} }}',
            "endpoints[0].extra_body.provider.auth[1]",
        ),
        (f'headers = {{ "Helicone-Auth" = "Bearer {PASTED_KEY}" }}', "headers.Helicone-Auth"),
        (f'headers = {{ "X-Portkey-Api-Key" = "{PASTED_KEY}" }}', "headers.X-Portkey-Api-Key"),
        ('headers = { "X-Gateway" = "Basic dXNlcjpwYXNzd29yZA==" }', "headers.X-Gateway"),
    ],
)
def test_a_key_pasted_into_headers_or_extra_body_is_refused_and_never_repeated(
    tmp_path: Path, line: str, where: str
) -> None:
    # They are sent as written and copied into the run's manifest.json: a key there would be
    # in every copy of the run directory.
    error = _load_error(tmp_path, BASE + line + "\n")
    secret = line.split('"')[-2].split()[-1]
    assert where in error.where and "looks like an API key" in error.what, str(error)
    assert secret not in str(error) and secret[:8] not in str(error)
    assert error.fix is not None and "api_key_env" in error.fix
    assert "headers_env" in error.fix  # a gateway's key has its way in too


@pytest.mark.parametrize(
    ("line", "what"),
    [
        ('headers_env = { "Authorization" = "GW_KEY" }', "the endpoint's own credential"),
        ('headers_env = { "x-api-key" = "GW_KEY" }', "the endpoint's own credential"),
        (f'headers_env = {{ "Helicone-Auth" = "{PASTED_KEY}" }}', "looks like a key"),
        ('headers_env = { "Helicone-Auth" = "Bearer abc" }', "looks like a key"),
        ('headers_env = { "Helicone-Auth" = "my key" }', "not an environment variable name"),
        ('headers_env = { "Bad: name" = "GW_KEY" }', "is not a header name"),
        ('headers_env = { "X-Auth" = 3 }', "must be a table of environment variable names"),
        (
            'headers = { "X-Auth" = "plain" }\nheaders_env = { "x-auth" = "GW_KEY" }',
            "in both headers and headers_env",
        ),
    ],
)
def test_headers_env_takes_header_names_and_variable_names_only(
    tmp_path: Path, line: str, what: str
) -> None:
    error = _load_error(tmp_path, BASE + line + "\n")
    assert "headers_env" in error.where and what in error.what, str(error)
    assert PASTED_KEY not in str(error) and "Bearer abc" not in str(error)


def test_headers_env_names_the_variable_and_the_manifest_keeps_the_name(tmp_path: Path) -> None:
    (tmp_path / "prompts.jsonl").write_text('{"id": "a", "prompt": "hi"}\n')
    path = tmp_path / "sweep.toml"
    path.write_text(BASE + 'headers_env = { "Helicone-Auth" = "HELICONE_AUTH" }\n')
    endpoint = load_config(path).endpoints[0]
    assert endpoint.headers_env == (("Helicone-Auth", "HELICONE_AUTH"),)
    assert endpoint.to_mapping()["headers_env"] == {"Helicone-Auth": "HELICONE_AUTH"}


def test_headers_and_extra_body_without_a_key_still_load(tmp_path: Path) -> None:
    (tmp_path / "prompts.jsonl").write_text('{"id": "a", "prompt": "hi"}\n')
    path = tmp_path / "sweep.toml"
    path.write_text(
        BASE
        + 'headers = { "OpenAI-Organization" = "org-Zq8vX2mN4kR7tY1wP5sL9dF3", '
        + '"X-Revision" = "9c4ee0af17070d48a817d4b176dd0ad48f7b718f" }\n'
        + "extra_body = { top_k = 20, chat_template_kwargs = { enable_thinking = false }, "
        + 'note = "sk-short" }\n'
    )
    endpoint = load_config(path).endpoints[0]
    assert dict(endpoint.headers)["X-Revision"].startswith("9c4e")
    assert endpoint.to_mapping()["extra_body"]["top_k"] == 20


def test_variable_names_of_either_case_are_still_names(tmp_path: Path) -> None:
    (tmp_path / "prompts.jsonl").write_text('{"id": "a", "prompt": "hi"}\n')
    for name in (
        "OPENAI_API_KEY",
        "my_groq_key",
        "hf_token",
        "AZURE_OPENAI_KEY_2",
        "Key",
        "AzureOpenAIKeyEastUS2",
    ):
        path = tmp_path / "sweep.toml"
        path.write_text(BASE + f'api_key_env = "{name}"\n')
        assert load_config(path).endpoints[0].api_key_env == name


@pytest.mark.parametrize(
    ("text", "where", "what"),
    [
        (BASE + "max_tokens = = 3\n", "sweep.toml:11:14", "not valid TOML: invalid value"),
        (BASE.replace("[task]", "[task"), "sweep.toml:3:6", "expected ']'"),
        (b'run_dir = "r\xffn"\n', "sweep.toml:1:13", "not UTF-8 text (byte 0xff)"),
        (codecs.BOM_UTF8 + b'x = "\xc3\xa9\xff"\n', "sweep.toml:1:7", "not UTF-8"),  # characters
    ],
)
def test_a_syntax_error_is_placed_at_file_line_and_column(
    tmp_path: Path, text: str | bytes, where: str, what: str
) -> None:
    error = _load_error(tmp_path, text)
    assert error.where is not None and error.where.endswith(where), error.where
    assert what in error.what, error.what
    assert "(at line" not in str(error)


def test_a_byte_order_mark_is_no_syntax_error(tmp_path: Path) -> None:
    (tmp_path / "prompts.jsonl").write_text('{"id": "a", "prompt": "hi"}\n')
    path = tmp_path / "sweep.toml"
    path.write_bytes(codecs.BOM_UTF8 + BASE.encode())
    assert load_config(path).endpoints[0].name == "local"


@pytest.mark.parametrize("where", ["top", "endpoint", "task"])
def test_a_mapping_with_a_key_that_is_not_a_string_is_refused_naming_it(
    tmp_path: Path, where: str
) -> None:
    # TOML gives string keys only; a config made in Python (cotaudit.load_config) may not.
    endpoint: dict[object, object] = {"name": "a", "provider": "local", "model": "m"}
    task: dict[object, object] = {"kind": "prompts", "path": "p.jsonl"}
    mapping: dict[object, object] = {"run_dir": "r", "task": task, "endpoints": [endpoint]}
    {"top": mapping, "endpoint": endpoint, "task": task}[where][7] = "x"
    (tmp_path / "p.jsonl").write_text('{"id": "a", "prompt": "hi"}\n')
    with pytest.raises(UsageError, match="unknown key 7"):
        config_from_mapping(mapping, config_dir=tmp_path).build_task()  # type: ignore[arg-type]
