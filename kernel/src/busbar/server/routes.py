"""Data-plane route matching: which protocol a POST speaks and where it names its pool or model.

``match(method, path, query) -> Route | None``. Body-model protocols (openai, responses, cohere,
anthropic on ``/v1/messages``) name the target in the body (``name=None``) and stream by the
body's ``stream``; path-model protocols name it in the URL and stream by the verb:

| route | dialect | target | stream |
|---|---|---|---|
| ``/v1/chat/completions`` | openai | body ``model`` | body |
| ``/v1/responses`` | responses | body ``model`` | body |
| ``/v2/chat``, ``/v1/chat`` | cohere | body ``model`` | body |
| ``/v1/messages`` | anthropic | body ``model`` | body |
| ``/{name}/v1/messages`` | anthropic | path | body |
| ``/{provider}/{model}/v1/messages`` | anthropic, ad-hoc | provider + model | body |
| ``/v1beta/models/{m}:generateContent`` (also ``/v1/``) | gemini | path | no |
| ``/v1beta/models/{m}:streamGenerateContent[?alt=sse]`` | gemini | path | yes (JSON array without ``alt=sse``) |
| ``/v1beta/models/{m}:countTokens`` | gemini (Gemini lanes only) | path | no |
| ``/model/{id}/converse`` / ``converse-stream`` | bedrock | path | verb |
| ``/model/{id}/invoke`` / ``invoke-with-response-stream`` | bedrock-invoke | path | verb |

Non-chat operations (``Route.op``; served by ``busbar.server.ops_dispatch``, docs/beyond-chat.md):

| route | dialect | op |
|---|---|---|
| ``/v1/embeddings`` | openai | embeddings |
| ``/v2/embed`` | cohere | embeddings |
| ``/v1beta/models/{m}:embedContent`` / ``:batchEmbedContents`` | gemini | embeddings (``method`` = the verb) |
| ``/v2/rerank`` | cohere | rerank |
| ``/v1/moderations`` | openai | moderation |
| ``/v1/images/generations``; ``/v1beta/models/{m}:predict`` | openai; gemini | images |
| ``/model/{id}/invoke`` | bedrock-invoke | ``invoke``: by the body (embeddings, rerank, images, else chat) |
| ``/v1/audio/transcriptions``, ``/translations``, ``/speech`` | openai | ``audio.`` + the last segment |
| ``/v1/images/edits``, ``/variations`` | openai | not served (a native 404) |

``path`` is the ASGI ``scope["path"]``, already percent-decoded once by the server: a name is
never decoded a second time (``%2541`` names ``%41``, not ``A``). A name taken from the path is then
checked by ``busbar.modelname.name_fault`` (docs/routing.md#client-chosen-model-names).

"""
from __future__ import annotations

from typing import NamedTuple
from urllib.parse import parse_qs


class Route(NamedTuple):
    dialect: str
    name: str | None            # target from the path (None: from the body's model)
    adhoc_provider: str | None
    stream: bool | None         # None: from the body's stream flag
    shims: dict[str, bool] | None   # kernel-only request markers (stripped before egress)
    method: str = ""            # a path-model verb the dialect normalizes for (gemini "countTokens")
    op: str = ""                # a non-chat operation ("" = chat; "invoke" = by the Bedrock body)


_BODY_MODEL = {"/v1/chat/completions": "openai", "/v1/responses": "responses", "/v2/chat": "cohere",
               "/v1/chat": "cohere", "/v1/messages": "anthropic"}
_BODY_OPS = {"/v1/embeddings": ("openai", "embeddings"), "/v2/embed": ("cohere", "embeddings"),
             "/v2/rerank": ("cohere", "rerank"), "/v1/moderations": ("openai", "moderation"),
             "/v1/images/generations": ("openai", "images"), "/v1/images/edits": ("openai", "images.edits"),
             "/v1/images/variations": ("openai", "images.variations"),
             "/v1/audio/transcriptions": ("openai", "audio.transcriptions"),
             "/v1/audio/translations": ("openai", "audio.translations"), "/v1/audio/speech": ("openai", "audio.speech")}
_GEMINI_OPS = {"embedContent": "embeddings", "batchEmbedContents": "embeddings", "predict": "images"}
_BEDROCK_VERBS = {"converse": ("bedrock", False), "converse-stream": ("bedrock", True),
                  "invoke": ("bedrock-invoke", False), "invoke-with-response-stream": ("bedrock-invoke", True)}


def match(method: str, path: str, query: bytes = b"") -> Route | None:
    """The ingress route of a data-plane request, or ``None`` (not a protocol POST)."""
    if method != "POST":
        return None
    dialect = _BODY_MODEL.get(path)
    if dialect is not None:
        return Route(dialect, None, None, None, None)
    op = _BODY_OPS.get(path)
    if op is not None:
        return Route(op[0], None, None, False, None, op=op[1])
    if path.startswith(("/v1beta/models/", "/v1/models/")):
        model, _, verb = path.split("/models/", 1)[1].rpartition(":")
        if not model:
            return None
        if verb == "generateContent":
            return Route("gemini", model, None, False, None)
        if verb == "streamGenerateContent":
            alt = parse_qs(query.decode("latin-1")).get("alt", [""])[0]
            shims = None if alt == "sse" else {"__busbar_gemini_json_array": True}
            return Route("gemini", model, None, True, shims)
        if verb == "countTokens":
            return Route("gemini", model, None, False, None, "countTokens")
        if verb in _GEMINI_OPS:
            return Route("gemini", model, None, False, None, verb, _GEMINI_OPS[verb])
        return None
    if path.startswith("/model/"):
        model, _, verb = path[len("/model/"):].rpartition("/")
        hit = _BEDROCK_VERBS.get(verb)
        if hit and model:
            return Route(hit[0], model, None, hit[1], None, op="invoke" if verb == "invoke" else "")
        return None
    if path.endswith("/v1/messages"):
        parts = path[1:-len("/v1/messages")].split("/", 1)
        if len(parts) == 1 and parts[0]:
            return Route("anthropic", parts[0], None, None, None)
        if len(parts) == 2 and parts[0] and parts[1]:
            return Route("anthropic", parts[1], parts[0], None, None)
    return None


def dialect_for_unknown(path: str) -> str:
    """The envelope for an unknown route: the protocol the path looks like (default openai)."""
    if "/messages" in path:
        return "anthropic"
    if path.startswith(("/v1beta/", "/v1/models/")) or ":generateContent" in path:
        return "gemini"
    if path.startswith("/model/"):
        return "bedrock"
    if path.startswith("/v2/"):
        return "cohere"
    return "openai"
