"""LM backends: an embedded llama.cpp engine, Google Gemini, OpenAI and OpenAI-compatible servers."""

from lms.errors import LMConfigError
from lms.factory import build_lm, build_role_lms

__all__ = ["LMConfigError", "build_lm", "build_role_lms"]
