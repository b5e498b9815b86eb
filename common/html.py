"""Building blocks of the HTML reports: one page shell, escaping, tables, an SVG bar chart, word diffs and filters.
The shell inlines report.css and report_filters.js, both beside this file. Every mark has a text label as well as a
colour; every control is a native element."""

from __future__ import annotations

import base64
import difflib
import html
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

_HERE = Path(__file__).parent
# the reports' stylesheet and case filters, each on the line after its tag
CSS = "\n" + (_HERE / "report.css").read_text(encoding="utf-8")
FILTER_JS = "\n" + (_HERE / "report_filters.js").read_text(encoding="utf-8")


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def echo(value: Any) -> str:
    """`value` escaped and isolated (`<bdi>`) for an element's content: text from a run's inputs may hold bidi
    overrides (U+202E) that would reorder the report's own text after it. `esc` stays for attributes and our words."""
    return f"<bdi>{esc(value)}</bdi>"


def page(title: str, body: str, script: str = FILTER_JS) -> str:
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" '
            f'content="width=device-width, initial-scale=1"><title>{esc(title)}</title><style>{CSS}</style></head>'
            f"<body>{body}<script>{script}</script></body></html>")


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], caption: str | None = None) -> str:
    head = "".join(f"<th scope=col>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{fmt(c)}</td>" for c in row) + "</tr>" for row in rows)
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    if value is None:
        return '<span class="muted">n/a</span>'
    return echo(value) if isinstance(value, str) else esc(value)  # a cell's text may come from the run's records


def bar_chart(title: str, items: Sequence[tuple[str, float]], unit: str = "") -> str:
    """Horizontal bars as inline SVG, each labelled with its value (readable without colour)."""
    if not items or not any(v for _, v in items):
        return f'<p class="muted">{esc(title)}: none</p>'
    peak = max(v for _, v in items) or 1.0
    height = 24 * len(items) + 28
    bars = []
    for i, (label, value) in enumerate(items):
        y = 24 + 24 * i
        width = 300 * value / peak
        bars.append(f'<text x="0" y="{y + 13}">{esc(label)}</text><rect x="120" y="{y}" width="{width:.1f}" '
                    f'height="16" fill="#0b5cad"><title>{esc(label)}: {value:.3g}{unit}</title></rect>'
                    f'<text x="{126 + width:.1f}" y="{y + 13}">{value:.3g}{esc(unit)}</text>')
    return (f'<figure><svg role="img" aria-label="{esc(title)}" viewBox="0 0 500 {height}" width="100%" '
            f'style="max-width:520px"><text x="0" y="14" font-weight="bold">{esc(title)}</text>{"".join(bars)}</svg>'
            "</figure>")


def word_diff(before: str, after: str) -> str:
    """`before` -> `after` word by word: removed words in <del>, added in <ins> (struck / underlined in text too)."""
    a, b = before.split(), after.split()
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            out.append(esc(" ".join(a[i1:i2])))
        if op in ("delete", "replace"):
            out.append(f'<del aria-label="removed">{esc(" ".join(a[i1:i2]))}</del>')
        if op in ("insert", "replace"):
            out.append(f'<ins aria-label="added">{esc(" ".join(b[j1:j2]))}</ins>')
    return " ".join(out)


def filters(options: Sequence[tuple[str, str]]) -> str:
    boxes = "".join(f'<label><input type="checkbox" data-filter="{esc(key)}"> {esc(label)}</label>'
                    for key, label in options)
    return f'<div class="filters" role="group" aria-label="filters">{boxes}<span id="shown-count" class="muted"></span></div>'


def png_inline(path: Path, alt: str) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode()
    return f'<img alt="{esc(alt)}" src="data:image/png;base64,{data}" style="max-width:100%">'


def json_block(value: Any) -> str:
    return f"<pre>{esc(json.dumps(value, indent=2, ensure_ascii=False))}</pre>"
