"""Sending an endpoint's requests through its provider's batch API (``mode = "batch"``).

See docs/engine.md, "Batch mode": :mod:`runner.batch.custom_ids` maps request ids to the
ids a batch accepts, :mod:`runner.batch.store` keeps each batch's state in the run
directory, :mod:`runner.batch.apis` speaks OpenAI Batch and Anthropic Message Batches, and
:mod:`runner.batch.runner` drives them for the engine.
"""
