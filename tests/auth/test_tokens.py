"""The bbk_ token codec and the signing keyring (busbar.auth.tokens, busbar.auth.signing)."""
from __future__ import annotations

import asyncio
import base64
import os
from pathlib import Path

import orjson
import pytest
from busbar.auth.signing import (
    GENERATED_FILE,
    STORE_META,
    SigningKeyError,
    generate_text,
    keyring_from_text,
    load_keyring,
    rotated_text,
)
from busbar.auth.tokens import TokenClaims, TokenInvalid, mint, verify
from busbar_sdk.store import MemoryStore

NOW = 1_800_000_000


@pytest.fixture
def ring():
    return keyring_from_text(generate_text(), "test")


def test_mint_then_verify_returns_the_claims(ring):
    token = mint(ring, "vk_1", NOW + 60, generation=3)
    assert token.startswith("bbk_")
    payload = orjson.loads(base64.urlsafe_b64decode(token[4:].split(".")[0] + "=="))
    assert payload == {"sub": "vk_1", "exp": NOW + 60, "kid": ring.kid, "g": 3}
    assert verify(ring, token, NOW) == TokenClaims("vk_1", NOW + 60, ring.kid, 3)


@pytest.mark.parametrize("bad", [
    "", "bbk_", "sk-garbage", "bbk_abc.def", "bbk_" + "A" * 40 + "." + "B" * 86,
])
def test_garbage_is_one_opaque_failure(ring, bad):
    with pytest.raises(TokenInvalid, match=r"^invalid virtual key$"):
        verify(ring, bad, NOW)


def test_expired_tampered_and_foreign_tokens_fail_the_same_way(ring):
    token = mint(ring, "vk_1", NOW + 60)
    with pytest.raises(TokenInvalid, match=r"^invalid virtual key$"):
        verify(ring, token, NOW + 60)                       # exp is exclusive
    _payload, sig = token[4:].split(".")
    forged = base64.urlsafe_b64encode(orjson.dumps({"sub": "vk_2", "exp": NOW + 60, "kid": ring.kid, "g": 0}))
    with pytest.raises(TokenInvalid, match=r"^invalid virtual key$"):
        verify(ring, f"bbk_{forged.rstrip(b'=').decode()}.{sig}", NOW)
    other = keyring_from_text(generate_text(), "other")
    with pytest.raises(TokenInvalid, match=r"^invalid virtual key$"):
        verify(other, token, NOW)


def test_rotation_keeps_old_tokens_verifying_and_signs_with_the_new_key(ring):
    text = generate_text()
    old = keyring_from_text(text, "t")
    token = mint(old, "vk_1", NOW + 60)
    new = keyring_from_text(rotated_text(text), "t")
    assert new.kid != old.kid and set(new.public) == {new.kid, old.kid}
    assert verify(new, token, NOW).kid == old.kid
    assert verify(new, mint(new, "vk_1", NOW + 60), NOW).kid == new.kid


def test_a_base64_seed_is_a_signing_key():
    seed = base64.b64encode(bytes(range(32))).decode()
    ring = keyring_from_text(seed + "\n", "auth.signing_key")
    assert verify(ring, mint(ring, "vk_1", NOW + 1), NOW).sub == "vk_1"


@pytest.mark.parametrize(("text", "fault"), [
    ("not a key", "auth.signing_key: is neither PEM nor a base64 32-byte ed25519 seed; generate one with "
                  "'openssl genpkey -algorithm ed25519'"),
    ("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
     "auth.signing_key: a PEM block does not parse as a key (ValueError); generate one with "
     "'openssl genpkey -algorithm ed25519'"),
])
def test_bad_key_text_is_one_line(text, fault):
    with pytest.raises(SigningKeyError) as e:
        keyring_from_text(text, "auth.signing_key")
    assert str(e.value) == fault


def test_generated_file_is_0600_next_to_the_config_and_reused(tmp_path: Path):
    cfg = tmp_path / "config.yaml"
    first = asyncio.run(load_keyring(None, config_path=cfg, store=None))
    path = tmp_path / GENERATED_FILE
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert first.source == f"file:{path}"
    again = asyncio.run(load_keyring(None, config_path=cfg, store=None))
    assert again.kid == first.kid


def test_a_fleet_shares_the_key_through_the_store_meta():
    async def run():
        store = MemoryStore()
        await store.open()
        a = await load_keyring(None, config_path=Path("/nonexistent/config.yaml"), store=store)
        b = await load_keyring(None, config_path=Path("/nonexistent/config.yaml"), store=store)
        return a, b, await store.get_meta(STORE_META)
    a, b, meta = asyncio.run(run())
    assert a.kid == b.kid and a.source == "store" and meta is not None and "PRIVATE KEY" in meta


def test_a_configured_key_wins(tmp_path: Path):
    text = generate_text()
    ring = asyncio.run(load_keyring(text, config_path=tmp_path / "config.yaml", store=None))
    assert ring.kid == keyring_from_text(text, "x").kid and ring.source == "auth.signing_key"
    assert not (tmp_path / GENERATED_FILE).exists()


def _kid_of_generated(config_path: str) -> str:
    return asyncio.run(load_keyring(None, config_path=Path(config_path), store=None)).kid


def test_processes_racing_on_first_boot_share_one_generated_key(tmp_path: Path):
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(4) as pool:
        kids = list(pool.map(_kid_of_generated, [str(tmp_path / "config.yaml")] * 8))
    assert len(set(kids)) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [GENERATED_FILE]    # no temporary file left behind


_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def aliases(segment: str) -> list[str]:
    """Every other spelling of ``segment`` that a lenient base64url decoder maps to the same bytes."""
    data = base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
    out = []
    for c in _ALPHABET:
        alt = segment[:-1] + c
        if alt != segment and base64.urlsafe_b64decode(alt + "=" * (-len(alt) % 4)) == data:
            out.append(alt)
    return out


def test_a_signature_with_stray_low_bits_is_refused(ring):
    token = mint(ring, "vk_1", NOW + 60)
    payload, sig = token[4:].split(".")
    alts = aliases(sig)
    assert len(alts) == 15                  # 86 chars carry 516 bits for 512: 4 spare bits
    for alt in alts:
        with pytest.raises(TokenInvalid, match=r"^invalid virtual key$"):
            verify(ring, f"bbk_{payload}.{alt}", NOW)
    assert verify(ring, token, NOW).sub == "vk_1"


def test_a_payload_with_stray_low_bits_is_refused(ring):
    token = next(t for t in (mint(ring, "vk_" + "x" * n, NOW + 60) for n in range(1, 4))
                 if len(t[4:].split(".")[0]) % 4)
    payload, sig = token[4:].split(".")
    alts = aliases(payload)
    assert alts
    for alt in alts:
        with pytest.raises(TokenInvalid, match=r"^invalid virtual key$"):
            verify(ring, f"bbk_{alt}.{sig}", NOW)
