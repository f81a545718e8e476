"""Client-chosen model names: what is refused, and how a name is written into a URL or a header.

A model name reaches an upstream URL on the path-model protocols (Gemini ``/models/{model}:verb``,
Bedrock ``/model/{id}/converse``, Anthropic-on-Vertex ``/models/{model}:rawPredict``), and on the
ad-hoc route ``/{provider}/{model}/v1/messages`` the name is whatever the client wrote. So:

- ``name_fault(name) -> str | None``: why a name taken from a request path cannot be served (an
  empty, ``.`` or ``..`` segment, or a control character), or ``None``. The caller answers 400 in the
  caller's envelope before any upstream work.
- ``path_segment(name, keep="") -> str``: the name percent-encoded (UTF-8) as ONE path segment:
  ``/``, ``?``, ``#``, ``%``, ``:``, spaces and every non-ASCII byte are escaped, so a name can never
  leave its segment, reach the query or replace the verb; ``keep`` lists characters left as they are
  (``@`` for Vertex model versions).
- ``header_value(name) -> str``: the name as it is written into ``x-busbar-route-target``: RFC 3986
  percent-encoding of its UTF-8 bytes, leaving letters, digits and ``-._~!$&'()*+,;=:@/`` unchanged
  (a plain ASCII name is written as is; decode with ``urllib.parse.unquote``).

See docs/routing.md#client-chosen-model-names.
"""
from __future__ import annotations

import unicodedata
from urllib.parse import quote

_HEADER_SAFE = "!$&'()*+,;=:@/"


def name_fault(name: str) -> str | None:
    """Why ``name`` (a model name from a request path) cannot be served, else ``None``.

    Refused: an empty name, a ``/``-separated segment that is empty, ``.`` or ``..``, and any control
    character (Unicode category Cc: C0, DEL, C1, so CR/LF too). The returned text names the fault and
    the fix, fit for a 400 message.
    """
    for ch in name:
        if unicodedata.category(ch) == "Cc":
            return (f"the model name contains the control character U+{ord(ch):04X}; a model name "
                    f"is printable text")
    for segment in name.split("/"):
        if segment in ("", ".", ".."):
            shown = "an empty" if not segment else f"a '{segment}'"
            return (f"the model name has {shown} path segment; a model name is one path segment "
                    f"(no '.', '..' or empty parts between '/')")
    return None


def path_segment(name: str, keep: str = "") -> str:
    """``name`` percent-encoded (UTF-8) as one URL path segment; ``keep``: characters left unescaped.

    Example: ``path_segment("a/../b:x?y")`` -> ``"a%2F..%2Fb%3Ax%3Fy"``.
    """
    return quote(name, safe=keep)


def header_value(name: str) -> str:
    """``name`` as a header-safe ASCII value (RFC 3986 percent-encoding of its UTF-8 bytes).

    Example: ``header_value("模型 🚀")`` -> ``"%E6%A8%A1%E5%9E%8B%20%F0%9F%9A%80"``; ``"gpt-4o"``
    is unchanged.
    """
    return quote(name, safe=_HEADER_SAFE)
