"""One adapter per official SDK for the protocol matrix: text, stream, tool round trip, rate limit.

Each adapter takes the gateway base URL and drives the SDK exactly as an application would (the
SDK's own retries disabled so a 429 surfaces at once).
"""
from __future__ import annotations

import json

PROVIDERS = ("openai", "responses", "anthropic", "gemini", "bedrock", "cohere")

WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}

PROTOCOL_ERRORS = {
    "openai": (429, {"error": {"message": "Rate limit reached", "type": "requests", "param": None,
                               "code": "rate_limit_exceeded"}}, {}),
    "responses": (429, {"error": {"message": "Rate limit reached", "type": "requests", "param": None,
                                  "code": "rate_limit_exceeded"}}, {}),
    "anthropic": (429, {"type": "error", "error": {"type": "rate_limit_error", "message": "Rate limited"}},
                  {}),
    "gemini": (429, {"error": {"code": 429, "message": "Resource has been exhausted",
                               "status": "RESOURCE_EXHAUSTED"}}, {}),
    "bedrock": (429, {"message": "Too many requests, please wait before trying again."},
                {"x-amzn-errortype": "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/"}),
    "cohere": (429, {"message": "You are using a Trial key, which is limited to 10 API calls / minute."}, {}),
}


class OpenAIChat:
    def __init__(self, url):
        import openai
        self.openai = openai
        self.c = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=20)

    def text(self, pool, prompt):
        return self.c.chat.completions.create(model=pool, messages=[{"role": "user", "content": prompt}]) \
            .choices[0].message.content

    def stream(self, pool, prompt):
        chunks = self.c.chat.completions.create(model=pool, stream=True,
                                                messages=[{"role": "user", "content": prompt}])
        return "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)

    def tool_round_trip(self, pool, tool_result):
        tools = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_SCHEMA}}]
        msgs = [{"role": "user", "content": "weather?"}]
        first = self.c.chat.completions.create(model=pool, messages=msgs, tools=tools)
        call = first.choices[0].message.tool_calls[0]
        msgs += [first.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": tool_result}]
        second = self.c.chat.completions.create(model=pool, messages=msgs, tools=tools)
        return call.function.name, json.loads(call.function.arguments), second.choices[0].message.content

    def expect_rate_limited(self, pool):
        try:
            self.text(pool, "x")
        except self.openai.RateLimitError as e:
            assert e.status_code == 429
            return
        raise AssertionError("no RateLimitError")


class OpenAIResponses(OpenAIChat):
    def text(self, pool, prompt):
        return self.c.responses.create(model=pool, input=prompt).output_text

    def stream(self, pool, prompt):
        with self.c.responses.stream(model=pool, input=prompt) as s:
            deltas = "".join(e.delta for e in s if e.type == "response.output_text.delta")
            final = s.get_final_response()
        assert final.output_text == deltas
        return deltas

    def tool_round_trip(self, pool, tool_result):
        tools = [{"type": "function", "name": "get_weather", "parameters": WEATHER_SCHEMA}]
        first = self.c.responses.create(model=pool, input="weather?", tools=tools)
        call = next(o for o in first.output if o.type == "function_call")
        follow = [{"role": "user", "content": "weather?"}, call.model_dump(exclude_none=True),
                  {"type": "function_call_output", "call_id": call.call_id, "output": tool_result}]
        second = self.c.responses.create(model=pool, input=follow, tools=tools)
        return call.name, json.loads(call.arguments), second.output_text


class Anthropic:
    def __init__(self, url):
        import anthropic
        self.anthropic = anthropic
        self.c = anthropic.Anthropic(base_url=url, api_key="x", max_retries=0, timeout=20)

    def text(self, pool, prompt):
        m = self.c.messages.create(model=pool, max_tokens=256, messages=[{"role": "user", "content": prompt}])
        return "".join(b.text for b in m.content if b.type == "text")

    def stream(self, pool, prompt):
        with self.c.messages.stream(model=pool, max_tokens=256,
                                    messages=[{"role": "user", "content": prompt}]) as s:
            return "".join(s.text_stream)

    def tool_round_trip(self, pool, tool_result):
        tools = [{"name": "get_weather", "input_schema": WEATHER_SCHEMA}]
        msgs = [{"role": "user", "content": "weather?"}]
        first = self.c.messages.create(model=pool, max_tokens=256, messages=msgs, tools=tools)
        use = next(b for b in first.content if b.type == "tool_use")
        msgs += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                               "content": tool_result}]}]
        second = self.c.messages.create(model=pool, max_tokens=256, messages=msgs, tools=tools)
        return use.name, use.input, "".join(b.text for b in second.content if b.type == "text")

    def expect_rate_limited(self, pool):
        try:
            self.text(pool, "x")
        except self.anthropic.RateLimitError as e:
            assert e.status_code == 429
            return
        raise AssertionError("no RateLimitError")


class Gemini:
    def __init__(self, url):
        from google import genai
        from google.genai import errors, types
        self.types, self.errors = types, errors
        self.c = genai.Client(api_key="x", http_options=types.HttpOptions(
            base_url=url, timeout=20000, retry_options=types.HttpRetryOptions(attempts=1)))

    def text(self, pool, prompt):
        return self.c.models.generate_content(model=pool, contents=prompt).text

    def stream(self, pool, prompt):
        return "".join(ch.text or "" for ch in self.c.models.generate_content_stream(model=pool, contents=prompt))

    def tool_round_trip(self, pool, tool_result):
        t = self.types
        tool = t.Tool(function_declarations=[t.FunctionDeclaration(name="get_weather", parameters_json_schema=WEATHER_SCHEMA)])
        cfg = t.GenerateContentConfig(tools=[tool], automatic_function_calling=t.AutomaticFunctionCallingConfig(disable=True))
        contents = [t.Content(role="user", parts=[t.Part(text="weather?")])]
        first = self.c.models.generate_content(model=pool, contents=contents, config=cfg)
        fc = first.function_calls[0]
        contents += [first.candidates[0].content,
                     t.Content(role="user", parts=[t.Part(function_response=t.FunctionResponse(
                         name=fc.name, id=fc.id, response={"result": tool_result}))])]
        second = self.c.models.generate_content(model=pool, contents=contents, config=cfg)
        return fc.name, dict(fc.args), second.text

    def expect_rate_limited(self, pool):
        try:
            self.text(pool, "x")
        except self.errors.ClientError as e:
            assert e.code == 429
            return
        raise AssertionError("no ClientError 429")


class Bedrock:
    def __init__(self, url):
        import boto3
        from botocore.config import Config
        self.c = boto3.client("bedrock-runtime", endpoint_url=url, region_name="us-east-1",
                              aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret",
                              config=Config(retries={"total_max_attempts": 1, "mode": "standard"}, read_timeout=20))

    def text(self, pool, prompt):
        r = self.c.converse(modelId=pool, messages=[{"role": "user", "content": [{"text": prompt}]}])
        return "".join(b.get("text", "") for b in r["output"]["message"]["content"])

    def stream(self, pool, prompt):
        r = self.c.converse_stream(modelId=pool, messages=[{"role": "user", "content": [{"text": prompt}]}])
        out = []
        for ev in r["stream"]:
            if "contentBlockDelta" in ev:
                out.append(ev["contentBlockDelta"]["delta"].get("text", ""))
        return "".join(out)

    def tool_round_trip(self, pool, tool_result):
        tools = {"tools": [{"toolSpec": {"name": "get_weather", "inputSchema": {"json": WEATHER_SCHEMA}}}]}
        msgs = [{"role": "user", "content": [{"text": "weather?"}]}]
        first = self.c.converse(modelId=pool, messages=msgs, toolConfig=tools)
        use = next(b["toolUse"] for b in first["output"]["message"]["content"] if "toolUse" in b)
        msgs += [first["output"]["message"],
                 {"role": "user", "content": [{"toolResult": {"toolUseId": use["toolUseId"],
                                                              "content": [{"text": tool_result}]}}]}]
        second = self.c.converse(modelId=pool, messages=msgs, toolConfig=tools)
        text = "".join(b.get("text", "") for b in second["output"]["message"]["content"])
        return use["name"], use["input"], text

    def expect_rate_limited(self, pool):
        try:
            self.text(pool, "x")
        except self.c.exceptions.ThrottlingException:
            return
        raise AssertionError("no ThrottlingException")


class Cohere:
    def __init__(self, url):
        import cohere
        self.cohere = cohere
        self.c = cohere.ClientV2(api_key="x", base_url=url, timeout=20)
        self.opts = {"max_retries": 0}

    def text(self, pool, prompt):
        r = self.c.chat(model=pool, messages=[{"role": "user", "content": prompt}], request_options=self.opts)
        return "".join(p.text for p in r.message.content if p.type == "text")

    def stream(self, pool, prompt):
        out = []
        for ev in self.c.chat_stream(model=pool, messages=[{"role": "user", "content": prompt}]):
            if ev.type == "content-delta":
                out.append(ev.delta.message.content.text)
        return "".join(out)

    def tool_round_trip(self, pool, tool_result):
        tools = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_SCHEMA}}]
        msgs = [{"role": "user", "content": "weather?"}]
        first = self.c.chat(model=pool, messages=msgs, tools=tools)
        call = first.message.tool_calls[0]
        msgs += [{"role": "assistant", "tool_calls": [call.model_dump(exclude_none=True)],
                  **({"tool_plan": first.message.tool_plan} if first.message.tool_plan else {})},
                 {"role": "tool", "tool_call_id": call.id,
                  "content": [{"type": "document", "document": {"data": tool_result}}]}]
        second = self.c.chat(model=pool, messages=msgs, tools=tools)
        text = "".join(p.text for p in second.message.content if p.type == "text")
        return call.function.name, json.loads(call.function.arguments), text

    def expect_rate_limited(self, pool):
        try:
            self.text(pool, "x")
        except self.cohere.errors.TooManyRequestsError:
            return
        raise AssertionError("no TooManyRequestsError")


CLIENTS = {"openai-chat": OpenAIChat, "openai-responses": OpenAIResponses, "anthropic": Anthropic,
           "google-genai": Gemini, "boto3-bedrock": Bedrock, "cohere": Cohere}
