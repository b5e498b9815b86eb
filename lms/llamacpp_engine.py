"""lm=embedded: a GGUF model run in process with llama-cpp-python, as a DSPy 3.4 engine. DSPy's JSONAdapter sends the
signature's JSON schema, and llama.cpp decodes under its grammar: a tiny model can only emit JSON that parses."""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from dspy import lm15
from dspy.lm15 import Response

from common.control_tokens import strip_control_tokens, vocabulary_control_tokens
from common.cpu import threads_now, threads_setting
from lms.engine import Engine, sampling, system_text, text_response
from lms.errors import LMConfigError
from lms.openai_compatible_engine import wire_response_format

_FRAMES = 4       # saved frame states (one per prompt frame in use: the evidence stage's, the alignment's, ...)
_MIN_FRAME = 64   # a shorter frame is read again rather than saved


class LlamaCppEngine(Engine):
    """One `complete` call is one generation."""

    def __init__(
        self,
        model_path: str | Path,
        *,
        n_ctx: int = 4096,
        n_threads: int | str | None = None,
        seed: int = 0,
        fold_system: bool | None = None,
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
        self._llama = Llama(model_path=str(path), n_ctx=n_ctx, n_threads=threads_now(self.threads), seed=seed,
                            verbose=False)
        if prompt_cache_mb:
            # a RAM cache of states also finds the prefix of an earlier prompt, not only of the previous one
            from llama_cpp import LlamaRAMCache

            self._llama.set_cache(LlamaRAMCache(capacity_bytes=prompt_cache_mb << 20))
        has_template = "tokenizer.chat_template" in (self._llama.metadata or {})
        # some chat formats (gemma's) drop the system message, DSPy's instructions: without a template, fold it in
        self.fold_system = (not has_template) if fold_system is None else fold_system
        self.control_tokens = vocabulary_control_tokens(self._llama)
        if prefix_reuse and prompt_cache_mb:
            raise LMConfigError("lm.client.prefix_reuse and lm.client.prompt_cache_mb both reuse a prompt's start: "
                                "set one (prefix_reuse keeps each reply a function of its prompt)")
        if prefix_reuse and not has_template:
            raise LMConfigError(f"lm.client.prefix_reuse needs a GGUF with a chat template; {path.name} has none")
        self.prefix_reuse = bool(prefix_reuse)
        self._frames: OrderedDict[tuple[int, ...], Any] = OrderedDict()  # frame tokens -> saved llama state
        self.frame_tokens_reused = 0
        self._formatter: Any = None  # the GGUF's chat template, as create_chat_completion renders it
        if self.prefix_reuse:
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            model = self._llama._model
            self._formatter = Jinja2ChatFormatter(template=self._llama.metadata["tokenizer.chat_template"],
                                                  eos_token=model.token_get_text(model.token_eos()),
                                                  bos_token=model.token_get_text(model.token_bos()))

    def _frame(self, messages: list[dict[str, str]]) -> list[int]:
        """The prompt's tokens up to the last `[[ ## ` input field of the last turn, [] when there is none: calls
        that differ only in that field (one note sentence after another) share it. A function of the prompt alone."""
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
        """Put the frame's state into an empty context: read and saved the first time, copied back after that. The
        rest of the prompt is read onto the same cells either way, so the reply depends on the prompt alone."""
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
        """The chat turns without control-token strings: the template tokenizes the prompt with special tokens
        recognised, so a patient's `<|im_end|>` would end the turn."""
        own = self.control_tokens
        system = system_text(request.system)
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
        kwargs: dict[str, Any] = {"messages": self._messages(request), "temperature": 0.0, "seed": self.seed,
                                  **sampling(config), "max_tokens": config.max_tokens or 512}
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
                # read from the first token: a kept common prefix made a reply depend on the prompt before it
                self._llama.reset()
            try:
                out = self._llama.create_chat_completion(**kwargs)
            except ValueError as exc:  # llama.cpp reports a prompt longer than n_ctx as ValueError
                if "context window" in str(exc):
                    raise lm15.ContextLengthError(f"embedded LM: {exc} (raise lm.client.n_ctx)") from exc
                raise
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        return text_response(choice["message"].get("content") or "", id=out.get("id"), model=self.model_path.name,
                             input_tokens=usage.get("prompt_tokens"), output_tokens=usage.get("completion_tokens"),
                             finish_reason="length" if choice.get("finish_reason") == "length" else "stop")

    def close(self) -> None:
        self._llama.close()
