"""The ``custom_id`` of a request in a batch: its request id, where the API accepts it.

OpenAI takes any string unique within the file, so the request id itself is sent. Anthropic
takes 1-64 characters of ``[a-zA-Z0-9_-]``; request ids have ``/`` and may be longer, so they
are mapped deterministically: ``r`` and the first 40 hex digits of the SHA-256 of the batch's
nonce and the request id (160 bits: no two ids of a run share one in practice, and a shared
one would be caught when the batch is built). The nonce (:func:`runner.batch.store.new_nonce`)
makes the ids of one batch unlike those of any other run's batch of the same requests: a
Message Batch carries no metadata, so a batch found at the provider after a failed create
call is told to be this run's by its results' custom ids (``docs/engine.md``, "Batch mode").
Batches written before nonces (``nonce`` None) keep the earlier mapping: an id that fits is
kept, any other is ``r`` and 40 hex digits of its SHA-256. The mapping of every item is kept
in the batch's state file (:mod:`runner.batch.store`), so results are read back without
recomputing it, whatever a later version might map.
"""

from __future__ import annotations

import hashlib
import re

ANTHROPIC_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
HASHED_HEX_DIGITS = 40


def custom_id_for(request_id: str, api: str, nonce: str | None = None) -> str:
    """The id ``api`` (``"openai"`` or ``"anthropic"``) is sent for ``request_id`` in the
    batch whose nonce is ``nonce``."""
    if api == "openai":
        return request_id
    if nonce is None:
        if ANTHROPIC_CUSTOM_ID.match(request_id):
            return request_id
        keyed = request_id
    else:
        keyed = f"{nonce}/{request_id}"
    digest = hashlib.sha256(keyed.encode("utf-8")).hexdigest()
    return "r" + digest[:HASHED_HEX_DIGITS]
