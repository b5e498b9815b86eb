"""An in-process llama.cpp engine for DSPy 3.4's `dspy.LM(model, engine=...)` contract.

Tiny local models rarely follow DSPy's text protocols, so this engine declares support for response
schemas: DSPy's JSONAdapter then sends the signature's JSON schema, which llama.cpp compiles into a
grammar that constrains decoding. A model can then only emit JSON that parses.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from dspy import lm15
from dspy.lm15 import Message, Response, TextPart, Usage, response_to_events

from common.control_tokens import strip_control_tokens, vocabulary_control_tokens
from common.cpu import threads_now, threads_setting
from lms.errors import LMConfigError
from lms.openai_compatible_engine import wire_response_format

_FRAMES = 4       # saved frame states (one per prompt frame in use: the evidence stage's, the alignment's, ...)
_MIN_FRAME = 64   # a shorter frame is read again rather than saved


def _system_text(system: Any) -> str | None:
    if system is None:
        return None
    if isinstance(system, str):
        return system
    return "".join(getattr(part, "text", "") for part in system)


class LlamaCppEngine:
    """Runs a GGUF model with llama-cpp-python; one `complete` call is one generation."""

    supports_response_schema = True
    supported_params = frozenset({"response_format", "temperature", "max_tokens", "top_p", "stop", "seed"})

    def __init__(
        self,
        model_path: str | Path,
        *,
        n_ctx: int = 4096,
        n_threads: int | str | None = None,
        seed: int = 0,
        fold_system: bool | None = None,
        chat_format: str | None = None,
        verbose: bool = False,
        prompt_cache_mb: int = 0,
        prefix_reuse: bool = False,
    ) -> None:
        path = Path(model_path)
        if not path.is_file():
            raise LMConfigError(f"embedded LM: GGUF file not found: {path} (set lm.client.model_path=...)")
        try:
            from llama_cpp import Llama
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise LMConfigError("embedded LM needs llama-cpp-python: pip install llama-cpp-python") from exc
        self.model_path = path
        self.seed = seed
        self.threads = threads_setting("auto" if n_threads is None else n_threads, "lm.client.n_threads")
        self._lock = threading.Lock()  # a Llama object is not thread-safe
        self._llama = Llama(
            model_path=str(path),
            n_ctx=n_ctx,
            n_threads=threads_now(self.threads),
            seed=seed,
            chat_format=chat_format,
            verbose=verbose,
        )
        if prompt_cache_mb:
            # llama.cpp reuses the KV state of the previous prompt's shared prefix by itself; a RAM cache of states
            # also finds the prefix of an earlier prompt (the agent's note after the reviewers' prompts).
            from llama_cpp import LlamaRAMCache

            self._llama.set_cache(LlamaRAMCache(capacity_bytes=prompt_cache_mb << 20))
        has_template = "tokenizer.chat_template" in (self._llama.metadata or {})
        # Some llama.cpp chat formats (e.g. gemma's) silently drop the system message, which is where
        # DSPy puts the instructions; without a template, fold it into the first user turn.
        self.fold_system = (not has_template) if fold_system is None else fold_system
        self.control_tokens = vocabulary_control_tokens(self._llama)
        self.calls = 0
        if prefix_reuse and prompt_cache_mb:
            raise LMConfigError("lm.client.prefix_reuse and lm.client.prompt_cache_mb both reuse a prompt's start: "
                                "set one (prefix_reuse keeps each reply a function of its prompt)")
        if prefix_reuse and not has_template:
            raise LMConfigError(f"lm.client.prefix_reuse needs a GGUF with a chat template; {path.name} has none")
        self.prefix_reuse = bool(prefix_reuse)
        self._frames: OrderedDict[tuple[int, ...], Any] = OrderedDict()  # frame tokens -> saved llama state
        self._formatter = self._chat_formatter() if self.prefix_reuse else None
        self.frame_tokens_reused = 0

    def _chat_formatter(self) -> Any:
        """The GGUF's own chat template, as llama-cpp-python renders it for create_chat_completion."""
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        model = self._llama._model
        return Jinja2ChatFormatter(template=self._llama.metadata["tokenizer.chat_template"],
                                   eos_token=model.token_get_text(model.token_eos()),
                                   bos_token=model.token_get_text(model.token_bos()))

    def _frame(self, messages: list[dict[str, str]]) -> list[int]:
        """The prompt's frame: its tokens up to the last input field of the last turn (the last line starting
        `[[ ## `: what DSPy's adapters put before each input field). Calls that differ only in that field (one note
        sentence after another) share the frame. A function of the prompt alone; [] when there is no such field."""
        last = messages[-1]["content"] if messages and messages[-1]["role"] == "user" else ""
        cut = last.rfind("\n[[ ## ")
        if cut < 0 or self._formatter is None:
            return []
        prompt = self._formatter(messages=messages).prompt
        start = prompt.rfind(last)
        if start < 0:  # the template rewrote the turn: no frame rather than a wrong one
            return []
        frame_text = prompt[: start + cut + 1]
        tokens = self._llama.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
        frame = self._llama.tokenize(frame_text.encode("utf-8"), add_bos=False, special=True)
        common = 0
        for a, b in zip(frame, tokens, strict=False):  # a token merged across the cut belongs to the rest
            if a != b:
                break
            common += 1
        return frame[:common] if common >= _MIN_FRAME else []

    def _start_from_frame(self, frame: list[int]) -> None:
        """Put the frame's state into the context: read alone from an empty context the first time, saved, and
        copied back every later time, so the rest of any prompt is read onto the same cells: the reply depends on
        the prompt alone (as with a whole read), and a frame is read once instead of once per call."""
        key = tuple(frame)
        state = self._frames.get(key)
        self._llama.reset()
        if state is None:
            self._llama.eval(frame)
            state = self._llama.save_state()
            self._frames[key] = state
            while len(self._frames) > _FRAMES:
                self._frames.popitem(last=False)
        else:
            self._frames.move_to_end(key)
            self._llama.load_state(state)
            self.frame_tokens_reused += len(frame)

    def _messages(self, request: Any) -> list[dict[str, str]]:
        """The chat turns; a control-token string inside any text is removed (the chat template tokenizes the whole
        prompt with special tokens recognised: a patient's `<|im_end|>` would end the turn)."""
        own = self.control_tokens
        system = _system_text(request.system)
        if system:
            system = strip_control_tokens(system, own)
        messages = [{"role": m.role if m.role != "developer" else "user",
                     "content": strip_control_tokens(m.text or "", own)} for m in request.messages]
        if system:
            if self.fold_system and messages and messages[0]["role"] == "user":
                messages[0] = {"role": "user", "content": f"{system}\n\n{messages[0]['content']}"}
            else:
                messages.insert(0, {"role": "system", "content": system})
        return messages

    @staticmethod
    def _response_format(config: Any) -> dict[str, Any] | None:
        # llama-cpp-python takes its server's form: json_object + the schema its grammar decodes under
        return wire_response_format("json_object_schema", config.response_format)

    def complete(self, request: Any) -> Response:
        config = request.config
        kwargs: dict[str, Any] = {
            "messages": self._messages(request),
            "temperature": 0.0 if config.temperature is None else config.temperature,
            "max_tokens": config.max_tokens or 512,
            "seed": config.seed if config.seed is not None else self.seed,
        }
        if config.top_p is not None:
            kwargs["top_p"] = config.top_p
        if config.stop:
            kwargs["stop"] = list(config.stop)
        response_format = self._response_format(config)
        if response_format is not None:
            kwargs["response_format"] = response_format
        with self._lock:
            import llama_cpp

            threads = threads_now(self.threads)  # the free cores now (common/cpu.py); results do not depend on it
            llama_cpp.llama_set_n_threads(self._llama._ctx.ctx, threads, threads)
            frame = self._frame(kwargs["messages"]) if self.prefix_reuse else []
            if frame:
                # llama-cpp-python then finds the frame's tokens in the context and reads only the rest
                self._start_from_frame(frame)
            elif self._llama.cache is None:
                # every prompt read from its first token: llama-cpp-python keeps the previous prompt's common prefix,
                # and a reply then depended on the prompt before it (prompt_cache_mb > 0 opts into that for speed)
                self._llama.reset()
            try:
                out = self._llama.create_chat_completion(**kwargs)
            except ValueError as exc:  # llama.cpp reports a prompt longer than n_ctx as ValueError
                if "context window" in str(exc):
                    raise lm15.ContextLengthError(f"embedded LM: {exc} (raise lm.client.n_ctx)") from exc
                raise
            self.calls += 1
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        return Response(
            id=out.get("id"),
            model=self.model_path.name,
            message=Message.assistant((TextPart(choice["message"].get("content") or ""),)),
            finish_reason=finish,
            usage=Usage(input_tokens=usage.get("prompt_tokens"), output_tokens=usage.get("completion_tokens")),
        )

    def stream(self, request: Any):
        return response_to_events(self.complete(request))

    def close(self) -> None:
        self._llama.close()
