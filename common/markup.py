"""Strip the markup an LM sometimes leaks into a plain-text output field (code fences, markdown, HTML-ish tags,
chat-template tokens); every LM stage counts a change as a repair. The rules are narrow so clinical text is never
touched: `<` stays unless it opens a known tag (`BP <120/80`), `*` stays inside words, numbered lists keep their text."""

from __future__ import annotations

import json
import re

# A fence with an optional language tag; only known tags, so "```The answer" keeps "The".
_FENCE = re.compile(r"`{3,}(?:(?:json5?|jsonc|markdown|md|text|txt|plaintext|html|xml|yaml|yml)(?![\w-]))?",
                    re.IGNORECASE)
_THINK = re.compile(r"<think>.*?</think>", re.IGNORECASE | re.DOTALL)
# Known tag names, attributes only as name=value: a looser pattern would eat "<b and c>"-like comparisons.
_TAG = re.compile(r"</?(?:b|i|u|em|strong|p|br|hr|div|span|ul|ol|li|h[1-6]|code|pre|sup|sub|small|mark|a|font|"
                  r"table|tr|td|th|answer|question|response|output|final|think|s)"
                  r"""(?:\s+[\w-]+=(?:"[^"<>]*"|'[^'<>]*'|[^\s<>"']+))*\s*/?>""", re.IGNORECASE)
_SPECIAL_TOKEN = re.compile(r"<\|[\w.-]{1,40}\|>")
_LINE_MARKER = re.compile(r"^[ \t]{0,3}(?:#{1,6}[ \t]+|[*\u2022][ \t]+)", re.MULTILINE)  # heading or * / • bullet
_STRONG = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1", re.DOTALL)
_EMPHASIS = re.compile(r"(?<![\w*])\*(?=[^\s*])([^*\n]*?[^\s*])\*(?![\w*])")  # *word*, never 2*3*4
_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_EDGE = re.compile(r"^(?:\*{1,3}|_{2,3}|#{1,6}(?=\s))\s*|\s*(?:\*{1,3}|_{2,3})$")


def _salvage_json(chunk: str) -> str:
    """A fenced JSON object that is the only content: its one string value (e.g. {"answer": "..."}), else ""."""
    try:
        value = json.loads(chunk)
    except ValueError:
        return ""
    if isinstance(value, dict) and len(value) == 1:
        value = next(iter(value.values()))
    return value if isinstance(value, str) else ""


def _unfence(text: str) -> str:
    parts = _FENCE.split(text)
    if len(parts) == 1:
        return text
    kept = [parts[0]]
    for i, chunk in enumerate(parts[1:], 1):
        # odd chunks follow an opening fence (closed later or dangling); even ones follow a closing fence
        if i % 2 and chunk.strip()[:1] in ("{", "["):
            alone = not "".join(parts[:i] + parts[i + 1:]).strip()
            kept.append(_salvage_json(chunk.strip()) if alone else "")  # JSON debris, not text
        elif not (i % 2 and not chunk.strip()):
            kept.append(chunk)
    return "\n".join(kept)


def strip_markup(text: str) -> tuple[str, bool]:
    """`(clean text, whether markup was removed)`; the clean text has its whitespace collapsed (whitespace alone is
    not a repair: the stages normalise it anyway)."""
    out = _unfence(text)
    out = _THINK.sub(" ", out)
    out = _SPECIAL_TOKEN.sub(" ", _TAG.sub(" ", out))
    out = _LINE_MARKER.sub("", out)
    out = _EMPHASIS.sub(r"\1", _STRONG.sub(r"\2", out))
    out = _CODE_SPAN.sub(r"\1", out)
    out = " ".join(out.split())
    out = _EDGE.sub("", out).strip()
    return out, out != " ".join(text.split())


def without_markup(text: str | None) -> tuple[str, bool]:
    """Like `strip_markup`, but text without markup comes back exactly as it was: outputs fed back into later
    prompts then leave them byte-identical, so DSPy cache hits and compiled programs stay valid."""
    raw = text or ""
    clean, changed = strip_markup(raw)
    return (clean, True) if changed else (raw, False)
