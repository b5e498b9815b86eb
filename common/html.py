"""Building blocks of the HTML reports: one page shell (inline CSS and JS), escaping, tables, an SVG bar chart, word
diffs and filters. Every mark has a text label as well as a colour; every control is a native element."""

from __future__ import annotations

import base64
import difflib
import html
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

CSS = """
:root{--fg:#1b1b1b;--muted:#555;--line:#d0d0d0;--sel:#0b5cad;--bad:#a4000f;--good:#116329;--warn:#8a5300}
*{box-sizing:border-box}body{font:15px/1.5 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;color:var(--fg);
margin:0 auto;max-width:1180px;padding:12px}h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em}
h3{font-size:1.05em;margin:.8em 0 .3em}table{border-collapse:collapse;margin:.5em 0;display:block;overflow-x:auto}
th,td{border:1px solid var(--line);padding:3px 8px;text-align:left;vertical-align:top}th{background:#f3f3f3}
.case{border:1px solid var(--line);border-radius:6px;padding:10px 14px;margin:14px 0}.case[hidden]{display:none}
.badges span,.tag{display:inline-block;border:1px solid currentColor;border-radius:10px;padding:0 7px;margin:2px 4px 2px 0;
font-size:.82em}.bad{color:var(--bad)}.good{color:var(--good)}.warn{color:var(--warn)}.muted{color:var(--muted)}
.note{display:flex;flex-direction:column;gap:3px}.sent{border-left:5px solid transparent;padding:2px 6px;border-radius:3px}
.sent.selected{border-left-color:var(--sel)}.sent:target{outline:3px solid #f0b400}
.sent .meta{font-size:.78em;color:var(--muted);margin-right:6px;white-space:nowrap}
mark{background:#fff0a8;padding:0 2px}.answer p{margin:.3em 0}.unsupported{background:#ffe3e3;border-left:5px solid var(--bad);
padding:2px 6px}a.cite{font-size:.85em;margin-left:2px}del{background:#ffd7d5;text-decoration:line-through}
ins{background:#d2f5d9;text-decoration:none}.filters{position:sticky;top:0;background:#fff;border-bottom:1px solid var(--line);
padding:6px 0;z-index:2}.filters label{margin-right:14px;white-space:nowrap}nav.index a{margin-right:8px}
.grid{display:grid;grid-template-columns:1fr 1fr;gap:14px}
.grid>*{min-width:0}@media(max-width:760px){.grid{grid-template-columns:1fr}
body{font-size:14px}}details{margin:.3em 0}.scroll{overflow-x:auto;max-width:100%}
pre{white-space:pre-wrap;word-break:break-word;background:#f7f7f7;padding:6px}
svg text{font:12px system-ui,sans-serif}
"""

FILTER_JS = """
(function(){
  const boxes = Array.from(document.querySelectorAll('.filters input[type=checkbox]'));
  const cases = Array.from(document.querySelectorAll('.case'));
  const count = document.getElementById('shown-count');
  function apply(){
    const on = boxes.filter(b => b.checked).map(b => b.dataset.filter);
    let shown = 0;
    cases.forEach(c => {
      const keep = on.every(f => c.dataset[f] === '1');
      c.hidden = !keep; if (keep) shown++;
    });
    if (count) count.textContent = shown + ' of ' + cases.length + ' shown';
  }
  boxes.forEach(b => b.addEventListener('change', apply));
  apply();
})();
"""


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
