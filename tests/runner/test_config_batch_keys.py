"""A batch-only key (``batch_poll_s``, ``batch_max_requests``) on an endpoint whose mode is not
set is refused when the config is loaded (exit 2, nothing written): its user most likely
forgot ``mode = "batch"``, and the run would send every request online. A mode written
``"online"`` keeps them (switching back), and ``batch_discount`` is no batch-only key: a dry
run prices an online endpoint at batch rates too."""

from __future__ import annotations

from pathlib import Path

import pytest

from cotaudit.cli import main
from cotaudit.errors import UsageError
from runner.config import config_from_mapping, load_config


def _write(tmp_path: Path, extra: str) -> Path:
    (tmp_path / "prompts.jsonl").write_text('{"id": "a", "prompt": "hi"}\n', encoding="utf-8")
    path = tmp_path / "sweep.toml"
    path.write_text(
        'run_dir = "run"\ncache_dir = "cache"\n'
        '[task]\nkind = "prompts"\npath = "prompts.jsonl"\n'
        '[[endpoints]]\nname = "gpt"\nprovider = "openai"\nmodel = "m"\n'
        'api_key_env = "COTAUDIT_H1_TEST_KEY"\n'
        f"{extra}\n",
        encoding="utf-8",
    )
    return path


SETTINGS = {"batch_poll_s": "batch_poll_s = 60", "batch_max_requests": "batch_max_requests = 100"}


@pytest.mark.parametrize("key", sorted(SETTINGS))
def test_a_batch_only_key_without_a_mode_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str
) -> None:
    path = _write(tmp_path, SETTINGS[key])
    with pytest.raises(UsageError) as info:
        load_config(path)
    error = info.value
    assert error.where == f"{path}: endpoints[0].{key}"
    assert f"{key!r} is set, but endpoint 'gpt' runs online" in error.what
    assert error.fix is not None
    assert 'Set mode = "batch"' in error.fix and f"remove {key}" in error.fix

    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["run", str(path), "--quiet", "--no-preflight"]) == 2
    err = capsys.readouterr().err
    assert f"{path}: endpoints[0].{key}" in err and "Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written


@pytest.mark.parametrize("mode", ["batch", "online"])
def test_a_written_mode_keeps_the_batch_keys(tmp_path: Path, mode: str) -> None:
    # "online" written out: the keys stay set for switching back, as online-only keys may
    # stay set on a batch endpoint.
    path = _write(tmp_path, f'mode = "{mode}"\n' + "\n".join(SETTINGS.values()))
    (endpoint,) = load_config(path).endpoints
    assert endpoint.mode == mode
    assert (endpoint.batch_poll_s, endpoint.batch_max_requests) == (60.0, 100)


def test_batch_discount_is_taken_on_an_online_endpoint(tmp_path: Path) -> None:
    (endpoint,) = load_config(_write(tmp_path, "batch_discount = 0.4")).endpoints
    assert not endpoint.batch and endpoint.batch_discount == 0.4


def test_an_online_endpoints_own_table_reads_back(tmp_path: Path) -> None:
    # The manifest's config writes every endpoint's batch_poll_s, and its mode with it:
    # reading it back (a rerun's check, verify) must not trip over either.
    config = load_config(_write(tmp_path, ""))
    table = config.to_mapping()
    assert table["endpoints"][0]["mode"] == "online" and "batch_poll_s" in table["endpoints"][0]
    for recorded in (False, True):
        again = config_from_mapping(table, config_dir=tmp_path, recorded=recorded)
        assert again.endpoints == config.endpoints
