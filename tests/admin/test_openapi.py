"""The admin API's OpenAPI 3.1 document: the committed file is what the code generates (drift fails
this test: regenerate with ``python -m busbar.admin.openapi --write``), and schemathesis, bounded to a
few examples per operation, finds no input that makes a real ``busbar`` answer a 5xx."""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from busbar.admin.openapi import document_text
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from tests.admin.conftest import PREFIX, TOKEN, AdminGateway

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "docs" / "admin-openapi.json"


def test_committed_document_matches_the_code() -> None:
    assert COMMITTED.read_text() == document_text(), (
        "docs/admin-openapi.json is stale: run .venv/bin/python -m busbar.admin.openapi --write")


def test_every_operation_states_its_scope_and_error_shape() -> None:
    doc = json.loads(COMMITTED.read_text())
    assert doc["openapi"] == "3.1.0"
    ops = [(p, m, op) for p, item in doc["paths"].items() for m, op in item.items()]
    assert len(ops) >= 17
    for path, method, op in ops:
        assert path.startswith(PREFIX), path
        assert op["x-busbar-required-scope"] in ("read-only", "mint", "hooks-register", "full"), (path, method)
    assert set(doc["components"]["schemas"]["ErrorBody"]["properties"]) == {"error"}


schema = schemathesis.openapi.from_dict(json.loads(COMMITTED.read_text()))


@pytest.fixture(scope="module")
def fuzz_gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminGateway]:
    g = AdminGateway(tmp_path_factory.mktemp("fuzz"))
    g.start()
    yield g
    g.stop()


@schema.parametrize()
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_generated_input_is_a_server_error(case: schemathesis.Case, fuzz_gw: AdminGateway) -> None:
    response = case.call(base_url=fuzz_gw.admin, headers={"authorization": f"Bearer {TOKEN}"}, timeout=30)
    case.validate_response(response, checks=[not_a_server_error])
