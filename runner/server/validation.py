"""The request checks the real APIs make, so that a client is tested against their refusals.

Both codecs call these from ``parse``, so the online routes and every batch item refuse the
same requests with the same errors. The messages are the providers' own where we know them
(docs/servers.md says which are paraphrased); the statuses, error types, ``param`` and
``code`` fields are the providers'.

- OpenAI chat completions: message roles, ``temperature`` / ``top_p`` ranges,
  ``max_completion_tokens``, ``reasoning_effort`` values, and the parameters a *reasoning
  model* refuses (``max_tokens``; ``temperature`` / ``top_p`` other than the default 1)
  when the model's :class:`ParamRules` say it is one.
- Both: what a model's :class:`ParamRules` say it lacks: a ``max_tokens`` (or
  ``max_completion_tokens``) above its output limit, and reasoning settings
  (``reasoning_effort``; Anthropic ``thinking``) on a model that does not reason. The
  ``echo`` model takes these as options (``echo:max_output=4096,reasoning=false``), a
  stand-in for the providers' non-reasoning models.
- Anthropic Messages: roles (``user`` / ``assistant`` alternating, the first ``user``; no
  ``system`` role), non-empty content, a final assistant prefill without trailing
  whitespace, ``temperature`` / ``top_p`` ranges, and extended thinking
  (``thinking: {"type": "enabled", "budget_tokens": N}``: N >= 1024 and below
  ``max_tokens``, no modified ``temperature`` / ``top_k``, ``top_p`` unset or >= 0.95, no
  prefill).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from runner.server.models import parse_model_name
from runner.server.protocol import BadRequest

OPENAI_ROLES = ("system", "assistant", "user", "function", "tool", "developer")
# The values the official SDK's ``ReasoningEffort`` type lists (PROVIDERS.md names four).
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
ANTHROPIC_ROLES = ("user", "assistant")
# The SDK's ThinkingConfigParam types; "adaptive" and "between_tools" leave it to the model.
THINKING_TYPES = ("enabled", "disabled", "adaptive", "between_tools")
THINKING_DISPLAYS = ("summarized", "omitted")
MIN_THINKING_BUDGET = 1024
THINKING_MIN_TOP_P = 0.95
_THINKING_DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"


@dataclass(frozen=True, slots=True)
class ParamRules:
    """What a model refuses beyond what its protocol refuses.

    ``reasoning_params``: the model follows OpenAI's reasoning-model rules: ``max_tokens`` is
    refused (``max_completion_tokens`` instead) and so is a ``temperature`` or ``top_p``
    other than the default 1. ``max_output_tokens``: the model's output limit (None: none).
    ``reasoning``: False for a model that does not reason, which refuses reasoning settings.
    """

    reasoning_params: bool = False
    max_output_tokens: int | None = None
    reasoning: bool = True


NO_RULES = ParamRules()
# base model name -> rules of a full model string (options included); ValueError: bad options
ParamRulesFactory = Callable[[str, Mapping[str, str]], ParamRules]
_RULES: dict[str, ParamRulesFactory] = {}


def register_param_rules(base_name: str, rules: ParamRulesFactory) -> None:
    """Declare the parameter rules of the models whose name starts with ``base_name``."""
    _RULES[base_name] = rules
    param_rules_for.cache_clear()


@lru_cache(maxsize=1024)
def param_rules_for(model: str) -> ParamRules:
    """The rules of a model string; none for models without rules or with bad options (the
    server's model resolution answers those with a 400 of its own)."""
    base, options = parse_model_name(model)
    factory = _RULES.get(base)
    if factory is None:
        return NO_RULES
    try:
        return factory(model, options)
    except ValueError:
        return NO_RULES


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# OpenAI --------------------------------------------------------------------------------


def _openai_number(body: Mapping[str, Any], name: str, low: float, high: float) -> None:
    value = body.get(name)
    if value is None:
        return
    if not _is_number(value):
        raise BadRequest(
            f"Invalid type for '{name}': expected a decimal, but got {_json_kind(value)} instead.",
            param=name,
            code="invalid_type",
        )
    if value > high:
        raise BadRequest(
            f"Invalid '{name}': decimal above maximum value. Expected a value <= {high:g}, "
            f"but got {value:g} instead.",
            param=name,
            code="decimal_above_max_value",
        )
    if value < low:
        raise BadRequest(
            f"Invalid '{name}': decimal below minimum value. Expected a value >= {low:g}, "
            f"but got {value:g} instead.",
            param=name,
            code="decimal_below_min_value",
        )


def _openai_positive_int(body: Mapping[str, Any], name: str) -> None:
    value = body.get(name)
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool):
        raise BadRequest(
            f"Invalid type for '{name}': expected an integer, but got {_json_kind(value)} instead.",
            param=name,
            code="invalid_type",
        )
    if value < 1:
        raise BadRequest(
            f"Invalid '{name}': integer below minimum value. Expected a value >= 1, but got "
            f"{value} instead.",
            param=name,
            code="integer_below_min_value",
        )


def _supported(values: tuple[str, ...]) -> str:
    quoted = [f"'{v}'" for v in values]
    return ", ".join(quoted[:-1]) + f", and {quoted[-1]}"


def check_openai_model(body: Mapping[str, Any]) -> str:
    """The request's ``model``, refused as OpenAI refuses it: a missing or empty one with
    "you must provide a model parameter", another type with ``invalid_type``."""
    model = body.get("model")
    if model is None or model == "":
        raise BadRequest("you must provide a model parameter", param="model")
    if not isinstance(model, str):
        raise BadRequest(
            f"Invalid type for 'model': expected a string, but got {_json_kind(model)} instead.",
            param="model",
            code="invalid_type",
        )
    return model


def check_openai(body: Mapping[str, Any]) -> None:
    """Refuse what OpenAI's chat completions endpoint refuses (see the module docstring)."""
    messages = body.get("messages")
    if isinstance(messages, list):
        for i, message in enumerate(messages):
            role = message.get("role") if isinstance(message, dict) else None
            if isinstance(role, str) and role not in OPENAI_ROLES:
                raise BadRequest(
                    f"Invalid value: '{role}'. Supported values are: {_supported(OPENAI_ROLES)}.",
                    param=f"messages[{i}].role",
                    code="invalid_value",
                )
    _openai_number(body, "temperature", 0.0, 2.0)
    _openai_number(body, "top_p", 0.0, 1.0)
    _openai_positive_int(body, "max_completion_tokens")
    _openai_positive_int(body, "max_tokens")
    effort = body.get("reasoning_effort")
    if effort is not None and effort not in REASONING_EFFORTS:
        raise BadRequest(
            f"Invalid value: {effort!r}. Supported values are: {_supported(REASONING_EFFORTS)}.",
            param="reasoning_effort",
            code="invalid_value",
        )
    model = body.get("model")
    rules = param_rules_for(model) if isinstance(model, str) else NO_RULES
    limit = rules.max_output_tokens
    for name in ("max_completion_tokens", "max_tokens"):
        value = body.get(name)
        if limit is not None and isinstance(value, int) and value > limit:
            raise BadRequest(
                f"{name} is too large: {value}. This model supports at most {limit} "
                f"completion tokens, whereas you provided {value}.",
                param=name,
                code="invalid_value",
            )
    if effort is not None and not rules.reasoning:
        raise BadRequest(
            "Unsupported parameter: 'reasoning_effort' is not supported with this model.",
            param="reasoning_effort",
            code="unsupported_parameter",
        )
    if rules.reasoning_params:
        _check_reasoning_params(body)


def _check_reasoning_params(body: Mapping[str, Any]) -> None:
    if body.get("max_tokens") is not None:
        raise BadRequest(
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
            "'max_completion_tokens' instead.",
            param="max_tokens",
            code="unsupported_parameter",
        )
    for name in ("temperature", "top_p"):
        value = body.get(name)
        if value is not None and value != 1:
            raise BadRequest(
                f"Unsupported value: '{name}' does not support {value:g} with this model. Only "
                "the default (1) value is supported.",
                param=name,
                code="unsupported_value",
            )


# Anthropic -----------------------------------------------------------------------------


def check_anthropic_model(body: Mapping[str, Any]) -> str:
    """The request's ``model``, refused in the Messages API's field-error words: missing,
    not a string, or empty."""
    model = body.get("model")
    if model is None:
        raise BadRequest("model: Field required")
    if not isinstance(model, str):
        raise BadRequest("model: Input should be a valid string")
    if not model:
        raise BadRequest("model: String should have at least 1 character")
    return model


def check_anthropic(body: Mapping[str, Any]) -> str:
    """Refuse what Anthropic's Messages endpoint refuses; returns the thinking mode
    (``"off"`` or the ``thinking.type`` that turns it on)."""
    _check_roles(body.get("messages"))
    for name, high in (("temperature", 1.0), ("top_p", 1.0)):
        value = body.get(name)
        if value is None:
            continue
        if not _is_number(value):
            raise BadRequest(f"{name}: Input should be a valid number")
        if value > high:
            raise BadRequest(f"{name}: Input should be less than or equal to {high:g}")
        if value < 0:
            raise BadRequest(f"{name}: Input should be greater than or equal to 0")
    max_tokens = body.get("max_tokens")
    if max_tokens is not None:
        # JSON true is a Python int: without the bool test it passed as max_tokens 1.
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
            raise BadRequest("max_tokens: Input should be a valid integer")
        if max_tokens < 1:
            raise BadRequest("max_tokens: Input should be greater than or equal to 1")
    model = body.get("model")
    rules = param_rules_for(model) if isinstance(model, str) else NO_RULES
    limit = rules.max_output_tokens
    if limit is not None and isinstance(max_tokens, int) and max_tokens > limit:
        raise BadRequest(
            f"max_tokens: {max_tokens} > {limit}, which is the maximum allowed number of "
            f"output tokens for {model}"
        )
    thinking = _check_thinking(body)
    if thinking != "off" and not rules.reasoning:
        raise BadRequest(f"thinking: {model} does not support extended thinking")
    return thinking


def _check_roles(messages: Any) -> None:
    if not isinstance(messages, list):
        return  # the codec's parse says what is wrong with it
    previous: str | None = None
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            return
        role = message.get("role")
        if role == "system":
            raise BadRequest(
                'messages: Unexpected role "system". The Messages API accepts a top-level '
                '`system` parameter, not "system" as an input message role.'
            )
        if role not in ANTHROPIC_ROLES:
            raise BadRequest(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        if i == 0 and role != "user":
            raise BadRequest('messages: first message must use the "user" role')
        if role == previous:
            raise BadRequest(
                'messages: roles must alternate between "user" and "assistant", but found '
                f'multiple "{role}" roles in a row'
            )
        previous = role
        last = i == len(messages) - 1
        if not _has_content(message.get("content")) and not (last and role == "assistant"):
            raise BadRequest(
                f"messages.{i}: all messages must have non-empty content except for the "
                "optional final assistant message"
            )
        if last and role == "assistant" and _ends_with_space(message.get("content")):
            raise BadRequest(
                "messages: final assistant content cannot end with trailing whitespace"
            )


def _has_content(content: Any) -> bool:
    if isinstance(content, str):
        return content != ""
    return isinstance(content, list) and len(content) > 0


def _ends_with_space(content: Any) -> bool:
    if isinstance(content, str):
        return content != content.rstrip()
    if isinstance(content, list) and content and isinstance(content[-1], dict):
        text = content[-1].get("text")
        return isinstance(text, str) and text != text.rstrip()
    return False


def _check_thinking(body: Mapping[str, Any]) -> str:
    thinking = body.get("thinking")
    if thinking is None:
        return "off"
    if not isinstance(thinking, dict):
        raise BadRequest("thinking: Input should be a valid dictionary or object")
    kind = thinking.get("type")
    if kind not in THINKING_TYPES:
        expected = ", ".join(f"'{t}'" for t in THINKING_TYPES)
        raise BadRequest(
            f"thinking: Input tag {kind!r} found using 'type' does not match any of the "
            f"expected tags: {expected}"
        )
    if kind == "disabled":
        return "off"
    display = thinking.get("display")
    if display is not None and display not in THINKING_DISPLAYS:
        raise BadRequest(f"thinking.{kind}.display: Input should be 'summarized' or 'omitted'")
    if kind == "enabled":
        budget = thinking.get("budget_tokens")
        if budget is None:
            raise BadRequest("thinking.enabled.budget_tokens: Field required")
        if not isinstance(budget, int) or isinstance(budget, bool):
            raise BadRequest("thinking.enabled.budget_tokens: Input should be a valid integer")
        if budget < MIN_THINKING_BUDGET:
            raise BadRequest(
                "thinking.enabled.budget_tokens: Input should be greater than or equal to "
                f"{MIN_THINKING_BUDGET}"
            )
        max_tokens = body.get("max_tokens")
        if isinstance(max_tokens, int) and budget >= max_tokens:
            raise BadRequest(
                "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
                f"documentation at {_THINKING_DOCS}#max-tokens-and-context-window-size"
            )
    temperature = body.get("temperature")
    if temperature is not None and temperature != 1:
        raise BadRequest(
            "`temperature` may only be set to 1 when thinking is enabled. Please consult our "
            f"documentation at {_THINKING_DOCS}#feature-compatibility"
        )
    top_p = body.get("top_p")
    if top_p is not None and top_p < THINKING_MIN_TOP_P:
        raise BadRequest(
            f"`top_p` must be unset or between {THINKING_MIN_TOP_P} and 1 when thinking is "
            f"enabled. Please consult our documentation at {_THINKING_DOCS}#feature-compatibility"
        )
    if body.get("top_k") is not None:
        raise BadRequest(
            "`top_k` must be unset when thinking is enabled. Please consult our documentation "
            f"at {_THINKING_DOCS}#feature-compatibility"
        )
    messages = body.get("messages")
    if isinstance(messages, list) and len(messages) > 1:
        last = messages[-1]
        if isinstance(last, dict) and last.get("role") == "assistant":
            raise BadRequest(
                "messages: a final `assistant` message (a prefill) cannot be used when "
                f"thinking is enabled. Please consult our documentation at {_THINKING_DOCS}"
            )
    return str(kind)


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return "a number" if _is_number(value) else "null"


def echo_rules(name: str, options: Mapping[str, str]) -> ParamRules:
    """``echo``'s options for these checks (the model itself ignores options):
    ``max_output=N`` (its output limit, N >= 1) and ``reasoning=false`` (it does not reason).
    Raises ValueError for any other option or value."""
    unknown = sorted(set(options) - {"max_output", "reasoning"})
    if unknown:
        raise ValueError(
            f"model {name!r}: unknown option(s) {', '.join(unknown)}; echo takes max_output "
            "and reasoning"
        )
    limit = options.get("max_output")
    if limit is not None and not (limit.isdigit() and int(limit) >= 1):
        raise ValueError(f"model {name!r}: max_output must be a whole number >= 1, got {limit!r}")
    reasoning = options.get("reasoning", "true").lower()
    if reasoning not in ("true", "false"):
        raise ValueError(f"model {name!r}: reasoning must be true or false, got {reasoning!r}")
    return ParamRules(
        max_output_tokens=None if limit is None else int(limit), reasoning=reasoning == "true"
    )


register_param_rules("echo", echo_rules)
