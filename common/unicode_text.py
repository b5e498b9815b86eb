"""Text that is not Unicode: a lone surrogate (U+D800..U+DFFF) is a Python `str` character JSON's `"\\ud800"` makes,
which would travel until a tokenizer fails deep in a stage. Readers check the text where it comes in, so the refusal
names the field or line."""

from __future__ import annotations

from typing import Any

from common.errors import ClinprogError


class InvalidUnicode(ClinprogError, ValueError):
    """Text holding a lone surrogate. A ValueError too, so a pydantic validator that raises it is a 422 field error."""


def lone_surrogate(text: str) -> int | None:
    """The index of the first lone surrogate in `text`; None when `text` is Unicode text (encodable as UTF-8)."""
    try:
        text.encode("utf-8")  # C speed, and exactly the check the tokenizers fail on later
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def _described(text: str, at: int) -> str:
    return (f"a lone surrogate U+{ord(text[at]):04X} at character {at} is not Unicode text (a \\ud800-\\udfff "
            "escape must be one half of a pair); send UTF-8 text")


def unicode_problem(value: Any, where: str = "") -> str | None:
    """`where: what is wrong` for the first string in `value` (strings, dicts and lists, keys included) holding a lone
    surrogate, named by its path below `where` (`sentences.3.text`); None when there is none. Iterative, so a deeply
    nested value cannot exhaust Python's stack."""
    stack: list[tuple[str, Any]] = [(where, value)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, str):
            at = lone_surrogate(node)
            if at is not None:
                return f"{path or 'text'}: {_described(node, at)}"
        elif isinstance(node, dict):
            for key, item in reversed(list(node.items())):
                at = lone_surrogate(key) if isinstance(key, str) else None
                if at is not None:  # the path never holds the surrogate: the message must itself be encodable
                    return f"{path or 'body'}: a key with {_described(key, at)}"
                stack.append((f"{path}.{key}" if path else str(key), item))
        elif isinstance(node, (list, tuple)):
            stack.extend((f"{path}.{i}" if path else str(i), item) for i, item in reversed(list(enumerate(node))))
    return None


def require_unicode(value: Any, where: str) -> Any:
    """`value` unchanged when all its strings are Unicode text; else InvalidUnicode naming `where` and the path."""
    problem = unicode_problem(value, where)
    if problem:
        raise InvalidUnicode(problem)
    return value
