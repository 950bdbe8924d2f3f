"""Replay: recorded outputs served by exact prompt, from a pack or a results.jsonl."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from cotaudit.errors import UsageError
from runner.server import replay
from runner.server.lifecycle import ServerThread
from runner.server.models import UnknownPrompt, load_builtin_models, resolve_model
from runner.server.replay import ReplayModel, configure
from runner.server.settings import ServerConfig
from tests.runner.server.helpers import openai_body

PACK = Path(__file__).resolve().parents[3] / ".." / "shared" / "data" / "grounding-audit-gpt4o"
CONDITIONS = {"semantic": "consistent", "local_semantic": "local", "surface": "surface"}


@pytest.fixture(autouse=True)
def _no_replay_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts and ends with no configured sources and no environment fallback."""
    monkeypatch.delenv(replay.ENV_VAR, raising=False)
    configure([])
    yield
    configure([])


def _write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(value))


def _pack_output(prompt: str, text: str, probe_type: str = "original") -> dict[str, Any]:
    return {
        "prompt": prompt,
        "raw_response": text,
        "model": "modelx-2024",
        "temperature": 0,
        "probe_type": probe_type,
        "usage": {"prompt_tokens": 11, "completion_tokens": 7},
    }


@pytest.fixture
def pack(tmp_path: Path) -> Path:
    root = tmp_path / "pack"
    problem = root / "evidence" / "modelx" / "p001"
    _write_json(problem / "original_cot.json", _pack_output("PROMPT-O", "answer O"))
    # consistent and local probes with the same prompt, answered differently (as in the pack)
    _write_json(
        problem / "probes" / "semantic_P1.json", _pack_output("PROMPT-1", "sem 1", "semantic")
    )
    _write_json(
        problem / "probes" / "local_P1.json", _pack_output("PROMPT-1", "loc 1", "local_semantic")
    )
    _write_json(problem / "probes" / "surface_P1.json", _pack_output("PROMPT-S", "sur", "surface"))
    return root


def _response(
    prompt: str, text: str | None, *, t: float = 0.0, sample: int = 0, error: Any = None
) -> bytes:
    record = {
        "kind": "response",
        "schema": 1,
        "condition": "sample" if t else "original",
        "sample_index": sample,
        "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": prompt}],
        "params": {"temperature": t},
        "model": {"provider": "local", "model": "faithful", "host": "127.0.0.1:1"},
        "text": text,
        "finish_reason": "stop",
        "usage": {"input_tokens": 5, "output_tokens": 3},
        "error": error,
    }
    return orjson.dumps(record)


@pytest.fixture
def results(tmp_path: Path) -> Path:
    path = tmp_path / "run" / "results.jsonl"
    path.parent.mkdir(parents=True)
    lines = [
        orjson.dumps({"kind": "problem", "schema": 1, "problem_id": "p1"}),
        _response("PROMPT-R", "original r"),
        _response("PROMPT-R", "sample 0", t=0.7, sample=0),
        _response("PROMPT-R", "sample 1", t=0.7, sample=1),
        _response("PROMPT-E", None, error={"kind": "http", "status": 500}),
        b'{"kind": "response", "tex',  # torn by a crash mid-write
    ]
    path.write_bytes(b"\n".join(lines))
    return path


def _ask(model: ReplayModel, prompt: str, **params: Any) -> str:
    return model.complete([{"role": "user", "content": prompt}], {"temperature": 0, **params}).text


def test_pack_outputs_are_served_by_exact_prompt(pack: Path) -> None:
    configure([pack])
    model = ReplayModel("replay")
    done = model.complete([{"role": "user", "content": "PROMPT-O"}], {"temperature": 0})
    assert (done.text, done.input_tokens, done.output_tokens) == ("answer O", 11, 7)
    assert _ask(model, "PROMPT-S") == "sur"
    with pytest.raises(UnknownPrompt, match="no recorded output for the prompt beginning 'PROMPT-"):
        _ask(model, "PROMPT-O ")  # not the exact text


def test_a_condition_hint_picks_between_identical_probe_prompts(pack: Path) -> None:
    configure([pack])
    model = ReplayModel("replay")
    assert _ask(model, "PROMPT-1", condition="consistent") == "sem 1"
    assert _ask(model, "PROMPT-1", condition="local") == "loc 1"
    assert _ask(model, "PROMPT-1") in {"sem 1", "loc 1"}


def test_results_jsonl_is_a_source_with_samples_by_replicate(results: Path) -> None:
    configure([results.parent])  # a run directory works as well as the file
    model = ReplayModel("replay")
    assert _ask(model, "PROMPT-R") == "original r"
    assert _ask(model, "PROMPT-R", temperature=0.7) == "sample 0"
    assert _ask(model, "PROMPT-R", temperature=0.7, replicate=1) == "sample 1"
    assert _ask(model, "PROMPT-R", temperature=0.7, sample_index=1) == "sample 1"
    with pytest.raises(UnknownPrompt, match=r"no recorded sample 4 .*recorded: \[0, 1\]"):
        _ask(model, "PROMPT-R", temperature=0.7, replicate=4)
    with pytest.raises(UnknownPrompt, match="no recorded output"):
        _ask(model, "PROMPT-E")  # a failed request is no recording


def test_a_sample_is_not_answered_from_a_temperature_zero_output(pack: Path) -> None:
    configure([pack])
    with pytest.raises(UnknownPrompt, match=r"recorded at temperature \[0.0\], not at 0.7"):
        _ask(ReplayModel("replay"), "PROMPT-O", temperature=0.7)


def test_models_are_told_apart(pack: Path, results: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.jsonl"
    other.write_bytes(_response("PROMPT-O", "faithful O"))
    configure([pack, results, other])
    with pytest.raises(UnknownPrompt, match=r"several models \(faithful, modelx\)"):
        _ask(ReplayModel("replay"), "PROMPT-O")
    assert _ask(ReplayModel("replay:model=modelx", "modelx"), "PROMPT-O") == "answer O"
    assert _ask(ReplayModel("r", "modelx-2024"), "PROMPT-O") == "answer O"  # the recorded id
    assert _ask(ReplayModel("r", "faithful"), "PROMPT-O") == "faithful O"
    with pytest.raises(UnknownPrompt, match="not for model 'gpt-9'"):
        _ask(ReplayModel("r", "gpt-9"), "PROMPT-O")


def test_without_sources_the_answer_says_how_to_give_them() -> None:
    with pytest.raises(UnknownPrompt, match="COTAUDIT_REPLAY"):
        _ask(ReplayModel("replay"), "PROMPT-O")


def test_environment_variable_is_the_fallback(
    pack: Path, results: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(replay.ENV_VAR, f"{pack}:{results}")
    model = ReplayModel("replay")
    assert _ask(model, "PROMPT-S") == "sur"
    assert _ask(model, "PROMPT-R") == "original r"


def test_bad_sources_name_the_path_and_the_problem(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        configure([tmp_path / "missing"])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UsageError, match="no recordings found") as info:
        configure([empty])  # refused when the server starts, not at its first request
    assert str(empty) in str(info.value)
    bad = tmp_path / "bad" / "m" / "p001" / "original_cot.json"
    bad.parent.mkdir(parents=True)
    bad.write_text('{"prompt": "x"}')
    configure([tmp_path / "bad"])
    with pytest.raises(UsageError, match="'raw_response' is missing"):
        _ask(ReplayModel("replay"), "x")
    torn_inside = tmp_path / "torn.jsonl"
    torn_inside.write_bytes(b'{"kind": "problem"}\n{"kind": "resp\n' + _response("P", "t"))
    configure([torn_inside])
    with pytest.raises(UsageError, match=r"torn\.jsonl:2: line is not valid JSON"):
        _ask(ReplayModel("replay"), "P")


@pytest.mark.parametrize(
    ("usage", "named"),
    [({"prompt_tokens": "11"}, "usage.prompt_tokens"), ([11, 7], "usage")],
)
def test_a_pack_output_whose_token_counts_are_not_counts_is_refused_naming_them(
    tmp_path: Path, usage: object, named: str
) -> None:
    # As import-evidence refuses it: replayed, a string count reached the client as usage.
    path = tmp_path / "pack" / "evidence" / "m" / "p001" / "original_cot.json"
    _write_json(path, {**_pack_output("P", "answer"), "usage": usage})
    configure([tmp_path / "pack"])
    with pytest.raises(UsageError, match="is not") as info:
        _ask(ReplayModel("replay"), "P")
    assert f"{path}: {named}" in str(info.value)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("sweep.toml", b'run_dir = "runs/x"\n', "not a replay source"),
        ("notes.json", b'{"id": "q1", "prompt": "hi"}', "not a replay source"),
        ("prompts.jsonl", b'{"id": "q1", "prompt": "hi"}\n', "not a results stream"),
        ("torn.jsonl", b'{"kind": "resp\n', "not a results stream"),
        ("empty.jsonl", b"\n\n", "the file is empty"),
    ],
)
def test_a_file_that_holds_no_recordings_is_refused_at_once(
    tmp_path: Path, name: str, content: bytes, message: str
) -> None:
    source = tmp_path / name
    source.write_bytes(content)
    with pytest.raises(UsageError, match=message) as info:
        configure([source])
    assert str(source) in str(info.value) and "evidence pack" in str(info.value)
    with pytest.raises(UnknownPrompt, match="has no recordings"):  # nothing was configured
        _ask(ReplayModel("replay"), "hi")


def test_the_sources_a_server_reads_pass_the_check(pack: Path, results: Path) -> None:
    output = pack / "evidence" / "modelx" / "p001" / "original_cot.json"
    for source in (pack, pack / "evidence", pack / "evidence" / "modelx", output, results):
        replay.check_source(source, where=str(source))
    replay.check_source(results.parent, where="run dir")


def test_replay_is_registered_with_its_option() -> None:
    load_builtin_models()
    model = resolve_model("replay:model=gpt-4o")
    assert isinstance(model, ReplayModel) and model.model == "gpt-4o"
    with pytest.raises(ValueError, match="replay takes 'model'"):
        resolve_model("replay:speed=2")


def test_the_server_serves_recordings_and_404s_unknown_prompts(
    pack: Path, make_server: Callable[[ServerConfig], ServerThread]
) -> None:
    server = make_server(ServerConfig(replay=(pack,)))
    url = f"{server.base_url}/chat/completions"

    def post(prompt: str) -> tuple[int, dict[str, Any]]:
        body = orjson.dumps(openai_body("replay", prompt, temperature=0))
        request = urllib.request.Request(
            url, data=body, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as resp:
                return resp.status, orjson.loads(resp.read())
        except urllib.error.HTTPError as exc:
            with exc:
                return exc.code, orjson.loads(exc.read())

    status, body = post("PROMPT-O")
    assert status == 200
    assert body["choices"][0]["message"]["content"] == "answer O"
    status, body = post("never recorded")
    assert status == 404
    assert "no recorded output" in orjson.dumps(body).decode()


def test_every_output_of_the_real_pack_is_replayed_exactly() -> None:
    evidence = PACK / "evidence" / "gpt-4o"
    if not evidence.is_dir():
        pytest.skip(f"evidence pack not found at {evidence}")
    configure([PACK])
    model = ReplayModel("replay:model=gpt-4o", "gpt-4o")
    files = sorted(evidence.glob("p*/original_cot.json")) + sorted(
        evidence.glob("p*/probes/*.json")
    )
    assert len(files) == 890
    for path in files:
        record = orjson.loads(path.read_bytes())
        condition = CONDITIONS.get(record["probe_type"], "original")
        assert _ask(model, record["prompt"], condition=condition) == record["raw_response"], path


def test_the_index_names_the_models_it_holds_with_their_other_names(
    pack: Path, results: Path
) -> None:
    configure([pack, results])
    index = replay.active_index()
    assert index is not None
    held = index.held_models()
    assert [(h.name, h.recordings, h.aliases) for h in held] == [
        ("faithful", 3, frozenset()),
        ("modelx", 4, frozenset({"modelx-2024"})),
    ]
    assert str(held[1]) == "replay:model=modelx (4 recordings; also modelx-2024)"
    assert index.answers_to("modelx-2024") and not index.answers_to("gpt-9")


def test_a_replay_model_the_sources_hold_nothing_of_is_a_404_naming_what_they_hold(
    pack: Path, make_server: Callable[[ServerConfig], ServerThread]
) -> None:
    # It was a 404 per prompt, "no recorded output for the prompt beginning ..." or "recorded,
    # but not for model 'gpt-9'", that blamed the prompt; /v1/models/... answered 200.
    server = make_server(ServerConfig(replay=(pack,)))

    def send(path: str, body: dict[str, Any] | None) -> tuple[int, dict[str, Any]]:
        data = None if body is None else orjson.dumps(body)
        request = urllib.request.Request(
            server.base_url + path, data=data, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as resp:
                return resp.status, orjson.loads(resp.read())
        except urllib.error.HTTPError as exc:
            with exc:
                return exc.code, orjson.loads(exc.read())

    held = "they hold replay:model=modelx (4 recordings; also modelx-2024)"
    for prompt in ("PROMPT-O", "never recorded"):
        status, body = send("/chat/completions", openai_body("replay:model=gpt-9", prompt))
        assert status == 404
        assert body["error"]["code"] == "model_not_found"
        assert "hold no recordings of model 'gpt-9'" in body["error"]["message"]
        assert held in body["error"]["message"]
    messages = {"max_tokens": 16, "messages": [{"role": "user", "content": "PROMPT-O"}]}
    status, body = send("/messages", {"model": "replay:model=gpt-9", **messages})
    assert (status, body["error"]["type"]) == (404, "not_found_error")
    assert held in body["error"]["message"]
    assert send("/models/replay:model=gpt-9", None)[0] == 404
    assert send("/models/replay:model=modelx-2024", None)[0] == 200
    status, body = send("/chat/completions", openai_body("replay:model=modelx-2024", "PROMPT-O"))
    assert (status, body["choices"][0]["message"]["content"]) == (200, "answer O")
