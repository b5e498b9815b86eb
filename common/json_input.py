"""JSON read from what a user hands in: `json.loads`, but a document nested too deeply for Python (100,000 `[`) is a
`json.JSONDecodeError` like any other malformed JSON, not a RecursionError traceback."""

from __future__ import annotations

import json
from typing import Any


def loads(text: str | bytes | bytearray) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        exc = json.JSONDecodeError("nested too deeply to read", "", 0)
        exc.args = ("JSON nested too deeply to read",)
        raise exc from None
