"""The package imports, the CLI answers, and the record helpers hold their contracts."""

from __future__ import annotations

from cotaudit.cli import main
from runner.request_spec import EndpointIdentity, make_spec


def test_cli_without_command_prints_help_and_exits_2(capsys: object) -> None:
    assert main([]) == 2


def test_cache_key_ignores_endpoint_name_but_not_replicate() -> None:
    a = EndpointIdentity("a", "local", "faithful", "127.0.0.1:1", "local", {"max_tokens": 64})
    b = EndpointIdentity("b", "local", "faithful", "127.0.0.1:2", "local", {"max_tokens": 64})
    msgs = [{"role": "user", "content": "hi"}]
    s1 = make_spec(a, task="t", problem_id="p", condition="sample", messages=msgs, temperature=0.7)
    s2 = make_spec(b, task="t", problem_id="p", condition="sample", messages=msgs, temperature=0.7)
    s3 = make_spec(
        a,
        task="t",
        problem_id="p",
        condition="sample",
        messages=msgs,
        temperature=0.7,
        sample_index=1,
    )
    assert s1.cache_key == s2.cache_key
    assert s1.request_id != s2.request_id
    assert s1.cache_key != s3.cache_key
