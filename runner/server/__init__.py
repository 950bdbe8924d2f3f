"""The local model server: OpenAI and Anthropic wire protocols over loopback, simulated models."""
