"""Batch settings the provider's batch API cannot honour are refused when the config is
loaded (exit 2, nothing written): a batch larger than the provider takes, a poll faster than
a provider's API should be asked. A server of the user's own may be polled at any pace."""

from __future__ import annotations

from pathlib import Path

import pytest

from cotaudit.cli import main
from cotaudit.constants import ANTHROPIC_BATCH_MAX_REQUESTS, OPENAI_BATCH_MAX_REQUESTS
from cotaudit.errors import UsageError
from runner.config import BATCH_MIN_POLL_S, load_config

LIMITS = [
    ("openai", OPENAI_BATCH_MAX_REQUESTS),
    ("anthropic", ANTHROPIC_BATCH_MAX_REQUESTS),
    ("local", OPENAI_BATCH_MAX_REQUESTS),  # the project's server speaks OpenAI Batch
]


def _write(tmp_path: Path, provider: str, extra: str, base_url: str | None = None) -> Path:
    (tmp_path / "prompts.jsonl").write_text('{"id": "a", "prompt": "hi"}\n', encoding="utf-8")
    url = f'base_url = "{base_url}"\n' if base_url is not None else ""
    key = 'api_key_env = "COTAUDIT_BATCH_CONFIG_TEST_KEY"\n' if provider != "local" else ""
    path = tmp_path / "sweep.toml"
    path.write_text(
        'run_dir = "run"\ncache_dir = "cache"\n'
        '[task]\nkind = "prompts"\npath = "prompts.jsonl"\n'
        f'[[endpoints]]\nname = "ep"\nprovider = "{provider}"\nmodel = "m"\n{url}{key}'
        f'mode = "batch"\n{extra}\n',
        encoding="utf-8",
    )
    return path


def _refused(tmp_path: Path, path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["run", str(path), "--quiet", "--no-preflight"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and str(path) in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    return err


@pytest.mark.parametrize(("provider", "limit"), LIMITS)
def test_a_batch_larger_than_the_provider_takes_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], provider: str, limit: int
) -> None:
    path = _write(tmp_path, provider, f"batch_max_requests = {limit + 1}")
    with pytest.raises(UsageError) as info:
        load_config(path)
    message = str(info.value)
    assert f"{path}: endpoints[0].batch_max_requests" in message
    assert f"is {limit + 1}, above {limit}" in message
    assert f"Set batch_max_requests to {limit} or less" in message
    err = _refused(tmp_path, path, capsys)
    assert "batch_max_requests" in err and str(limit) in err


@pytest.mark.parametrize(("provider", "limit"), LIMITS)
def test_the_provider_limit_itself_is_accepted(tmp_path: Path, provider: str, limit: int) -> None:
    config = load_config(_write(tmp_path, provider, f"batch_max_requests = {limit}"))
    assert config.endpoints[0].batch_max_requests == limit


@pytest.mark.parametrize(
    ("provider", "base_url"),
    [
        ("openai", None),  # api.openai.com
        ("anthropic", None),
        ("openai", "https://gateway.example.com/v1"),
    ],
)
@pytest.mark.parametrize("poll", ["0.001", "1", "9.5"])
def test_a_poll_faster_than_the_floor_is_refused_at_a_provider(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    provider: str,
    base_url: str | None,
    poll: str,
) -> None:
    path = _write(tmp_path, provider, f"batch_poll_s = {poll}", base_url)
    with pytest.raises(UsageError) as info:
        load_config(path)
    message = str(info.value)
    assert f"{path}: endpoints[0].batch_poll_s" in message
    assert f"'batch_poll_s' is {float(poll):g}, below {BATCH_MIN_POLL_S:g} s" in message
    assert f"Set batch_poll_s to {BATCH_MIN_POLL_S:g} or more" in message
    assert "batch_poll_s" in _refused(tmp_path, path, capsys)


def test_the_floor_itself_is_accepted(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, "openai", f"batch_poll_s = {BATCH_MIN_POLL_S}"))
    assert config.endpoints[0].batch_poll_s == BATCH_MIN_POLL_S


@pytest.mark.parametrize(
    ("provider", "base_url"),
    [
        ("local", None),  # the embedded server
        ("openai", "http://127.0.0.1:8000/v1"),
        ("anthropic", "https://localhost:8443/v1"),
        ("openai", "http://gpu-box.lan:8000/v1"),  # self-hosted, plain http
    ],
)
def test_a_server_of_ones_own_may_be_polled_faster(
    tmp_path: Path, provider: str, base_url: str | None
) -> None:
    config = load_config(_write(tmp_path, provider, "batch_poll_s = 0.05", base_url))
    assert config.endpoints[0].batch_poll_s == 0.05


def test_zero_is_refused_everywhere(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="batch_poll_s"):
        load_config(_write(tmp_path, "local", "batch_poll_s = 0"))


@pytest.mark.parametrize("written", ["Batch", "BATCH", "bacth"])
def test_a_misspelt_mode_is_told_the_mode_it_means(tmp_path: Path, written: str) -> None:
    """Not ``mode = "online"`` (the first choice) to one who asked for batches."""
    path = _write(tmp_path, "openai", "")
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace('mode = "batch"', f'mode = "{written}"'), encoding="utf-8")
    with pytest.raises(UsageError) as info:
        load_config(path)
    assert f"{path}: endpoints[0].mode" in str(info.value)
    assert info.value.fix == 'Did you mean mode = "batch"?'


def test_a_runs_recorded_config_is_read_back_without_the_later_limits(tmp_path: Path) -> None:
    # verify rebuilds a run's plan from the config its manifest recorded: a run made before
    # these limits existed must still verify, and neither setting changes what is planned.
    import tomllib

    from runner.config import config_from_mapping

    path = _write(
        tmp_path,
        "openai",
        f"batch_poll_s = 1\nbatch_max_requests = {OPENAI_BATCH_MAX_REQUESTS + 1}",
        "https://api.openai.com/v1",
    )
    table = tomllib.loads(path.read_text(encoding="utf-8"))
    with pytest.raises(UsageError):
        config_from_mapping(table, config_dir=tmp_path)
    config = config_from_mapping(table, config_dir=tmp_path, recorded=True)
    (endpoint,) = config.endpoints
    assert endpoint.batch_poll_s == 1.0
    assert endpoint.batch_max_requests == OPENAI_BATCH_MAX_REQUESTS + 1
