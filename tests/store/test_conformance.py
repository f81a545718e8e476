"""The store conformance suite (``busbar_sdk.testing.store_conformance``) on every first-party
backend: memory, and the sqlite, postgres and valkey plugins as signed tarballs, each call crossing
the plugin wire. PostgreSQL and Redis are the machine's real servers."""
from __future__ import annotations

from collections.abc import Callable

import pytest
from busbar_sdk.store import Store
from busbar_sdk.testing.store_conformance import StoreConformance


class TestMemoryStore(StoreConformance):
    shared_handles = False

    @pytest.fixture
    def store_factory(self, store_backend: Callable[[str], Callable[[], Store]]) -> Callable[[], Store]:
        return store_backend("memory")


class TestSqliteStore(StoreConformance):
    @pytest.fixture
    def store_factory(self, store_backend: Callable[[str], Callable[[], Store]]) -> Callable[[], Store]:
        return store_backend("sqlite")


class TestPostgresStore(StoreConformance):
    @pytest.fixture
    def store_factory(self, store_backend: Callable[[str], Callable[[], Store]]) -> Callable[[], Store]:
        return store_backend("postgres")


class TestValkeyStore(StoreConformance):
    @pytest.fixture
    def store_factory(self, store_backend: Callable[[str], Callable[[], Store]]) -> Callable[[], Store]:
        return store_backend("valkey")
