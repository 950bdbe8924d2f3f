"""The ``custom_id`` of a request in a batch: its request id, where the API accepts it.

OpenAI takes any string unique within the file, so the request id itself is sent. Anthropic
takes 1-64 characters of ``[a-zA-Z0-9_-]``; request ids have ``/`` and may be longer, so they
are mapped deterministically: an id that already fits is kept, any other becomes ``r`` and
the first 40 hex digits of its SHA-256 (160 bits: no two ids of a run share one in practice,
and a shared one would be caught when the batch is built). The mapping of every item is kept
in the batch's state file (:mod:`runner.batch.store`), so results are read back without
recomputing it, whatever a later version might map.
"""

from __future__ import annotations

import hashlib
import re

ANTHROPIC_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
HASHED_HEX_DIGITS = 40


def custom_id_for(request_id: str, api: str) -> str:
    """The id ``api`` (``"openai"`` or ``"anthropic"``) is sent for ``request_id``."""
    if api == "openai" or ANTHROPIC_CUSTOM_ID.match(request_id):
        return request_id
    digest = hashlib.sha256(request_id.encode("utf-8")).hexdigest()
    return "r" + digest[:HASHED_HEX_DIGITS]
