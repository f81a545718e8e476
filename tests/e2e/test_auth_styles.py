"""Egress auth styles through a real busbar: api-key (Azure), bearer, oauth-client-credentials
(RFC 6749 §4.4) and jwt-bearer (RFC 7523), the token endpoints served by this test's own server."""
from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse

import jwt
import openai
import pytest
import uvicorn
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.support.gateway import free_port

RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
PEM = RSA_KEY.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()


class TokenServer:
    """A minimal OAuth token endpoint: client-credentials (Basic auth) and jwt-bearer grants."""

    def __init__(self):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/token"
        self.grants: list[dict] = []
        self.n = 0

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return
        body = b""
        while True:
            msg = await receive()
            body += msg.get("body", b"")
            if not msg.get("more_body"):
                break
        form = dict(urllib.parse.parse_qsl(body.decode()))
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        record = {"form": form, "authorization": headers.get("authorization")}
        status, out = 200, None
        if form.get("grant_type") == "client_credentials":
            user, _, secret = base64.b64decode(headers["authorization"].split()[1]).decode().partition(":")
            if (user, secret) != ("my-client", "s3cret"):
                status, out = 401, {"error": "invalid_client"}
        elif form.get("grant_type") == "urn:ietf:params:oauth:grant-type:jwt-bearer":
            claims = jwt.decode(form["assertion"], RSA_KEY.public_key(), algorithms=["RS256"],
                                audience=self.url)
            record["claims"] = claims
        else:
            status, out = 400, {"error": "unsupported_grant_type"}
        self.grants.append(record)
        if out is None:
            self.n += 1
            out = {"access_token": f"tok-{self.n}", "token_type": "Bearer", "expires_in": 62}
        data = json.dumps(out).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": data})


@pytest.fixture(scope="module")
def token_server():
    ts = TokenServer()
    server = uvicorn.Server(uvicorn.Config(ts, host="127.0.0.1", port=ts.port, log_level="warning",
                                           lifespan="off"))
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    while not server.started:
        time.sleep(0.02)
    yield ts
    server.should_exit = True
    t.join(5)


CONFIG = """
listen: "127.0.0.1:{port}"
providers:
  azure:
    protocol: openai
    base_url: MOCK
    path: /openai/deployments/gpt-4o/v1/chat/completions?api-version=2024-02-01
    auth: api-key
    api_key: { env: AZ_KEY }
  entra:
    protocol: openai
    base_url: MOCK
    auth: oauth-client-credentials
    token_url: TOKEN_URL
    scope: https://cognitiveservices.azure.com/.default
    api_key: { env: CC_CREDS }
  vertexish:
    protocol: openai
    base_url: MOCK
    auth: jwt-bearer
    api_key: { file: SA_FILE }
  vertex-delegated:
    protocol: openai
    base_url: MOCK
    auth: jwt-bearer
    subject: admin@example.com
    api_key: { file: SA_FILE }
models:
  az: { provider: azure }
  cc: { provider: entra }
  sa: { provider: vertexish }
  sa-sub: { provider: vertex-delegated }
"""


@pytest.fixture(scope="module")
def gw(gateway_factory, mock, token_server, tmp_path_factory):
    sa = tmp_path_factory.mktemp("sa") / "sa.json"
    sa.write_text(json.dumps({"type": "service_account", "client_email": "svc@proj.iam.gserviceaccount.com",
                              "private_key": PEM, "private_key_id": "kid-1",
                              "token_uri": token_server.url}))
    cfg = CONFIG.replace("TOKEN_URL", token_server.url).replace("SA_FILE", str(sa))
    return gateway_factory(cfg, mock.url, env={"AZ_KEY": "az-secret", "CC_CREDS": "my-client:s3cret"})


def call(gw, model):
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0)
    return client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])


def test_azure_api_key_header_and_static_path(gw, mock):
    assert call(gw, "az").choices[0].finish_reason == "stop"
    req = mock.requests()[-1]
    assert req["path"] == "/openai/deployments/gpt-4o/v1/chat/completions"
    assert "api-version=2024-02-01" in json.dumps(req["query"])
    assert req["headers"]["api-key"] == "az-secret"
    assert "authorization" not in req["headers"]


def test_oauth_client_credentials_mints_and_caches(gw, mock, token_server):
    before = len(token_server.grants)
    call(gw, "cc")
    call(gw, "cc")
    grants = token_server.grants[before:]
    assert len(grants) == 1                                      # cached for the second call
    assert grants[0]["form"] == {"grant_type": "client_credentials",
                                 "scope": "https://cognitiveservices.azure.com/.default"}
    assert grants[0]["authorization"] == "Basic " + base64.b64encode(b"my-client:s3cret").decode()
    token = mock.requests()[-1]["headers"]["authorization"]
    assert token.startswith("Bearer tok-")
    time.sleep(2.2)                                              # 62 s lifetime - 60 s refresh margin
    call(gw, "cc")
    assert len(token_server.grants[before:]) == 2                # refreshed
    assert mock.requests()[-1]["headers"]["authorization"] != token


def test_jwt_bearer_assertion_claims(gw, mock, token_server):
    before = len(token_server.grants)
    call(gw, "sa")
    call(gw, "sa-sub")
    plain, delegated = token_server.grants[before:before + 2]
    c = plain["claims"]
    assert c["iss"] == "svc@proj.iam.gserviceaccount.com" and c["aud"] == token_server.url
    assert c["scope"] == "https://www.googleapis.com/auth/cloud-platform"
    assert "sub" not in c # opt-in only (``subject``: docs/catalog.md#fields)
    assert c["exp"] - c["iat"] == 3600
    d = delegated["claims"]
    assert d["sub"] == "admin@example.com"
    assert mock.requests()[-1]["headers"]["authorization"].startswith("Bearer tok-")
