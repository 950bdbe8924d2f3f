"""How one errored item of an Anthropic Message Batch is classified: the error types as the
online API's statuses, so that a permanent one is not resubmitted."""

from __future__ import annotations

from typing import Any, cast

import pytest

from runner.batch.apis import AnthropicBatchApi
from runner.providers.api_client import ApiClient
from runner.providers.base import BadRequest, PermanentError, Provider, ServerError


def _errored(kind: str) -> dict[str, Any]:
    return {
        "custom_id": "c1",
        "result": {
            "type": "errored",
            "error": {"type": "error", "error": {"type": kind, "message": "m"}},
        },
    }


@pytest.mark.parametrize(
    ("kind", "family"),
    [
        ("billing_error", BadRequest),  # resubmitting cannot pay
        ("invalid_request_error", BadRequest),
        ("timeout_error", ServerError),
        ("overloaded_error", ServerError),
        ("api_error", ServerError),
    ],
)
def test_an_errored_item_takes_the_status_of_its_error_type(kind: str, family: type) -> None:
    # The error path reads neither the provider nor the client.
    api = AnthropicBatchApi(cast(Provider, None), cast(ApiClient, None))
    item = api._item(_errored(kind))
    assert isinstance(item.error, family)
    assert isinstance(item.error, PermanentError) == (family is BadRequest)
