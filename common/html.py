"""What the HTML reports share. Their markup is in Jinja2 templates beside the modules that fill them:
common/report.html.j2 (the page shell: it inlines report.css and report_filters.js) and common/report_macros.html.j2
(table, SVG bar chart, word diff, filters, JSON block), which programs/*/report.html.j2 and
reports/compile_report.html.j2 extend and import. Here: the one Environment, the escaping, and the computation the
macros draw (a chart's geometry, a word diff). Every mark has a text label as well as a colour; every control is a
native element.

Templates escape every value they print (autoescape). `|echo` also isolates an input's text (`<bdi>`). A template's
line breaks and the indentation after them are not output (`_JoinLines`): a page is one line of markup, and a space
the page shows must be inside a template line."""

from __future__ import annotations

import base64
import difflib
import html
import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from jinja2.ext import Extension
from markupsafe import Markup

_HERE = Path(__file__).parent
# the reports' stylesheet and case filters, each on the line after its tag
CSS = "\n" + (_HERE / "report.css").read_text(encoding="utf-8")
FILTER_JS = "\n" + (_HERE / "report_filters.js").read_text(encoding="utf-8")


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def echo(value: Any) -> Markup:
    """`value` escaped and isolated (`<bdi>`) for an element's content: text from a run's inputs may hold bidi
    overrides (U+202E) that would reorder the report's own text after it. `{{ value }}` is for attributes and our
    words."""
    return Markup(f"<bdi>{esc(value)}</bdi>")


def _printed(value: Any) -> Any:
    """What `{{ value }}` prints: `esc`'s entities (&#x27;, &quot;: markupsafe's are &#39;, &#34;), None as nothing."""
    return value if hasattr(value, "__html__") else Markup(esc(value))


class _JoinLines(Extension):
    """Line breaks and the indentation after them lay out a template's source; they are dropped before parsing."""

    def preprocess(self, source: str, name: str | None, filename: str | None = None) -> str:
        return re.sub(r"\n[ \t]*", "", source)


class Bar(NamedTuple):
    label: str
    y: int          # top of the bar; its texts' baseline is text_y
    text_y: int
    width: str      # as written in the SVG
    value_x: str
    value: str


class Chart(NamedTuple):
    height: int
    bars: list[Bar]


def bars(items: Sequence[tuple[str, float]]) -> Chart | None:
    """The geometry of a horizontal bar chart (the `bar_chart` macro draws it, each bar labelled with its value);
    None when no bar has a length."""
    if not items or not any(v for _, v in items):
        return None
    peak = max(v for _, v in items) or 1.0
    drawn = [Bar(label, 24 + 24 * i, 37 + 24 * i, f"{300 * value / peak:.1f}", f"{126 + 300 * value / peak:.1f}",
                 f"{value:.3g}") for i, (label, value) in enumerate(items)]
    return Chart(24 * len(items) + 28, drawn)


def diff_words(before: str, after: str) -> list[tuple[str, str]]:
    """`before` -> `after` word by word: ("equal" | "del" | "ins", words); the `word_diff` macro strikes and
    underlines them."""
    a, b = before.split(), after.split()
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            out.append(("equal", " ".join(a[i1:i2])))
        if op in ("delete", "replace"):
            out.append(("del", " ".join(a[i1:i2])))
        if op in ("insert", "replace"):
            out.append(("ins", " ".join(b[j1:j2])))
    return out


ENV = Environment(loader=FileSystemLoader(_HERE.parent), autoescape=True, undefined=StrictUndefined,
                  keep_trailing_newline=False, finalize=_printed, extensions=[_JoinLines])
ENV.filters.update(echo=echo, pretty_json=lambda value: json.dumps(value, indent=2, ensure_ascii=False))
ENV.globals.update(css=Markup(CSS), filter_js=Markup(FILTER_JS), bars=bars, diff_words=diff_words)


def render(template: str, **context: Any) -> str:
    """A page from its template, named by its path from the project root (`programs/archehr/report.html.j2`)."""
    return ENV.get_template(template).render(**context)


# --- for pages whose body is built in Python (sweep_report, a contract's default page) ------------------------------
def page(title: str, body: str, script: str = FILTER_JS) -> str:
    return render("common/report.html.j2", title=title, body=Markup(body), filter_js=Markup(script))


def _macros() -> Any:
    return ENV.get_template("common/report_macros.html.j2").module


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], caption: str | None = None) -> str:
    return str(_macros().table(header, rows, caption))


def json_block(value: Any) -> str:
    return str(_macros().json_block(value))


def png_inline(path: Path, alt: str) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode()
    return f'<img alt="{esc(alt)}" src="data:image/png;base64,{data}" style="max-width:100%">'
