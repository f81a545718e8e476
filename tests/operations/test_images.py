"""Image generation through real busbar + mock processes: the openai SDK's ``images.generate``
(b64 and URL answers), boto3 ``invoke_model`` with a ``TEXT_IMAGE`` body and Gemini ``:predict``,
against OpenAI, Gemini (Imagen) and Bedrock lanes; edits and variations keep their own 404."""
from __future__ import annotations

import json

import httpx
import pytest
from busbar_mock_provider.images import PNG_B64

CONFIG = """
listen: "127.0.0.1:{port}"
providers:
  oa: { protocol: openai, base_url: MOCK, api_key: { env: T_OPENAI_KEY } }
  gm: { protocol: gemini, base_url: MOCK, api_key: { env: T_GEMINI_KEY } }
  br: { protocol: bedrock, base_url: MOCK, api_key: { env: T_AWS_CREDS } }
models:
  dalle: { provider: oa, upstream_model: dall-e-3 }
  imagen: { provider: gm, upstream_model: imagen-3.0-generate-002 }
  titan-image: { provider: br, upstream_model: "amazon.titan-image-generator-v2:0" }
pools:
  img-openai: { members: [ { model: dalle } ] }
  img-gm: { members: [ { model: imagen } ] }
  img-bedrock: { members: [ { model: titan-image } ] }
  img-fo: { members: [ { model: imagen, weight: 100 }, { model: titan-image } ] }
"""
PATHS = {"img-openai": "/v1/images/generations", "img-gm": "/v1beta/models/imagen-3.0-generate-002:predict",
         "img-bedrock": "/model/amazon.titan-image-generator-v2:0/invoke"}


def _body(mock):
    (sent,) = mock.requests()
    return sent["path"], {k: v for k, v in sent["body"].items() if k not in ("model", "stream")} \
        if sent["path"] != PATHS["img-openai"] else sent["body"]


@pytest.mark.parametrize("pool", list(PATHS))
def test_openai_sdk_b64_every_lane(oa, mock, pool):
    raw = oa.images.with_raw_response.generate(model=pool, prompt="a lighthouse", n=2, size="1536x1024",
                                                response_format="b64_json")
    assert [d.b64_json for d in raw.parse().data] == [PNG_B64, PNG_B64]
    path, body = _body(mock)
    assert path == PATHS[pool]
    if pool == "img-openai":
        assert body == {"model": "dall-e-3", "prompt": "a lighthouse", "n": 2, "size": "1536x1024",
                        "response_format": "b64_json"}
    elif pool == "img-gm":
        assert body == {"instances": [{"prompt": "a lighthouse"}], "parameters": {"sampleCount": 2,
                                                                                  "aspectRatio": "4:3"}}
    else:
        assert body == {"taskType": "TEXT_IMAGE", "textToImageParams": {"text": "a lighthouse"},
                        "imageGenerationConfig": {"numberOfImages": 2, "width": 1536, "height": 1024}}


def test_openai_sdk_url_same_protocol_and_across(oa, mock):
    same = oa.images.generate(model="img-openai", prompt="a fox")
    assert same.data[0].url.startswith("https://mock-images.invalid/img-")
    across = oa.images.generate(model="img-bedrock", prompt="a fox", response_format="url")
    assert across.data[0].url == f"data:image/png;base64,{PNG_B64}"        # busbar hosts no files


@pytest.mark.parametrize("pool", list(PATHS))
def test_boto3_text_image_body_every_lane(br, pool):
    r = br.invoke_model(modelId=pool, body=json.dumps({
        "taskType": "TEXT_IMAGE", "textToImageParams": {"text": "a boat"},
        "imageGenerationConfig": {"numberOfImages": 1, "width": 1024, "height": 1024}}))
    assert json.loads(r["body"].read()) == {"images": [PNG_B64], "error": None}


@pytest.mark.parametrize("pool", list(PATHS))
def test_gemini_predict_every_lane(gw, pool):
    r = httpx.post(f"{gw.url}/v1beta/models/{pool}:predict", headers={"x-goog-api-key": "x"},
                   json={"instances": [{"prompt": "a bird"}], "parameters": {"sampleCount": 1, "aspectRatio": "1:1"}})
    assert r.status_code == 200
    assert r.json() == {"predictions": [{"bytesBase64Encoded": PNG_B64, "mimeType": "image/png"}]}


def test_images_fail_over_across_protocols(oa, mock):
    mock.script([{"match": {"model": "imagen-3.0-generate-002"}, "times": 1, "response": {"status": 503}}])
    raw = oa.images.with_raw_response.generate(model="img-fo", prompt="x", response_format="b64_json")
    assert raw.headers["x-busbar-route-target"] == "titan-image"
    assert [r["path"] for r in mock.requests()] == [PATHS["img-gm"], PATHS["img-bedrock"]]


def test_bad_image_bodies_are_400(gw):
    r = httpx.post(gw.url + "/v1/images/generations", json={"model": "img-openai", "prompt": "x", "n": 50})
    assert r.status_code == 400
    assert r.json()["error"]["message"] == "'n' must be an integer from 1 to 10"
    b = httpx.post(gw.url + "/model/img-openai/invoke", json={"taskType": "TEXT_IMAGE", "textToImageParams": {}})
    assert b.status_code == 400
    assert b.json() == {"message": "'textToImageParams.text' is required: a non-empty string"}


def test_negative_prompt_dropped_to_openai_is_named(gw, mock):
    r = httpx.post(gw.url + "/model/img-openai/invoke", json={
        "taskType": "TEXT_IMAGE", "textToImageParams": {"text": "a boat", "negativeText": "fog"}})
    assert r.status_code == 200
    assert r.headers["x-busbar-translation-dropped"] == "textToImageParams.negativeText"
    r = httpx.post(gw.url + "/model/img-gm/invoke", json={
        "taskType": "TEXT_IMAGE", "textToImageParams": {"text": "a boat", "negativeText": "fog"}})
    assert "x-busbar-translation-dropped" not in r.headers
    assert mock.requests()[-1]["body"]["parameters"]["negativePrompt"] == "fog"
