"""lm=openai_compatible: one chat completion over HTTP to an OpenAI-style server (llama.cpp, vLLM, Ollama), as a
DSPy 3.4 engine. It replaces LiteLLM, whose import cost ~4 CPU-s per process, and sends what LiteLLM sent
(`max_tokens`, not `max_completion_tokens`). A failure becomes an lm15 error class, so DSPy retries the transient ones."""

from __future__ import annotations

import json
import threading
from typing import Any

from dspy import lm15
from dspy.lm15 import Response, response_from_openai_chat

from common.usage import count_attempt
from lms.engine import Engine, sampling, status_error

DEFAULT_TIMEOUT_S = 600.0  # LiteLLM's default, when lm.client.timeout is null


def wire_response_format(mode: str, fmt: dict[str, Any] | None) -> dict[str, Any] | None:
    """DSPy's response format in the form a server of this `structured_output` mode accepts: llama.cpp's server
    decodes under a grammar from `json_object` + `schema` (and answers HTTP 500 to `json_schema`); OpenAI and vLLM
    take `json_schema`."""
    if not fmt or mode == "none":
        return None
    schema = fmt.get("schema") or (fmt.get("json_schema") or {}).get("schema")
    if mode == "json_object" or schema is None:
        return {"type": "json_object"}
    if mode == "json_object_schema":
        return {"type": "json_object", "schema": schema}
    name = fmt.get("name") or (fmt.get("json_schema") or {}).get("name") or "output"
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": False}}


def _text(parts: Any) -> str:
    if parts is None or isinstance(parts, str):
        return parts or ""
    texts = []
    for part in parts:
        if getattr(part, "type", "text") != "text":
            raise lm15.UnsupportedFeatureError(f"lm=openai_compatible sends text only, not {part.type} parts",
                                               feature="messages")
        texts.append(part.text or "")
    return "".join(texts)


def _server_message(body: bytes) -> str:
    """The error text a server sent (OpenAI's {"error": {"message": ...}}, or the body's first line)."""
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, dict):
        error = data.get("error")
        message = error.get("message") if isinstance(error, dict) else error or data.get("detail")
        if message:
            return str(message)[:300]
    return (body.decode("utf-8", "replace").strip().splitlines() or [""])[0][:300]


class OpenAICompatibleEngine(Engine):
    """POST /chat/completions to `api_base`; one call is one attempt (DSPy retries)."""

    def __init__(self, model: str, api_base: str, *, api_key: str = "not-needed", timeout: float | None = 120.0,
                 structured_output: str = "json_object_schema") -> None:
        self.model = model
        self.url = api_base.rstrip("/") + "/chat/completions"
        self.api_key = api_key
        self.timeout = float(timeout) if timeout else DEFAULT_TIMEOUT_S
        self.structured_output = structured_output
        self._client: Any = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:  # pickled to Ray workers and sweep jobs: the connection stays here
        return {k: v for k, v in self.__dict__.items() if k not in ("_client", "_lock")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._client, self._lock = None, threading.Lock()

    def _http(self) -> Any:
        with self._lock:
            if self._client is None:
                import httpx

                self._client = httpx.Client(timeout=httpx.Timeout(self.timeout),
                                            headers={"Authorization": f"Bearer {self.api_key}"})
            return self._client

    def body(self, request: Any) -> dict[str, Any]:
        """The JSON body sent for a DSPy request."""
        config = request.config
        messages = [{"role": "system", "content": _text(request.system)}] if request.system else []
        messages += [{"role": m.role, "content": _text(m.parts) if m.text is None else m.text}
                     for m in request.messages]
        body: dict[str, Any] = {"model": self.model, "messages": messages, **sampling(config)}
        response_format = wire_response_format(self.structured_output, config.response_format)
        if response_format is not None:
            body["response_format"] = response_format
        return body

    def complete(self, request: Any) -> Response:
        import httpx

        count_attempt()  # every attempt, retries included (usage.json's lm_attempts)
        body = self.body(request)
        try:
            reply = self._http().post(self.url, json=body)
        except httpx.TimeoutException:
            raise lm15.TimeoutError(f"no reply within {self.timeout:g} s (lm.client.timeout) from {self.url}") from None
        except httpx.HTTPError as exc:
            raise lm15.TransportError(f"{type(exc).__name__}: {exc or 'no connection'} ({self.url})",
                                      provider="openai_compatible") from None
        if reply.status_code >= 400:
            raise self._status_error(reply)
        try:
            data = reply.json()
            is_completion = isinstance(data["choices"][0]["message"], dict)
        except (ValueError, KeyError, IndexError, TypeError):
            is_completion = False
        not_one = lm15.ProviderError(f"the server at {self.url} sent no chat completion: {reply.text.strip()[:200]!r}",
                                     provider="openai_compatible")
        if not is_completion:  # DSPy's reader would take an empty choice list as an empty reply
            raise not_one
        # DSPy's own reader of a chat completion trusts the shape of every field: what it cannot read is a malformed reply
        try:
            return response_from_openai_chat(data, model=self.model)
        except (AttributeError, TypeError, KeyError, IndexError, ValueError):
            raise not_one from None

    def _status_error(self, reply: Any) -> Exception:
        status, text = reply.status_code, _server_message(reply.content)
        message = f"HTTP {status} from {self.url}: {text}"
        kind = status_error(status)
        if kind is None:
            lower = text.lower()
            too_long = "context" in lower and ("length" in lower or "size" in lower)
            kind = lm15.ContextLengthError if too_long else lm15.InvalidRequestError
        retry_after = reply.headers.get("retry-after")
        try:
            seconds = float(retry_after) if retry_after else None
        except ValueError:
            seconds = None
        return kind(message, provider="openai_compatible", status=status, retry_after=seconds)

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
