"""make_spec puts every value in the field of its name, and its keys are the reference ones."""

from __future__ import annotations

from runner.request_spec import EndpointIdentity, RequestSpec, make_spec


def test_make_spec_puts_each_value_in_its_named_field() -> None:
    endpoint = EndpointIdentity(
        "ep-name", "openai", "model-x", "host:1", "http://host:1/v1", {"max_tokens": 9}
    )
    messages = [{"role": "user", "content": "Q?"}]
    probe = {"substitution": {"premise": "P2"}}
    spec = make_spec(
        endpoint,
        task="task-t",
        problem_id="problem-p",
        condition="local",
        messages=messages,
        temperature=0.3,
        target_premise="P2",
        sample_index=4,
        probe=probe,
    )
    assert isinstance(spec, RequestSpec) and len(spec) == len(RequestSpec._fields)
    assert spec.request_id == "ep-name/problem-p/local/P2/4"
    assert len(spec.cache_key) == 64 and int(spec.cache_key, 16) >= 0
    assert spec.endpoint == "ep-name"
    assert spec.task == "task-t"
    assert spec.problem_id == "problem-p"
    assert spec.condition == "local"
    assert spec.target_premise == "P2"
    assert spec.sample_index == 4
    assert spec.probe is probe
    assert spec.messages == tuple(messages) and spec.messages[0] is not messages[0]
    assert spec.params == {
        "temperature": 0.3,
        "top_p": None,
        "max_tokens": 9,
        "seed": None,
        "stop": None,
    }
    assert spec.model == {"provider": "openai", "model": "model-x", "host": "host:1"}
    record = spec.to_record()
    assert [k for k in record if k not in ("kind", "schema")] == list(RequestSpec._fields)
    assert all(
        record[name] == (list(value) if name == "messages" else value)
        for name, value in spec._asdict().items()
    )
