"""Front-door hardening through a real busbar process (``auth.chain: [keys]``, keys minted over its
admin API): one token spelling per key, ad-hoc routes need an explicit grant, the catalog and
per-pool health are behind the chain, the key is checked before the body is parsed, and a repeated
credential header is refused (docs/auth.md).
"""
from __future__ import annotations

import pytest

from tests.auth.conftest import config
from tests.auth.shapes import assert_refused, post
from tests.auth.test_admin_keys_e2e import Gateway
from tests.auth.test_tokens import aliases


@pytest.fixture(scope="module")
def gw(tmp_path_factory, mock):
    g = Gateway(config(), tmp_path_factory.mktemp("hardening"), mock.url)
    g.start()
    yield g
    g.stop()


def test_only_the_minted_spelling_of_a_token_is_accepted(gw, mock):
    token = gw.mint()["token"]
    assert post(gw.url, "openai", {"authorization": f"Bearer {token}"}).status_code == 200
    mock.clear()
    payload, sig = token.split(".")
    for alt in aliases(sig):
        assert_refused(post(gw.url, "openai", {"authorization": f"Bearer {payload}.{alt}"}), "openai")
    assert mock.requests() == []
