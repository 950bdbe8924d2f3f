"""A call in a spawned child process that the calling process owns (evaluator/child_call.py).

Ctrl-C reaching the child as a terminal sends it is tested end to end on the demo's figures
(tests/integration/test_demo.py); here, what the parent gets back and when the child ends.
"""

from __future__ import annotations

import os
import time

import pytest

from evaluator.child_call import ChildCallFailed, child_call
from tests.evaluator.test_orphans import alive


def test_the_result_comes_back_and_the_child_has_ended() -> None:
    with child_call(divmod, 17, 5) as call:
        assert call.result() == (3, 2)
        assert not alive(call.pid)


def test_the_childs_error_is_raised_with_its_traceback_as_the_cause() -> None:
    with child_call(int, "not a number") as call, pytest.raises(ValueError) as raised:
        call.result()
    assert "invalid literal" in str(raised.value)
    assert "Traceback" in str(raised.value.__cause__)  # the child's, printed with the error


def test_a_child_that_ends_without_a_result_is_named() -> None:
    with child_call(os._exit, 3) as call, pytest.raises(ChildCallFailed, match="status 3"):
        call.result()


def test_leaving_the_block_early_kills_the_child_at_once() -> None:
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt), child_call(time.sleep, 600) as call:
        pid = call.pid
        assert alive(pid)
        raise KeyboardInterrupt  # as a Ctrl-C in the parent while the child works
    assert not alive(pid)  # killed and reaped before the exception went on
    assert time.monotonic() - started < 60  # not after the child's ten minutes


def _unpicklable() -> object:
    return lambda: None


def test_a_result_that_does_not_pickle_is_named() -> None:
    with child_call(_unpicklable) as call, pytest.raises(ChildCallFailed, match="could not"):
        call.result()
