"""What the three DSPy 3.4 engines (`dspy.LM(engine=...)`: llama.cpp, OpenAI-compatible, Gemini) share."""

from __future__ import annotations

from typing import Any

from dspy import lm15
from dspy.lm15 import Message, Response, TextPart, Usage, response_to_events


class Engine:
    """Declares JSON-schema output and the sampling settings; `stream` is the whole reply as one event list."""

    supports_response_schema = True
    supported_params = frozenset({"response_format", "temperature", "max_tokens", "top_p", "stop", "seed"})

    def complete(self, request: Any) -> Response:
        raise NotImplementedError

    def stream(self, request: Any):
        return response_to_events(self.complete(request))

    def close(self) -> None:
        pass


def system_text(system: Any) -> str | None:
    """A request's system prompt as one string (DSPy may send it as text parts)."""
    if system is None or isinstance(system, str):
        return system
    return "".join(getattr(part, "text", "") for part in system)


def sampling(config: Any) -> dict[str, Any]:
    """The request's sampling settings that are set, in OpenAI's names."""
    out = {name: getattr(config, name) for name in ("max_tokens", "temperature", "top_p", "seed")
           if getattr(config, name) is not None}
    if config.stop:
        out["stop"] = list(config.stop)
    return out


def text_response(text: str, *, id: Any, model: str, input_tokens: Any, output_tokens: Any,
                  finish_reason: str = "stop") -> Response:
    return Response(id=id, model=model, message=Message.assistant((TextPart(text),)), finish_reason=finish_reason,
                    usage=Usage(input_tokens=input_tokens, output_tokens=output_tokens))


def status_error(status: int | None) -> type[lm15.LM15Error] | None:
    """lm15's class for a rate limit, an auth failure or a server error (DSPy retries the first and last); else None."""
    if status == 429:
        return lm15.RateLimitError
    if status in (401, 403):
        return lm15.AuthError
    if status is not None and status >= 500:
        return lm15.ServerError
    return None
