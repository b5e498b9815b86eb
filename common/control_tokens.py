"""Patient text is data, never control tokens: llama.cpp and vLLM tokenize a prompt with special tokens recognised,
so `<|im_start|>` typed by a patient would open a turn. Every LM path removes the marker families chat templates use
and, where the vocabulary is at hand, the model's own control tokens."""

from __future__ import annotations

import re
from collections.abc import Iterable

# The marker families of chat templates: <|...|> (ChatML, Llama 3, Phi, GPT), DeepSeek's <｜...｜> (full-width bars),
# SentencePiece's <s> </s> <unk> <pad>, Gemma's <bos> <eos> <start_of_turn> <end_of_turn> <start_of_image>,
# Llama 2 / Mistral [INST] [/INST] <<SYS>> <</SYS>> and Mistral's [SYSTEM_PROMPT] / [AVAILABLE_TOOLS] / [TOOL_CALLS]...
_FAMILIES = re.compile(
    r"<[|｜][^<>\s|｜]{1,64}[|｜]>"
    r"|</?(?:s|unk|pad|bos|eos|mask|sep|cls)>"
    r"|<(?:start|end)_of_(?:turn|image|audio|video)>"
    r"|\[/?(?:INST|SYSTEM_PROMPT|AVAILABLE_TOOLS|TOOL_CALLS|TOOL_RESULTS|TOOL_CONTENT|IMG|THINK)\]"
    r"|<</?SYS>>",
    re.IGNORECASE,
)


def strip_control_tokens(text: str, extra: Iterable[str] = ()) -> str:
    """`text` with every control-token string (and `extra`: a model's own) replaced by one space."""
    out = _FAMILIES.sub(" ", text)
    for token in extra:
        if token and token in out:
            out = out.replace(token, " ")
    return out  # each removal leaves a space, so the halves around it ("<|im_" + "start|>") cannot join


def has_control_tokens(text: str, extra: Iterable[str] = ()) -> bool:
    return strip_control_tokens(text, extra) != text


def vocabulary_control_tokens(llm: object) -> tuple[str, ...]:
    """The text of each control token in a loaded llama-cpp-python model's vocabulary, longest first; () when it
    cannot be read."""
    try:
        import llama_cpp

        vocab = llama_cpp.llama_model_get_vocab(llm._model.model)  # type: ignore[attr-defined]
        found = []
        for token in range(llama_cpp.llama_vocab_n_tokens(vocab)):
            if llama_cpp.llama_vocab_is_control(vocab, token):
                piece = llm.detokenize([token], special=True).decode("utf-8", "ignore")  # type: ignore[attr-defined]
                if piece.strip():
                    found.append(piece)
    except (AttributeError, TypeError, ValueError):
        return ()
    return tuple(sorted(set(found), key=lambda p: (-len(p), p)))
