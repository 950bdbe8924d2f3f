"""Wire protocols behind one interface; ``make_provider`` picks the class for an endpoint."""

from __future__ import annotations

from runner.config import EndpointConfig
from runner.providers.anthropic import AnthropicProvider
from runner.providers.base import Provider
from runner.providers.openai import OpenAIProvider


def make_provider(endpoint: EndpointConfig, *, base_url: str | None = None) -> Provider:
    """The provider for ``endpoint``; ``local`` speaks the OpenAI protocol.

    Reads the key from the endpoint's environment variable (``UsageError`` when unset).
    """
    if endpoint.provider == "anthropic":
        return AnthropicProvider(endpoint, base_url=base_url)
    return OpenAIProvider(endpoint, base_url=base_url)
