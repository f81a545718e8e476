"""``busbar admin ...``: operate a running gateway through its admin API.

Usage::

    busbar admin [--url URL] [--token TOKEN] [--json] keys mint --name NAME [--group G] [--parent P]
                 [--allowed-pools a,b] [--label k=v ...] [--expires-in 30d | --expires-at UNIX] [--aws]
    busbar admin keys list [--group G] [--prefix P] [--include-tombstoned]
    busbar admin keys get|revoke|rotate|delete ID
    busbar admin keys patch ID [--enable | --disable] [--group G | --unbind]
    busbar admin groups | usage | hooks status [NAME] | audit list | audit verify

The URL and token come from ``--url`` / ``--token`` or ``BUSBAR_ADMIN_URL`` (default
``http://127.0.0.1:8081``) / ``BUSBAR_ADMIN_TOKEN``. Output is a table, or the API's JSON with
``--json``. Exit status: 0 done; 1 the API refused (``busbar admin: <code>: <message>`` on stderr),
could not be reached, or ``audit verify`` found a broken chain; 2 bad arguments.

Source: docs/admin.md#cli.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

import httpx

__all__ = ["main"]

DEFAULT_URL = "http://127.0.0.1:8081"
PREFIX = "/api/v1/admin"
EXIT_FAILED, EXIT_USAGE = 1, 2


class _Failed(Exception):
    """A request failed; ``str`` is the line to print."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="busbar admin", description="Operate a gateway through its admin API.")
    p.add_argument("--url", help=f"admin API base URL (env BUSBAR_ADMIN_URL; default {DEFAULT_URL})")
    p.add_argument("--token", help="admin token (env BUSBAR_ADMIN_TOKEN)")
    p.add_argument("--json", action="store_true", help="print the API's JSON")
    sub = p.add_subparsers(dest="area", required=True)

    keys = sub.add_parser("keys", help="virtual keys").add_subparsers(dest="action", required=True)
    mint = keys.add_parser("mint", help="mint a key (the token is shown once)")
    mint.add_argument("--name", required=True)
    mint.add_argument("--group")
    mint.add_argument("--parent", help="auto-provision --group under this group when it does not exist")
    mint.add_argument("--allowed-pools", help="comma-separated pools ('' = none; omit = all)")
    mint.add_argument("--label", action="append", default=[], metavar="KEY=VALUE")
    exp = mint.add_mutually_exclusive_group()
    exp.add_argument("--expires-in", help='a duration: "2s", "30m", "7d" (default 90d)')
    exp.add_argument("--expires-at", type=int, help="Unix seconds")
    mint.add_argument("--aws", action="store_true", help="also issue an AWS access-key pair (SigV4 ingress)")
    mint.add_argument("--idempotency-key")
    ls = keys.add_parser("list", help="list keys")
    ls.add_argument("--group")
    ls.add_argument("--prefix")
    ls.add_argument("--include-tombstoned", action="store_true")
    for name in ("get", "revoke", "rotate", "delete"):
        one = keys.add_parser(name, help=f"{name} one key")
        one.add_argument("id")
        if name == "revoke":
            one.add_argument("--reason")
    patch = keys.add_parser("patch", help="freeze/unfreeze or rebind/unbind a key")
    patch.add_argument("id")
    en = patch.add_mutually_exclusive_group()
    en.add_argument("--enable", dest="enabled", action="store_const", const=True)
    en.add_argument("--disable", dest="enabled", action="store_const", const=False)
    grp = patch.add_mutually_exclusive_group()
    grp.add_argument("--group")
    grp.add_argument("--unbind", action="store_true")

    sub.add_parser("groups", help="the group tree with live usage")
    sub.add_parser("usage", help="usage by group and key")
    hooks = sub.add_parser("hooks", help="hook instances").add_subparsers(dest="action", required=True)
    status = hooks.add_parser("status", help="each hook's reported status")
    status.add_argument("name", nargs="?")
    audit = sub.add_parser("audit", help="the audit log").add_subparsers(dest="action", required=True)
    audit.add_parser("list", help="audit records, oldest first")
    audit.add_parser("verify", help="verify the hash chain; exit 1 when broken")
    return p


class _Api:
    def __init__(self, url: str, token: str | None) -> None:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        self.base = url.rstrip("/")
        self.client = httpx.Client(base_url=self.base + PREFIX, headers=headers, timeout=30)

    def call(self, method: str, path: str, *, body: Any = None, params: dict[str, Any] | None = None,
             headers: dict[str, str] | None = None) -> Any:
        try:
            r = self.client.request(method, path, json=body, params=params, headers=headers)
        except httpx.HTTPError as e:
            raise _Failed(f"cannot reach the admin API at {self.base} ({type(e).__name__}); check --url / "
                          f"BUSBAR_ADMIN_URL and that admin_listen is served") from None
        try:
            data = r.json()
        except ValueError:
            data = None
        if r.status_code >= 400:
            err = data.get("error") if isinstance(data, dict) else None
            if isinstance(err, dict):
                raise _Failed(f"{err.get('code')}: {err.get('message')}")
            raise _Failed(f"HTTP {r.status_code} from {path}")
        return data


def _table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    cells = [list(header)] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells)


def _key_rows(items: list[dict[str, Any]]) -> str:
    return _table([(k["id"], k["name"], k["state"], k.get("group"),
                    "all" if k.get("allowed_pools") is None else ",".join(k["allowed_pools"]) or "none",
                    k.get("expires_at")) for k in items],
                  ("ID", "NAME", "STATE", "GROUP", "POOLS", "EXPIRES_AT"))


def _mint_body(a: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {"name": a.name}
    for field in ("group", "parent", "expires_in", "expires_at"):
        if getattr(a, field) is not None:
            body[field] = getattr(a, field)
    if a.allowed_pools is not None:
        body["allowed_pools"] = [p.strip() for p in a.allowed_pools.split(",") if p.strip()]
    if a.label:
        labels = {}
        for item in a.label:
            k, sep, v = item.partition("=")
            if not sep or not k:
                raise SystemExit(f"busbar admin: --label {item!r}: write KEY=VALUE")
            labels[k] = v
        body["labels"] = labels
    if a.aws:
        body["issue_aws_credential"] = True
    return body


def _print_secret_reply(data: dict[str, Any]) -> None:
    print(_key_rows([data]))
    print(f"token: {data['token']}")
    if data.get("aws_access_key_id"):
        print(f"aws_access_key_id: {data['aws_access_key_id']}")
        print(f"aws_secret_access_key: {data['aws_secret_access_key']}")
    for w in data.get("warnings", []):
        print(f"warning: {w}", file=sys.stderr)
    print("(the token is shown once: store it now)", file=sys.stderr)


def _keys(api: _Api, a: argparse.Namespace) -> tuple[Any, str | None]:
    if a.action == "mint":
        headers = {"Idempotency-Key": a.idempotency_key} if a.idempotency_key else None
        return api.call("POST", "/keys", body=_mint_body(a), headers=headers), "secret"
    if a.action == "list":
        params: dict[str, Any] = {"limit": 1000}
        if a.group:
            params["group"] = a.group
        if a.prefix:
            params["prefix"] = a.prefix
        if a.include_tombstoned:
            params["include"] = "tombstoned"
        items: list[dict[str, Any]] = []
        while True:
            page = api.call("GET", "/keys", params=params)
            items += page["items"]
            if not page["next_cursor"]:
                break
            params["cursor"] = page["next_cursor"]
        return {"items": items, "next_cursor": None}, "keys"
    if a.action == "get":
        return api.call("GET", f"/keys/{a.id}"), "key"
    if a.action == "revoke":
        return api.call("POST", f"/keys/{a.id}/revoke", body={"reason": a.reason} if a.reason else None), "key"
    if a.action == "rotate":
        return api.call("POST", f"/keys/{a.id}/rotate"), "secret"
    if a.action == "delete":
        return api.call("DELETE", f"/keys/{a.id}"), "key"
    body: dict[str, Any] = {}
    if a.enabled is not None:
        body["enabled"] = a.enabled
    if a.unbind:
        body["group"] = None
    elif a.group is not None:
        body["group"] = a.group
    return api.call("PATCH", f"/keys/{a.id}", body=body), "key"


def _render(data: Any, kind: str | None) -> int:
    if kind == "secret":
        _print_secret_reply(data)
    elif kind == "keys":
        print(_key_rows(data["items"]))
    elif kind == "key":
        print(_key_rows([data]))
    elif kind == "verify":
        if data["ok"]:
            print(f"audit log intact: {data['records']} record(s)")
        else:
            print(f"audit log BROKEN at seq {data['first_bad_seq']}: {data['reason']}")
            return EXIT_FAILED
    elif kind == "audit":
        print(_table([(r["seq"], r["ts"], r["action"], r["resource"], r["outcome"], r["principal"])
                      for r in data["items"]], ("SEQ", "TS", "ACTION", "RESOURCE", "OUTCOME", "PRINCIPAL")))
    elif kind == "hooks":
        print(_table([(h["name"], h.get("supported"), h.get("settings_version"), h.get("desired_version"),
                       h.get("drift"), len(h.get("metrics", []))) for h in data],
                     ("HOOK", "SUPPORTED", "VERSION", "DESIRED", "DRIFT", "METRICS")))
    elif kind == "groups":
        print(_table([(g["name"], g.get("parent"), "yes" if g.get("runtime") else "no",
                       "yes" if g.get("enabled", True) else "no",
                       "; ".join(f"{lim['metric']} {lim.get('used', 0)}/{lim['amount']}"
                                 + (f" per {lim['per']}" if lim.get("per") else "") for lim in g.get("limits", []))
                       or "-") for g in data.get("groups", [])],
                     ("GROUP", "PARENT", "RUNTIME", "ENABLED", "LIMITS (used/amount)")))
    elif kind == "usage":
        print(f"day: {data.get('day')}")
        rows = [(k["key_id"], k.get("requests"), k.get("input"), k.get("output"), k.get("spend_micros"))
                for k in data.get("by_key", [])]
        print(_table(rows, ("KEY", "REQUESTS", "INPUT", "OUTPUT", "SPEND_MICROS")))
    else:
        print(json.dumps(data, indent=2, sort_keys=True))
    return 0


def main(argv: list[str]) -> int:
    """Run ``busbar admin <argv>``; returns the exit status (module docstring)."""
    try:
        a = _parser().parse_args(argv)
    except SystemExit as e:
        return EXIT_USAGE if e.code not in (0, None) else 0
    api = _Api(a.url or os.environ.get("BUSBAR_ADMIN_URL") or DEFAULT_URL,
               a.token or os.environ.get("BUSBAR_ADMIN_TOKEN"))
    try:
        kind: str | None
        if a.area == "keys":
            data, kind = _keys(api, a)
        elif a.area == "audit":
            data, kind = (api.call("GET", "/audit/verify"), "verify") if a.action == "verify" else (
                api.call("GET", "/audit", params={"limit": 1000}), "audit")
        elif a.area == "hooks":
            names = [a.name] if a.name else [h["name"] for h in api.call("GET", "/hooks")["items"]]
            data, kind = [api.call("GET", f"/hooks/{n}/status") for n in names], "hooks"
        else:
            data, kind = api.call("GET", f"/{a.area}"), a.area
    except _Failed as e:
        print(f"busbar admin: {e}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        api.client.close()
    if a.json:
        print(json.dumps(data, indent=2, sort_keys=True))
        return EXIT_FAILED if kind == "verify" and not data["ok"] else 0
    return _render(data, kind)
