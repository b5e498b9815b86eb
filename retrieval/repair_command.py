"""The `task=index` command that indexes a corpus again, exactly as it was indexed: what a damaged index prints,
from the overrides `task=index` recorded per corpus, shell-quoted in Hydra's syntax so it can be pasted as is."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# Hydra reads these unquoted as numbers, booleans or null: a string that looks like one must be quoted.
_NON_STRING = re.compile(r"[+-]?(\d[\d_]*(\.\d*)?([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?|inf|nan)|true|false|null",
                         re.IGNORECASE)
_PLAIN = re.compile(r"[A-Za-z0-9_/.*@+:-]+")


def hydra_value(value: Any) -> str:
    """`value` in Hydra's override grammar: lists as [a,b], None as null, strings quoted unless plainly a string."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    text = str(value)
    if _PLAIN.fullmatch(text) and not _NON_STRING.fullmatch(text):
        return text
    # Hydra's quoted string: a quote is escaped with a backslash, and so are backslashes right before a quote or
    # at the end (the only places where they would escape something).
    text = re.sub(r"(\\+)(?='|$)", lambda m: m.group(1) * 2, text)
    return "'" + text.replace("'", "\\'") + "'"


def override(key: str, value: Any) -> str:
    return f"{key}={hydra_value(value)}"


def reindex_overrides(spec: dict[str, Any], choice: str | None, base: dict[str, Any] | None,
                      extra: list[str] | None = None) -> list[str]:
    """Overrides that rebuild `spec` (a resolved corpus config): `corpus=<choice>` and the fields that differ from
    `base` (that option's resolved config); without a base, every field. `extra` (e.g. the embedder) follows."""
    out = [f"corpus={choice}"] if choice else []
    for key, value in spec.items():
        if base is not None and key in base and base[key] == value:
            continue
        if key == "paths" and isinstance(value, list):  # absolute, so the command works from any folder
            value = [str(Path(str(p)).expanduser().absolute()) for p in value]
        prefix = "" if base is None or key in base else "+"
        out.append(override(f"{prefix}corpus.{key}", value))
    return out + list(extra or [])


def repair_command(overrides: list[str] | None, corpus: str | None, index_dir: str | Path) -> str:
    """`python main.py task=index ... index_dir=...` for one corpus of an index (shell-quoted)."""
    if overrides is None:  # indexed before the overrides were recorded
        if corpus and (ROOT / "conf" / "corpus" / f"{corpus}.yaml").exists():
            overrides = [f"corpus={corpus}"]
        else:
            overrides = [f"corpus.name={hydra_value(corpus or '...')}", "corpus.paths=[...]"]
    words = ["python", "main.py", "task=index", *overrides, override("index_dir", str(index_dir))]
    return " ".join(w if w in ("python", "main.py") else shlex.quote(w) for w in words)
