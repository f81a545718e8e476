"""Call the quickstart pool with the official OpenAI and Anthropic SDKs, streaming and not.

Prints each answer and the ``x-busbar-route-target`` header naming the lane that served it.
Usage: python examples/quickstart/client.py [BASE_URL]   (default http://127.0.0.1:8080)
"""
import sys

import anthropic
import openai

BASE = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080"
POOL = "assistant"


def openai_calls() -> None:
    client = openai.OpenAI(base_url=f"{BASE}/v1", api_key="unused-open-front-door", max_retries=0)
    for _ in range(2):
        raw = client.chat.completions.with_raw_response.create(
            model=POOL, messages=[{"role": "user", "content": "Say hello in five words."}])
        reply = raw.parse()
        print(f"[openai sdk]    target={raw.headers['x-busbar-route-target']:<13} "
              f"{reply.choices[0].message.content!r}")
    with client.chat.completions.with_streaming_response.create(
            model=POOL, stream=True, messages=[{"role": "user", "content": "Stream a greeting."}]) as resp:
        text = "".join(c.choices[0].delta.content or "" for c in resp.parse() if c.choices)
        print(f"[openai stream] target={resp.headers['x-busbar-route-target']:<13} {text!r}")


def anthropic_calls() -> None:
    client = anthropic.Anthropic(base_url=BASE, api_key="unused-open-front-door", max_retries=0)
    for _ in range(2):
        raw = client.messages.with_raw_response.create(
            model=POOL, max_tokens=256, messages=[{"role": "user", "content": "Say hello in five words."}])
        msg = raw.parse()
        print(f"[anthropic sdk] target={raw.headers['x-busbar-route-target']:<13} {msg.content[0].text!r}")
    with client.messages.with_streaming_response.create(
            model=POOL, max_tokens=256, stream=True,
            messages=[{"role": "user", "content": "Stream a greeting."}]) as resp:
        text = "".join(e.delta.text for e in resp.parse() if e.type == "content_block_delta"
                       and e.delta.type == "text_delta")
        print(f"[anthropic strm] target={resp.headers['x-busbar-route-target']:<13} {text!r}")


if __name__ == "__main__":
    openai_calls()
    anthropic_calls()
