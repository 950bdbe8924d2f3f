"""The official ``openai`` and ``anthropic`` SDKs drive the local server over loopback, on
every route it serves, and each answer is validated by the SDKs' own types in pydantic's
strict mode, with no field the types do not name (but the reasoning fields that
OpenAI-compatible servers add, which OpenAI's types do not know). So the simulator cannot
drift from the protocols the SDKs speak. Needs the ``sdk`` extra (``pip install -e
'.[dev,sdk]'``); skipped with the reason where it is absent.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest

openai = pytest.importorskip("openai", reason="the 'sdk' extra (openai) is not installed")
anthropic = pytest.importorskip("anthropic", reason="the 'sdk' extra (anthropic) is not installed")
pydantic = pytest.importorskip("pydantic", reason="pydantic comes with the SDKs")

from anthropic.pagination import SyncPage as AnthropicPage  # noqa: E402
from anthropic.types import Message, MessageTokensCount, ModelInfo  # noqa: E402
from anthropic.types.messages import (  # noqa: E402
    DeletedMessageBatch,
    MessageBatch,
    MessageBatchIndividualResponse,
)
from openai.pagination import SyncCursorPage, SyncPage  # noqa: E402
from openai.types import Batch, FileDeleted, FileObject  # noqa: E402
from openai.types import Model as OpenAIModel  # noqa: E402
from openai.types.chat import ChatCompletion  # noqa: E402
from openai.types.shared import ErrorObject  # noqa: E402

from runner.server.batch_jobs import BatchSpec  # noqa: E402
from runner.server.lifecycle import ServerThread  # noqa: E402
from runner.server.settings import ServerConfig  # noqa: E402
from runner.tasks.prompts import render_prompt  # noqa: E402
from tests.runner.server.helpers import FakeClock  # noqa: E402

KEY = "sk-local-sdk"
PROMPT = render_prompt(
    ["Bempuses are bimpuses", "Alex is a bempus", "Bimpuses are not belpuses"],
    "Is Alex a belpus?",
)
MESSAGES = [{"role": "user", "content": PROMPT}]
THINKING = {"type": "enabled", "budget_tokens": 1024}
# Fields the types do not name, on purpose; nothing else may be extra:
# - what OpenAI-compatible servers add to a chat message (vLLM, DeepSeek, newer servers);
# - the envelope of OpenAI's list endpoints (the API sends it, the cursor page ignores it).
ALLOWED_EXTRAS = frozenset(
    {
        ("ChatCompletionMessage", "reasoning_content"),
        ("ChatCompletionMessage", "reasoning"),
        ("SyncCursorPage[Batch]", "object"),
        ("SyncCursorPage[Batch]", "first_id"),
        ("SyncCursorPage[Batch]", "last_id"),
    }
)


def strict(typed: Any, raw: bytes) -> Any:
    """``raw`` validated by an SDK type in pydantic's strict mode, with no unknown field."""
    value = typed.model_validate_json(raw, strict=True)
    _no_extras(value, type(value).__name__)
    return value


def _no_extras(value: Any, where: str) -> None:
    if isinstance(value, pydantic.BaseModel):
        name = type(value).__name__
        extra = set(value.model_extra or {}) - {f for n, f in ALLOWED_EXTRAS if n == name}
        assert not extra, f"{where}: fields the SDK's {name} does not name: {sorted(extra)}"
        for field in type(value).model_fields:
            _no_extras(getattr(value, field), f"{where}.{field}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _no_extras(item, f"{where}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            _no_extras(item, f"{where}.{key}")


def test_the_strict_check_catches_drift() -> None:
    good = orjson.dumps({"input_tokens": 3})
    assert strict(MessageTokensCount, good).input_tokens == 3
    with pytest.raises(AssertionError, match="does not name"):
        strict(MessageTokensCount, orjson.dumps({"input_tokens": 3, "invented": 1}))
    with pytest.raises(pydantic.ValidationError):
        strict(MessageTokensCount, orjson.dumps({"input_tokens": "3"}))  # lax mode would pass


@pytest.fixture(scope="module")
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(scope="module")
def server(clock: FakeClock) -> Iterator[ServerThread]:
    spec = BatchSpec(validating_s=1, processing_s=4, finalizing_s=1, cancelling_s=1)
    config = ServerConfig(require_api_key=KEY, clock=clock, batches=spec)
    with ServerThread(config, timeout_s=10) as thread:
        yield thread


# The clients are closed when done: an SDK client keeps its connections open, and one left to
# the garbage collector warns about its unclosed socket during whichever test runs then.
@pytest.fixture(scope="module")
def oai(server: ServerThread) -> Iterator[Any]:
    with openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=10) as client:
        yield client


@pytest.fixture(scope="module")
def claude(server: ServerThread) -> Iterator[Any]:
    with anthropic.Anthropic(
        base_url=server.root_url, api_key=KEY, max_retries=0, timeout=10
    ) as client:
        yield client


def _raw(call: Callable[..., Any], **kwargs: Any) -> bytes:
    """The body of an SDK call's HTTP answer (``with_raw_response``)."""
    response = call(**kwargs)
    content: bytes = response.http_response.read()  # read() too for streamed answers
    assert response.http_response.status_code == 200, content
    return content


# OpenAI ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "extra", "field"),
    [
        ("faithful", {"temperature": 0.0, "max_tokens": 300, "seed": 1}, None),
        ("thinker", {"max_completion_tokens": 800, "reasoning_effort": "low"}, "reasoning_content"),
        ("thinker:form=reasoning", {"max_completion_tokens": 800}, "reasoning"),
        ("thinker:form=hidden,strict_params=true", {"max_completion_tokens": 800}, None),
        ("thinker:form=inline", {}, None),
    ],
)
def test_chat_completions_plain_and_reasoning(
    oai: Any, model: str, extra: dict[str, Any], field: str | None
) -> None:
    raw = _raw(
        oai.chat.completions.with_raw_response.create, model=model, messages=MESSAGES, **extra
    )
    completion = strict(ChatCompletion, raw)
    message = completion.choices[0].message
    assert message.content and completion.choices[0].finish_reason == "stop"
    assert completion.system_fingerprint and completion.usage is not None
    trace = (message.model_extra or {}).get(field) if field else None
    if field is not None:
        assert trace and "Alex" in trace
    if model.startswith("thinker") and "inline" not in model:
        details = completion.usage.completion_tokens_details
        assert details is not None and details.reasoning_tokens and details.reasoning_tokens > 0
    # The SDK's own parsed object agrees.
    parsed = oai.chat.completions.create(model=model, messages=MESSAGES, **extra)
    assert parsed.choices[0].message.content == message.content


def test_a_reasoning_models_refusal_is_the_sdks_bad_request_error(oai: Any) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        oai.chat.completions.create(
            model="thinker:strict_params=true", messages=MESSAGES, temperature=0.5
        )
    assert info.value.status_code == 400
    assert info.value.code == "unsupported_value" and info.value.param == "temperature"
    body = info.value.response.content
    strict(ErrorObject, orjson.dumps(orjson.loads(body)["error"]))


def test_a_wrong_key_is_the_sdks_authentication_error(server: ServerThread) -> None:
    with openai.OpenAI(base_url=server.base_url, api_key="sk-wrong", max_retries=0) as wrong:
        with pytest.raises(openai.AuthenticationError):
            wrong.models.list()
        with pytest.raises(openai.AuthenticationError):
            wrong.batches.list()
    with anthropic.Anthropic(base_url=server.root_url, api_key="sk-wrong", max_retries=0) as bad:
        with pytest.raises(anthropic.AuthenticationError):
            bad.models.list()
        with pytest.raises(anthropic.AuthenticationError):
            bad.messages.count_tokens(model="echo", messages=MESSAGES)


def test_openai_models_list_and_retrieve(oai: Any) -> None:
    page = strict(SyncPage[OpenAIModel], _raw(oai.models.with_raw_response.list))
    assert "thinker" in [m.id for m in page.data]
    one = strict(OpenAIModel, _raw(oai.models.with_raw_response.retrieve, model="shortcut:p=0.3"))
    assert one.id == "shortcut:p=0.3"
    with pytest.raises(openai.NotFoundError):
        oai.models.retrieve("gpt-nope")


def test_openai_batch_end_to_end(oai: Any, clock: FakeClock) -> None:
    lines = [
        orjson.dumps(
            {
                "custom_id": f"req-{i}",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {
                    "model": "thinker",
                    "messages": MESSAGES,
                    "max_completion_tokens": 800,
                    **({"temperature": 7} if i == 3 else {}),
                },
            }
        )
        for i in range(6)
    ]
    upload = ("requests.jsonl", io.BytesIO(b"\n".join(lines)), "application/jsonl")
    raw = _raw(oai.files.with_raw_response.create, file=upload, purpose="batch")
    uploaded = strict(FileObject, raw)
    created = strict(
        Batch,
        _raw(
            oai.batches.with_raw_response.create,
            input_file_id=uploaded.id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
        ),
    )
    assert created.status == "validating"
    clock.advance(1.0 + 4.0 + 1.0)
    batch = strict(Batch, _raw(oai.batches.with_raw_response.retrieve, batch_id=created.id))
    assert batch.status == "completed"
    assert batch.request_counts is not None
    assert (batch.request_counts.completed, batch.request_counts.failed) == (5, 1)
    listed = strict(SyncCursorPage[Batch], _raw(oai.batches.with_raw_response.list))
    assert created.id in [b.id for b in listed.data]
    strict(FileObject, _raw(oai.files.with_raw_response.retrieve, file_id=batch.output_file_id))

    output = oai.files.content(batch.output_file_id).content.splitlines()
    assert len(output) == 5
    for line in output:
        entry = orjson.loads(line)
        assert set(entry) == {"id", "custom_id", "response", "error"} and entry["error"] is None
        assert set(entry["response"]) == {"status_code", "request_id", "body"}
        strict(ChatCompletion, orjson.dumps(entry["response"]["body"]))
    (error_line,) = oai.files.content(batch.error_file_id).content.splitlines()
    entry = orjson.loads(error_line)
    assert entry["custom_id"] == "req-3" and entry["response"]["status_code"] == 400
    strict(ErrorObject, orjson.dumps(entry["response"]["body"]["error"]))

    second = oai.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    cancelled = strict(Batch, _raw(oai.batches.with_raw_response.cancel, batch_id=second.id))
    assert cancelled.status == "cancelling"
    gone = strict(FileDeleted, _raw(oai.files.with_raw_response.delete, file_id=uploaded.id))
    assert gone.deleted is True


# Anthropic -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "extra", "blocks"),
    [
        # The SDK names no temperature (docs/servers.md); older API versions take it.
        ("faithful", {"system": "Answer in steps.", "extra_body": {"temperature": 0.0}}, ["text"]),
        ("thinker", {"thinking": THINKING}, ["thinking", "text"]),
        ("thinker:form=hidden", {"thinking": THINKING}, ["redacted_thinking", "text"]),
        ("thinker", {"thinking": {"type": "disabled"}}, ["text"]),
    ],
)
def test_messages_plain_and_thinking(
    claude: Any, model: str, extra: dict[str, Any], blocks: list[str]
) -> None:
    raw = _raw(
        claude.messages.with_raw_response.create,
        model=model,
        max_tokens=2048,
        messages=MESSAGES,
        **extra,
    )
    message = strict(Message, raw)
    assert [b.type for b in message.content] == blocks
    assert message.stop_reason == "end_turn"
    if "thinking" in blocks:
        assert message.content[0].signature
    parsed = claude.messages.create(model=model, max_tokens=2048, messages=MESSAGES, **extra)
    assert parsed.content[-1].text == message.content[-1].text


def test_anthropic_role_errors_are_the_sdks_bad_request_error(claude: Any) -> None:
    with pytest.raises(anthropic.BadRequestError) as info:
        claude.messages.create(
            model="echo",
            max_tokens=10,
            messages=[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
        )
    assert "roles must alternate" in str(info.value)


def test_anthropic_models_list_retrieve_and_count_tokens(claude: Any) -> None:
    page = strict(AnthropicPage[ModelInfo], _raw(claude.models.with_raw_response.list, limit=4))
    assert len(page.data) == 4 and page.has_more is True
    every = [m.id for m in claude.models.list(limit=3)]  # the SDK pages with after_id
    assert "thinker" in every and len(every) == len(set(every))
    one = strict(ModelInfo, _raw(claude.models.with_raw_response.retrieve, model_id="thinker"))
    assert one.id == "thinker"
    counted = strict(
        MessageTokensCount,
        _raw(
            claude.messages.with_raw_response.count_tokens,
            model="thinker",
            messages=MESSAGES,
            system="Answer in steps.",
        ),
    )
    message = claude.messages.create(
        model="thinker", max_tokens=100, messages=MESSAGES, system="Answer in steps."
    )
    assert counted.input_tokens == message.usage.input_tokens


def test_anthropic_message_batch_end_to_end(claude: Any, clock: FakeClock) -> None:
    requests = [
        {
            "custom_id": f"req_{i}",
            "params": {
                "model": "thinker" if i != 2 else "claude-nope",
                "max_tokens": 2048,
                "messages": MESSAGES,
                "thinking": THINKING,
            },
        }
        for i in range(5)
    ]
    created = strict(
        MessageBatch, _raw(claude.messages.batches.with_raw_response.create, requests=requests)
    )
    assert created.processing_status == "in_progress"
    clock.advance(4.0)
    batch = strict(
        MessageBatch,
        _raw(claude.messages.batches.with_raw_response.retrieve, message_batch_id=created.id),
    )
    assert batch.processing_status == "ended" and batch.results_url
    assert (batch.request_counts.succeeded, batch.request_counts.errored) == (4, 1)
    listed = strict(
        AnthropicPage[MessageBatch], _raw(claude.messages.batches.with_raw_response.list)
    )
    assert created.id in [b.id for b in listed.data]

    results = list(claude.messages.batches.results(created.id))  # the SDK's JSONL stream
    assert sorted(r.custom_id for r in results) == sorted(r["custom_id"] for r in requests)
    raw = _raw(claude.messages.batches.with_raw_response.results, message_batch_id=created.id)
    for line in raw.splitlines():
        result = strict(MessageBatchIndividualResponse, line)
        if result.custom_id == "req_2":
            assert result.result.type == "errored"
            assert result.result.error.error.type == "not_found_error"
        else:
            assert result.result.type == "succeeded"
            assert [b.type for b in result.result.message.content] == ["thinking", "text"]

    second = claude.messages.batches.create(requests=requests[:2])
    raw = _raw(claude.messages.batches.with_raw_response.cancel, message_batch_id=second.id)
    assert strict(MessageBatch, raw).processing_status == "canceling"
    clock.advance(1.0)
    deleted = strict(
        DeletedMessageBatch,
        _raw(claude.messages.batches.with_raw_response.delete, message_batch_id=second.id),
    )
    assert deleted.id == second.id
