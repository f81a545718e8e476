"""busbar-store-sqlite: the store contract on one SQLite file (WAL, ``BEGIN IMMEDIATE`` writes).

Settings: ``db_path`` (required; its directory must exist and be writable) and
``busy_timeout_ms`` (default 5000: how long a writer waits for another process's lock). Several
Busbar processes on one machine may share the file; across machines use postgres or valkey.
The schema and every operation are :class:`busbar_sdk.store.sql.SqlStore`'s. See docs/stores.md.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from busbar_sdk.store import StoreInvalid, export_store
from busbar_sdk.store.settings import check_settings, package_spec
from busbar_sdk.store.sql import SqlStore
from sqlalchemy import event
from sqlalchemy.ext.asyncio import create_async_engine

__all__ = ["SqliteStore", "plugin"]

__version__ = "1.5.0"

_SPEC = package_spec(__name__)      # settings_schema.json: the rules the manifest declares


class SqliteStore(SqlStore):
    """:class:`SqlStore` on ``sqlite+aiosqlite``; build it with :meth:`from_settings`."""

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> SqliteStore:
        """Validate the settings and build the (unconnected) store.

        Raises:
            StoreInvalid: settings against settings_schema.json (unknown, missing, mistyped,
                out of range: :func:`check_settings`), or a ``db_path`` whose
                directory is missing or not writable (the message names the path).
        """
        s = check_settings(settings, _SPEC, "sqlite")
        timeout = s["busy_timeout_ms"]
        path = Path(s["db_path"]).expanduser()
        parent = path.parent.resolve()
        if not parent.is_dir():
            raise StoreInvalid(f"store.settings.db_path: directory {parent} does not exist; create it or choose "
                               f"another path")
        if not os.access(parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.R_OK | os.W_OK)):
            raise StoreInvalid(f"store.settings.db_path: {path} is not writable by this process; fix its "
                               f"permissions or choose another path")
        engine = create_async_engine(f"sqlite+aiosqlite:///{path}")

        @event.listens_for(engine.sync_engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None      # we issue BEGIN ourselves (below)
            cur = dbapi_conn.cursor()
            cur.execute(f"PRAGMA busy_timeout = {int(timeout)}")
            cur.execute("PRAGMA journal_mode = WAL")
            cur.execute("PRAGMA synchronous = NORMAL")
            cur.close()

        @event.listens_for(engine.sync_engine, "begin")
        def _on_begin(conn: Any) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE")   # take the write lock up front: no upgrade deadlock

        return cls(engine, backend="sqlite", where=str(path))


plugin = export_store(SqliteStore)
