"""Gemini field-name casing: a client body in snake_case (``system_instruction``,
``inline_data.mime_type``, ``generation_config.max_output_tokens``,
``tool_config.function_calling_config`` …, the spelling of Google's REST samples) is rewritten in
the API's camelCase before anything reads or forwards it, so every hop — a Gemini lane included
— sees one spelling (``docs/protocols/gemini.md#field-casing``).

Field names are converted everywhere except inside values that are data, not API fields:
function-call ``args``, function-response ``response``, JSON/OpenAPI schemas (``parameters``,
``parametersJsonSchema``, ``responseSchema``, ``responseJsonSchema``, a declaration's
``response``) and ``labels``. An object that sets one field in both spellings is refused.

``:countTokens`` bodies (``{"contents": …}`` or ``{"generateContentRequest": …}``) are brought to
the ``generateContentRequest`` form (``count_tokens_request``); the Gemini egress sends such a
body to ``models/{model}:countTokens``.
"""

from __future__ import annotations

from typing import Any

from busbar.proto.errors import BadRequest

OPAQUE = frozenset({"args", "response", "parameters", "parametersJsonSchema", "responseSchema",
                    "responseJsonSchema", "labels"})
"""camelCase keys whose values are kept as sent (data, schemas, user-defined maps)."""

COUNT_TOKENS_KEY = "generateContentRequest"
"""The key that marks a ``:countTokens`` body (``count_tokens_request``)."""


def camel(name: str) -> str:
    """``max_output_tokens`` -> ``maxOutputTokens`` (a name without ``_`` is returned as is)."""
    if "_" not in name:
        return name
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def normalize(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with every API field name in camelCase (the same object when it already is).

    Raises:
        BadRequest: an object sets the same field as ``snake_case`` and ``camelCase``
            (``systemInstruction: set twice, as "system_instruction" and "systemInstruction";
            send one spelling``).
    """
    return _object(body, "")


def _object(obj: dict[str, Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] | None = None
    for i, (key, value) in enumerate(obj.items()):
        name = camel(key) if type(key) is str else key
        if name != key and name in obj:
            at = f"{where}.{name}" if where else name
            raise BadRequest(f'{at}: set twice, as "{key}" and "{name}"; send one spelling')
        new = value if name in OPAQUE else _value(value, f"{where}.{name}" if where else name)
        if out is None and (name != key or new is not value):
            out = dict(list(obj.items())[:i])   # copy on first change: keys before it as they were
        if out is not None:
            out[name] = new
    return obj if out is None else out


def _value(value: Any, where: str) -> Any:
    if type(value) is dict:
        return _object(value, where)
    if type(value) is list:
        items = [_value(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return value if all(a is b for a, b in zip(items, value)) else items
    return value


def normalize_request(body: dict[str, Any], method: str = "") -> dict[str, Any]:
    """The Gemini dialect's ``normalize_request``: ``normalize``, then for ``method ==
    "countTokens"`` the ``generateContentRequest`` form (``count_tokens_request``).

    Raises:
        BadRequest: see ``normalize`` and ``count_tokens_request``.
    """
    body = normalize(body)
    return count_tokens_request(body) if method == "countTokens" else body


def count_tokens_request(body: dict[str, Any]) -> dict[str, Any]:
    """A ``:countTokens`` body (already camelCase) in the ``generateContentRequest`` form.

    ``{"contents": [...]}`` becomes ``{"generateContentRequest": {"contents": [...]}}``; a body
    already in that form keeps only that key (always a new object: serialized, it starts with
    ``{"generateContentRequest":``, which is how the egress tells it apart). The egress sets
    ``generateContentRequest.model``.

    Raises:
        BadRequest: neither ``contents`` nor ``generateContentRequest`` (an object) is given.
    """
    inner = body.get(COUNT_TOKENS_KEY)
    if inner is not None:
        if not isinstance(inner, dict):
            raise BadRequest(f"{COUNT_TOKENS_KEY}: must be an object (a generateContent request body)")
        return {COUNT_TOKENS_KEY: inner}
    if "contents" not in body:
        raise BadRequest('countTokens: give "contents" (or "generateContentRequest"), e.g. '
                         '{"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}')
    return {COUNT_TOKENS_KEY: body}
