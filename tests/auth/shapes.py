"""Raw requests per protocol and the exact native refusal each must get (docs/auth.md#refusals)."""
from __future__ import annotations

from typing import Any

import httpx

REQUESTS: dict[str, tuple[str, dict[str, Any]]] = {
    "openai": ("/v1/chat/completions", {"model": "to-openai", "messages": [{"role": "user", "content": "hi"}]}),
    "anthropic": ("/v1/messages", {"model": "to-anthropic", "max_tokens": 16,
                                   "messages": [{"role": "user", "content": "hi"}]}),
    "gemini": ("/v1beta/models/to-gemini:generateContent", {"contents": [{"parts": [{"text": "hi"}]}]}),
    "bedrock": ("/model/to-bedrock/converse", {"messages": [{"role": "user", "content": [{"text": "hi"}]}]}),
    "cohere": ("/v2/chat", {"model": "to-cohere", "messages": [{"role": "user", "content": "hi"}]}),
}

UNAUTHENTICATED: dict[str, tuple[int, dict[str, Any]]] = {
    "openai": (401, {"error": {"message": "Incorrect API key provided. Present a valid Busbar virtual key.",
                               "type": "authentication_error", "param": None, "code": "invalid_api_key"}}),
    "anthropic": (401, {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}),
    "gemini": (400, {"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",
                               "status": "INVALID_ARGUMENT",
                               "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                            "reason": "API_KEY_INVALID", "domain": "googleapis.com",
                                            "metadata": {"service": "generativelanguage.googleapis.com"}}]}}),
    "bedrock": (403, {"message": "The security token included in the request is invalid."}),
    "cohere": (401, {"message": "invalid api token"}),
}


def forbidden(protocol: str, pool: str) -> tuple[int, dict[str, Any]]:
    """The 403 a caller gets for a pool outside its allowed_pools."""
    msg = f"this key may not use pool '{pool}': it is not in the key's allowed_pools"
    return {
        "openai": (403, {"error": {"message": msg, "type": "permission_error", "param": None, "code": None}}),
        "anthropic": (403, {"type": "error", "error": {"type": "permission_error", "message": msg}}),
        "gemini": (403, {"error": {"code": 403, "message": msg, "status": "PERMISSION_DENIED"}}),
        "bedrock": (403, {"message": msg}),
        "cohere": (403, {"message": msg}),
    }[protocol]


def post(url: str, protocol: str, headers: dict[str, str]) -> httpx.Response:
    path, body = REQUESTS[protocol]
    return httpx.post(url + path, json=body, headers=headers, timeout=10)


def assert_refused(r: httpx.Response, protocol: str) -> None:
    status, body = UNAUTHENTICATED[protocol]
    assert (r.status_code, r.json()) == (status, body), r.text
    if protocol == "bedrock":
        assert r.headers["x-amzn-errortype"].split(":")[0] == "AccessDeniedException"
