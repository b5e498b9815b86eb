"""LM engines without a network: request mapping, error translation; live tests run only when configured."""

import os
from types import SimpleNamespace

import dspy
import pytest
from dspy import lm15
from dspy.lm15 import Config, Message, Request

from lms.gemini_engine import GeminiEngine, _translate
from lms.llamacpp_engine import LlamaCppEngine

pytestmark = pytest.mark.unit


def request(response_format=None):
    return Request(model="m", messages=(Message.user("hello"),), system="INSTRUCTIONS",
                   config=Config(max_tokens=50, temperature=0.0, response_format=response_format))


class FakeModels:
    def __init__(self, error=None):
        self.calls, self.error = [], error

    def generate_content(self, model, contents, config):
        self.calls.append((model, contents, config))
        if self.error:
            raise self.error
        return SimpleNamespace(text='{"answer": "ok"}', response_id="r1",
                               usage_metadata=SimpleNamespace(prompt_token_count=7, candidates_token_count=3))


def test_gemini_engine_sends_system_instruction_and_json_schema():
    models = FakeModels()
    engine = GeminiEngine("gemini-2.5-pro", client=SimpleNamespace(models=models))
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    resp = engine.complete(request({"type": "json_schema", "schema": schema}))
    model, contents, config = models.calls[0]
    assert model == "gemini-2.5-pro" and contents[0].parts[0].text == "hello"
    assert config.system_instruction == "INSTRUCTIONS" and config.max_output_tokens == 50
    assert config.response_mime_type == "application/json" and config.response_json_schema == schema
    assert resp.message.text == '{"answer": "ok"}' and resp.usage.input_tokens == 7


def test_gemini_errors_become_retryable_dspy_errors():
    from google.genai import errors

    rate = errors.ClientError(429, {"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}})
    assert isinstance(_translate(rate), lm15.RateLimitError)
    server = errors.ServerError(503, {"error": {"code": 503, "message": "busy", "status": "UNAVAILABLE"}})
    assert isinstance(_translate(server), lm15.ServerError)
    auth = errors.ClientError(403, {"error": {"code": 403, "message": "denied", "status": "PERMISSION_DENIED"}})
    assert isinstance(_translate(auth), lm15.AuthError)


def test_llamacpp_message_mapping_and_schema_grammar_format():
    engine = LlamaCppEngine.__new__(LlamaCppEngine)  # mapping only: no model loaded
    engine.fold_system, engine.control_tokens = False, ()  # what __init__ reads off the model
    assert engine._messages(request()) == [{"role": "system", "content": "INSTRUCTIONS"},
                                           {"role": "user", "content": "hello"}]
    engine.fold_system = True  # e.g. Gemma: llama.cpp's chat format would drop the system message
    assert engine._messages(request()) == [{"role": "user", "content": "INSTRUCTIONS\n\nhello"}]
    schema = {"type": "object"}
    cfg = request({"type": "json_schema", "schema": schema}).config
    assert LlamaCppEngine._response_format(cfg) == {"type": "json_object", "schema": schema}
    assert LlamaCppEngine._response_format(request().config) is None


@pytest.mark.skipif(not os.environ.get("GEMINI_API_KEY"), reason="live Gemini test: set GEMINI_API_KEY")
def test_live_gemini_structured_output():
    from lms.factory import gemini_lm

    class Capital(dspy.Signature):
        """Name the capital city."""

        country: str = dspy.InputField()
        city: str = dspy.OutputField()

    lm = gemini_lm(os.environ.get("GEMINI_MODEL", "gemini-2.5-flash"), cache=False)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        assert "paris" in dspy.Predict(Capital)(country="France").city.lower()


def test_openai_compatible_builder_speaks_to_a_local_server():
    """The builder's LM against a real HTTP server on 127.0.0.1: the model name, a max_tokens bound (llama.cpp's server
    ignores max_completion_tokens) and the reply text all cross the wire."""
    from lms.factory import openai_compatible_lm
    from tests.cli import fake_openai_server

    with fake_openai_server(lambda message: "OK" if "Say OK" in message else "?", model="local-model") as server:
        lm = openai_compatible_lm("local-model", server["api_base"], cache=False, max_tokens=20)
        assert lm("Say OK.")[0] == "OK"
    [request] = server["requests"]
    assert request["model"] == "local-model" and request["max_tokens"] == 20 and "max_completion_tokens" not in request


def test_rate_limiter_keeps_requests_and_tokens_per_minute_under_the_quota():
    from lms.rate_limit import RateLimiter

    now = [0.0]
    slept = []

    def sleep(seconds):
        slept.append(seconds)
        now[0] += seconds

    limiter = RateLimiter(rpm=3, tpm=1000, clock=lambda: now[0], sleep=sleep)
    for _ in range(3):
        limiter.acquire(100)
    assert slept == []
    limiter.acquire(100)  # the 4th request in the same minute waits for the first to expire
    assert slept == [60.0] and now[0] == 60.0
    limiter.acquire(950)  # the 100 tokens booked at t=60 are in the window: 1,050 > 1,000 waits until t=120
    assert slept == [60.0, 60.0] and now[0] == 120.0 and limiter.waited == 120.0


