"""Per-operation rate-card units charged end to end (docs/limits.md#operation-units): keys minted over
the admin API, bound to a group with a budget, used by the official SDKs; images, transcription
seconds, speech characters and rerank search units are charged at their rates (exact spend in the
group, key and day reports and in Prometheus), a request whose worst case (n images × per_image)
does not fit the budget is refused before any upstream call in the dialect's quota shape, and a
rate card that prices a unit for one model but not for another serving that operation is refused
at boot with a paste-ready line."""
from __future__ import annotations

import json
import time

import boto3
import cohere
import httpx
import openai
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from busbar_mock_provider.audio import TRANSCRIPT

from tests.support.gateway import BusbarProcess, free_port
from tests.support.waiting import wait_until

ADMIN_TOKEN = "adm-opcharges-41d"
CONFIG = """
listen: "127.0.0.1:{port}"
admin_listen: "127.0.0.1:ADMIN_PORT"
auth:
  chain: [ keys ]
  admin_auth: [ { admin-tokens: { token: { env: T_ADMIN_TOKEN } } } ]
advanced: { usage_flush_interval_ms: 50 }
metrics: { buffer_seconds: 60 }
providers:
  oa: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
  co: { protocol: cohere, base_url: MOCK, api_key: { env: T_COHERE_KEY } }
  gm: { protocol: gemini, base_url: MOCK, api_key: { env: T_GEMINI_KEY } }
  br: { protocol: bedrock, base_url: MOCK, api_key: { env: T_AWS_CREDS } }
models:
  img: { provider: oa, upstream_model: dall-e-3, operations: [images] }
  whisper: { provider: oa, upstream_model: whisper-1, operations: [audio] }
  tts: { provider: oa, upstream_model: tts-1, operations: [audio] }
  g4t: { provider: oa, upstream_model: gpt-4o-transcribe, operations: [audio] }
  rr: { provider: co, upstream_model: rerank-v3.5, operations: [rerank] }
  gem-stt: { provider: gm, upstream_model: gemini-2.0-flash, operations: [audio] }
  br-img: { provider: br, upstream_model: "amazon.titan-image-generator-v2:0", operations: [images] }
  gem-emb: { provider: gm, upstream_model: text-embedding-004, operations: [embeddings] }
pools:
  imgs: { members: [ { model: img } ] }
  stt: { members: [ { model: whisper } ] }
  voice: { members: [ { model: tts } ] }
  stt4o: { members: [ { model: g4t } ] }
  ranker: { members: [ { model: rr } ] }
  gem: { members: [ { model: gem-stt } ] }
  canvas: { members: [ { model: br-img } ] }
  gemb: { members: [ { model: gem-emb } ] }
rate_card:
  img: { per_image_utok: 40000 }
  whisper: { per_audio_second_utok: 250, per_character_utok: 0 }
  tts: { per_audio_second_utok: 0, per_character_utok: 15 }
  g4t: { input_utok: 6.0, output_utok: 10.0, per_audio_second_utok: 250, per_character_utok: 0 }
  rr: { per_search_unit_utok: 2000 }
  gem-stt: { output_utok: 1.0, per_audio_second_utok: 250, per_character_utok: 0 }
  br-img: { per_image_utok: 40000 }
  gem-emb: { input_utok: 10.0 }
groups:
  spend: { limits: [ { budget: 1000000, per: day } ] }
  tight: { limits: [ { budget: 100000, per: day } ] }
  gemg: { limits: [ { budget: 100000, per: day } ] }
  tight2: { limits: [ { budget: 100000, per: day } ] }
  embg: { limits: [ { budget: 100000, per: day } ] }
  fmts: { limits: [ { budget: 100000, per: day } ] }
  fmts4o: { limits: [ { budget: 1000000, per: day } ] }
"""

AUDIO = bytes(range(256)) * 156 + bytes(64)     # 40 000 bytes: 2.5 s at the mock's 16 kB per second
DOCS = ["Carson City is the capital of Nevada.", "Washington, D.C. is the capital of the United States."]


class Gw(BusbarProcess):
    def __init__(self, tmp, mock_url: str, store_yaml: str = "") -> None:  # noqa: ANN001
        port = free_port()
        text = CONFIG.replace("MOCK", mock_url).replace("ADMIN_PORT", str(port))
        if store_yaml:
            text = text.replace("advanced:", store_yaml + "\nadvanced:", 1)
        super().__init__(text, tmp,
                         env={"T_OPENAI_KEY": "sk-test", "T_COHERE_KEY": "co-test", "T_GEMINI_KEY": "g-test",
                             "T_AWS_CREDS": "AKIDEXAMPLE:secretkey", "T_ADMIN_TOKEN": ADMIN_TOKEN})
        self.admin = httpx.Client(base_url=f"http://127.0.0.1:{port}/api/v1/admin", timeout=30,
                                  headers={"authorization": f"Bearer {ADMIN_TOKEN}"})

    def mint(self, group: str, **extra) -> tuple[str, str]:  # noqa: ANN003
        r = self.admin.post("/keys", json={"name": f"k-{group}-{time.time_ns()}", "group": group, **extra})
        assert r.status_code == 201, r.text
        key_id, token = r.json()["id"], r.json()["token"]
        self.last = r.json()
        probe = {"model": "no-such-pool", "input": "x"}                     # 404 once the key is known
        wait_until(lambda: httpx.post(self.url + "/v1/embeddings", json=probe, timeout=5,
                                      headers={"authorization": f"Bearer {token}"}).status_code == 404,
                   what="the minted key synced")
        return key_id, token

    def stop(self) -> None:
        self.admin.close()
        super().stop()


@pytest.fixture(scope="module")
def gw(tmp_path_factory, mock):
    g = Gw(tmp_path_factory.mktemp("opcharges"), mock.url).start()
    yield g
    g.stop()


def _used(gw: Gw, group: str) -> tuple[int, int]:
    lim = gw.admin.get(f"/groups/{group}").json()["limits"][0]
    return lim["used"], lim["reserved"]


def test_each_operation_is_charged_its_units_at_its_rate(gw, mock):
    key_id, token = gw.mint("spend")
    with openai.OpenAI(base_url=gw.url + "/v1", api_key=token, max_retries=0) as oa:
        assert len(oa.images.generate(model="imgs", prompt="a red fox", n=3, response_format="b64_json").data) == 3
        assert _used(gw, "spend") == (120000, 0)                  # 3 images × 40 000 µ
        out = oa.audio.transcriptions.create(model="stt", file=("a.wav", AUDIO, "audio/wav"),
                                             response_format="verbose_json")
        assert out.duration == 2.5
        assert _used(gw, "spend") == (120625, 0)                  # 2.5 s × 250 µ
        with oa.audio.speech.with_streaming_response.create(model="voice", input="Hello there",
                                                            voice="alloy") as r:
            assert len(r.read()) == 1100
    wait_until(lambda: _used(gw, "spend") == (120790, 0), what="speech settled")   # 11 characters × 15 µ
    ranked = cohere.ClientV2(api_key=token, base_url=gw.url).rerank(
        model="ranker", query="capital of the United States?", documents=DOCS, request_options={"max_retries": 0})
    assert len(ranked.results) == 2
    assert _used(gw, "spend") == (122790, 0)                      # 1 search unit × 2 000 µ
    units = {"images": 3, "audio_ms": 2500, "characters": 11, "search_units": 1}
    wait_until(lambda: gw.admin.get(f"/keys/{key_id}/usage").json()["spend_micros"] == 122790,
               what="the metering flushed")
    mine = gw.admin.get(f"/keys/{key_id}/usage").json()
    assert {k: mine[k] for k in (*units, "input", "requests", "billable_requests", "budget_remaining")} == \
        {**units, "input": 0, "requests": 4, "billable_requests": 4, "budget_remaining": 1000000 - 122790}
    day = gw.admin.get("/usage").json()
    rows = {m["model"]: m for m in day["by_model"] if m["requests"] or any(m[u] for u in units)}
    assert {m: (r["spend_micros"], r["images"], r["audio_ms"], r["characters"], r["search_units"], r["requests"])
            for m, r in rows.items() if m in ("img", "whisper", "tts", "rr")} == {
        "img": (120000, 3, 0, 0, 0, 1), "whisper": (625, 0, 2500, 0, 0, 1), "tts": (165, 0, 0, 11, 0, 1),
        "rr": (2000, 0, 0, 0, 1, 1)}
    metrics = httpx.get(gw.url + "/metrics", headers={"authorization": f"Bearer {token}"}).text
    assert 'busbar_limit_spend_micros_total{model="img",pool="imgs"} 120000.0' in metrics
    assert 'busbar_limit_units_total{model="whisper",pool="stt",unit="audio_ms"} 2500.0' in metrics
    assert 'busbar_limit_units_total{model="rr",pool="ranker",unit="search_units"} 1.0' in metrics


def test_a_gemini_embedding_that_reports_no_tokens_is_still_charged(gw, mock):
    """The Gemini API reports no embedding tokens: the answer used to count 0, so a budget let a
    caller embed for free. Its inputs are counted as a reservation counts them (bytes / 4, up)."""
    _, token = gw.mint("embg")
    with openai.OpenAI(base_url=gw.url + "/v1", api_key=token, max_retries=0) as oa:
        out = oa.embeddings.create(model="gemb", input=["hello world", "x" * 40])
    assert len(out.data) == 2
    assert out.usage.prompt_tokens == 0                           # the answer says what the provider said
    assert _used(gw, "embg") == (130, 0)                          # ceil(11 / 4) + 40 / 4 = 13 tokens × 10 µ


FORMATS = {                                     # what the client receives for 2.5 s of audio
    "json": ("application/json", b'{"text":"%s"}' % TRANSCRIPT.encode()),
    "text": ("text/plain; charset=utf-8", TRANSCRIPT.encode() + b"\n"),
    "srt": ("text/plain; charset=utf-8", b"1\n00:00:00,000 --> 00:00:02,500\n%s\n\n" % TRANSCRIPT.encode()),
    "vtt": ("text/plain; charset=utf-8", b"WEBVTT\n\n00:00:00.000 --> 00:00:02.500\n%s\n\n" % TRANSCRIPT.encode()),
}


def test_every_transcription_format_is_charged_its_seconds(gw, mock):
    """json, text, srt and vtt report no duration: they used to be free. A whisper lane is asked for
    verbose_json and the answer written back in the client's format; each is charged 2.5 s × 250 µ."""
    key_id, token = gw.mint("fmts")
    with openai.OpenAI(base_url=gw.url + "/v1", api_key=token, max_retries=0) as oa:
        for n, (fmt, (ctype, body)) in enumerate(FORMATS.items(), 1):
            mock.clear()
            raw = oa.audio.transcriptions.with_raw_response.create(
                model="stt", file=("a.wav", AUDIO, "audio/wav"), response_format=fmt)
            assert (raw.headers["content-type"], raw.http_response.content) == (ctype, body)
            parsed = raw.parse()
            assert (parsed.text if fmt == "json" else parsed) == (TRANSCRIPT if fmt == "json" else body.decode())
            (sent,) = mock.requests()
            assert sent["body"]["response_format"] == "verbose_json"
            assert _used(gw, "fmts") == (625 * n, 0)
    wait_until(lambda: gw.admin.get(f"/keys/{key_id}/usage").json()["spend_micros"] == 2500,
               what="the metering flushed")
    mine = gw.admin.get(f"/keys/{key_id}/usage").json()
    assert (mine["audio_ms"], mine["requests"], mine["budget_remaining"]) == (10000, 4, 100000 - 2500)


def test_a_gpt4o_transcription_is_charged_the_tokens_its_json_reports(gw, mock):
    """gpt-4o-transcribe answers json or text only, with usage in tokens (no seconds): text is asked
    as json and written back as text; both are charged their tokens (25 audio × 6 µ + 10 × 10 µ)."""
    key_id, token = gw.mint("fmts4o")
    with openai.OpenAI(base_url=gw.url + "/v1", api_key=token, max_retries=0) as oa:
        mock.clear()
        out = oa.audio.transcriptions.create(model="stt4o", file=("a.wav", AUDIO, "audio/wav"))
        assert out.text == TRANSCRIPT and out.usage.type == "tokens"
        assert (out.usage.input_tokens, out.usage.output_tokens) == (25, 10)
        assert _used(gw, "fmts4o") == (250, 0)
        raw = oa.audio.transcriptions.with_raw_response.create(
            model="stt4o", file=("a.wav", AUDIO, "audio/wav"), response_format="text")
        assert (raw.headers["content-type"], raw.http_response.content) == \
            ("text/plain; charset=utf-8", TRANSCRIPT.encode() + b"\n")
        assert [r["body"].get("response_format") for r in mock.requests()] == [None, "json"]
        assert _used(gw, "fmts4o") == (500, 0)
        with pytest.raises(openai.BadRequestError) as e:           # the model's own refusal, not charged
            oa.audio.transcriptions.create(model="stt4o", file=("a.wav", AUDIO, "audio/wav"), response_format="srt")
        assert e.value.body["message"] == ("response_format 'srt' is not compatible with model "
                                           "'gpt-4o-transcribe'. Use 'json' or 'text' instead.")
    wait_until(lambda: gw.admin.get(f"/keys/{key_id}/usage").json()["spend_micros"] == 500,
               what="the metering flushed")
    mine = gw.admin.get(f"/keys/{key_id}/usage").json()
    assert (mine["input"], mine["output"], mine["audio_ms"], mine["billable_requests"]) == (50, 20, 0, 2)


def test_a_budget_refuses_the_worst_case_in_the_dialects_quota_shape(gw, mock):
    _, token = gw.mint("tight")
    with openai.OpenAI(base_url=gw.url + "/v1", api_key=token, max_retries=0) as oa:
        mock.clear()
        with pytest.raises(openai.RateLimitError) as e:          # 3 × 40 000 µ cannot fit 100 000 µ
            oa.images.generate(model="imgs", prompt="a red fox", n=3)
        assert mock.requests() == []
        assert e.value.body == {"message": "group 'tight': budget per day is exhausted (budget 100000)",
                                "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}
        assert len(oa.images.generate(model="imgs", prompt="a red fox", n=2).data) == 2
        assert _used(gw, "tight") == (80000, 0)
        with pytest.raises(openai.RateLimitError):               # 80 000 + 40 000 > 100 000
            oa.images.generate(model="imgs", prompt="a red fox", n=1)
    co = cohere.ClientV2(api_key=token, base_url=gw.url)
    assert co.rerank(model="ranker", query="q", documents=DOCS, request_options={"max_retries": 0}).results
    assert _used(gw, "tight") == (82000, 0)
    for _ in range(9):                                              # 9 × 2 000 µ more: 100 000 exactly
        co.rerank(model="ranker", query="q", documents=DOCS, request_options={"max_retries": 0})
    with pytest.raises(cohere.errors.TooManyRequestsError) as ce:
        co.rerank(model="ranker", query="q", documents=DOCS, request_options={"max_retries": 0})
    assert ce.value.body == {"message": "group 'tight': budget per day is exhausted (budget 100000)"}
    assert _used(gw, "tight") == (100000, 0)



def test_a_gemini_transcription_is_charged_its_seconds_and_its_tokens(gw, mock):
    _, token = gw.mint("gemg")
    with openai.OpenAI(base_url=gw.url + "/v1", api_key=token, max_retries=0) as oa:
        out = oa.audio.transcriptions.create(model="gem", file=("a.wav", AUDIO, "audio/wav"),
                                             response_format="verbose_json")
    assert out.duration == 2.5                                     # 80 AUDIO tokens / 32
    (req,) = mock.requests()
    assert req["path"] == "/v1beta/models/gemini-2.0-flash:generateContent"
    assert _used(gw, "gemg") == (635, 0)           # 2.5 s × 250 µ + 10 output tokens × 1 µ


def test_bedrock_refuses_the_image_worst_case_in_its_quota_shape(gw, mock):
    gw.mint("tight2", issue_aws_credential=True)
    key = gw.last
    c = boto3.client("bedrock-runtime", endpoint_url=gw.url, region_name="us-east-1",
                     aws_access_key_id=key["aws_access_key_id"], aws_secret_access_key=key["aws_secret_access_key"],
                     config=Config(retries={"total_max_attempts": 1, "mode": "standard"}))

    def invoke(n: int) -> dict:
        body = {"taskType": "TEXT_IMAGE", "textToImageParams": {"text": "a lighthouse"},
                "imageGenerationConfig": {"numberOfImages": n}}
        return json.loads(c.invoke_model(modelId="canvas", body=json.dumps(body))["body"].read())

    def served() -> bool:                # the AWS credential is usable once the key mirror synced it
        try:
            return len(invoke(1)["images"]) == 1
        except ClientError:
            return False
    wait_until(served, what="the minted AWS credential synced")
    assert _used(gw, "tight2") == (40000, 0)
    mock.clear()
    with pytest.raises(ClientError) as e:                           # 40 000 + 2 × 40 000 > 100 000
        invoke(2)
    err = e.value.response
    assert (err["ResponseMetadata"]["HTTPStatusCode"], err["Error"]["Code"], err["Error"]["Message"]) == (
        400, "ServiceQuotaExceededException", "group 'tight2': budget per day is exhausted (budget 100000)")
    assert mock.requests() == []
    assert len(invoke(1)["images"]) == 1
    assert _used(gw, "tight2") == (80000, 0)
