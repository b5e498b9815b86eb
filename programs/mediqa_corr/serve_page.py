"""The MEDIQA-CORR part of the page `task=serve` shows at `/` (serving/page.py assembles it): a note in; the flag,
the flagged sentence and its correction, the official line and the agent trace (folded) out. The form is
serve_page.html, the script serve_page.js, both beside this file."""

from pathlib import Path

_HERE = Path(__file__).parent
FORM = (_HERE / "serve_page.html").read_text(encoding="utf-8").removesuffix("\n")
SCRIPT = "\n" + (_HERE / "serve_page.js").read_text(encoding="utf-8")
