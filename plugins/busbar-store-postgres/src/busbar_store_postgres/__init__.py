"""busbar-store-postgres: the store contract on PostgreSQL through asyncpg, shared by a fleet.

Settings: ``url`` (``postgres://`` or ``postgresql://``; libpq's ``sslmode`` query parameter turns
TLS on: ``require``, ``verify-ca``, ``verify-full``, ``prefer``, ``allow``, ``disable``),
``pool_size`` (default 5) and ``connect_timeout_secs`` (default 5). The strict counters (on the
request path of strict limits) use a second, asyncpg-native pool of up to ``pool_size`` connections,
opened at their first use. A lost connection is detected
before use (``pool_pre_ping``) and replaced: an operation that fails on it reports the store
unavailable and the caller retries with backoff. The password never appears in an error or a log.
The schema and every operation are :class:`busbar_sdk.store.sql.SqlStore`'s. See docs/stores.md.
"""
from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg
from busbar_sdk.store import StoreInvalid, export_store
from busbar_sdk.store.settings import check_settings, package_spec, redact_url
from busbar_sdk.store.sql import SqlStore
from sqlalchemy.ext.asyncio import create_async_engine

__all__ = ["PostgresStore", "plugin"]

__version__ = "1.5.0"

_SPEC = package_spec(__name__)      # settings_schema.json: the rules the manifest declares
_SSLMODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")


class PostgresStore(SqlStore):
    """:class:`SqlStore` on ``postgresql+asyncpg``; build it with :meth:`from_settings`."""

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> PostgresStore:
        """Validate the settings and build the (unconnected) store.

        Raises:
            StoreInvalid: settings against settings_schema.json (unknown, missing, mistyped,
                out of range: :func:`check_settings`), a URL that is not ``postgres://`` /
                ``postgresql://`` or has no database, an unknown ``sslmode``.
        """
        s = check_settings(settings, _SPEC, "postgres")
        url: str = s["url"]
        parts = urlsplit(url)
        if not parts.hostname or not parts.path.strip("/"):
            raise StoreInvalid(f"store.settings.url: {redact_url(url)} needs a host and a database name "
                               f"(postgres://user:password@host:5432/busbar)")
        query = dict(parse_qsl(parts.query))
        sslmode = query.pop("sslmode", None)
        connect_args: dict[str, Any] = {"timeout": s["connect_timeout_secs"]}
        if sslmode is not None:
            if sslmode not in _SSLMODES:
                raise StoreInvalid(f"store.settings.url: sslmode={sslmode} is not one of {', '.join(_SSLMODES)}")
            connect_args["ssl"] = sslmode
        target = urlunsplit(("postgresql+asyncpg", parts.netloc, parts.path, urlencode(query), ""))
        engine = create_async_engine(target, pool_size=s["pool_size"], max_overflow=0, pool_pre_ping=True,
                                     pool_recycle=1800, connect_args=connect_args)
        dsn = urlunsplit(("postgresql", parts.netloc, parts.path, urlencode(query), ""))

        def strict_pool() -> Any:        # the strict counters' own pool (on the request path; opened lazily)
            return asyncpg.create_pool(dsn, min_size=0, max_size=s["pool_size"], max_inactive_connection_lifetime=1800,
                                       **connect_args)
        return cls(engine, backend="postgres", where=redact_url(url), scrub=(parts.password or "",),
                   driver_pool=strict_pool)


plugin = export_store(PostgresStore)
