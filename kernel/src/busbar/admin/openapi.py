"""The admin API's OpenAPI 3.1 document: generated from the routes, committed, served.

``install_openapi(app)`` makes ``app.openapi()`` return the document with every operation's
``x-busbar-required-scope`` (``busbar.admin.scopes``), the bearer / ``x-admin-token`` security
schemes and the error shape. The committed copy is ``docs/admin-openapi.json``; a test fails when
the routes and the file drift. Regenerate with::

    .venv/bin/python -m busbar.admin.openapi --write

Served (read-only scope) at ``GET /api/v1/admin/openapi.json``.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from busbar.admin.scopes import required_scope

__all__ = ["ADMIN_API_VERSION", "DOC_PATH", "document_text", "install_openapi"]

#: The admin contract's own version (independent of the binary's).
ADMIN_API_VERSION = "1.0.0"
DOC_PATH = "docs/admin-openapi.json"
_METHODS = ("get", "put", "post", "delete", "patch", "head", "options")


def _build(app: FastAPI) -> dict[str, Any]:
    doc = get_openapi(title=app.title, version=app.version, openapi_version="3.1.0", routes=app.routes,
                      description="The Busbar admin API (served on admin_listen). Errors are "
                                  "{\"error\": {\"code\", \"message\"}}; see docs/admin.md.")
    comps = doc.setdefault("components", {})
    comps["securitySchemes"] = {
        "bearer": {"type": "http", "scheme": "bearer", "description": "The admin-tokens operator token."},
        "adminToken": {"type": "apiKey", "in": "header", "name": "x-admin-token"},
    }
    doc["security"] = [{"bearer": []}, {"adminToken": []}]
    for path, item in doc.get("paths", {}).items():
        for method in _METHODS:
            op = item.get(method)
            if op is not None:
                op["x-busbar-required-scope"] = required_scope(method.upper(), path)
    return doc


def install_openapi(app: FastAPI) -> None:
    """Replace ``app.openapi`` with the generator above (cached after the first call)."""
    cache: dict[str, Any] = {}

    def openapi() -> dict[str, Any]:
        if "doc" not in cache:
            cache["doc"] = _build(app)
        doc: dict[str, Any] = cache["doc"]
        return doc

    app.openapi = openapi  # type: ignore[method-assign]


def document_text() -> str:
    """The document as committed: JSON, 2-space indent, sorted keys, trailing newline."""
    from busbar.admin.app import create_admin_app

    return json.dumps(create_admin_app(None).openapi(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    """``--write``: write :data:`DOC_PATH` (run from the repository root); else print it."""
    text = document_text()
    if "--write" in argv:
        Path(DOC_PATH).write_text(text)
        print(f"wrote {DOC_PATH}")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
