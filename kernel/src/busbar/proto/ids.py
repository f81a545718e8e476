"""Random native ids: the characters of a fresh ``msg_01…`` / ``chatcmpl-…`` / ``call_gm_…`` id."""

from __future__ import annotations

import os

B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
"""The base62 alphabet (digits, upper, lower) of Anthropic, OpenAI and minted call ids."""


def random_chars(alphabet: str, length: int, entropy_bytes: int) -> str:
    """``length`` characters of ``alphabet`` drawn from ``entropy_bytes`` random bytes (enough
    bytes for ``length`` digits in base ``len(alphabet)``)."""
    n = int.from_bytes(os.urandom(entropy_bytes), "big")
    chars = []
    for _ in range(length):
        n, r = divmod(n, len(alphabet))
        chars.append(alphabet[r])
    return "".join(chars)
