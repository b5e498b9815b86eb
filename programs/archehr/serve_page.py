"""The ArchEHR part of the page `task=serve` shows at `/` (serving/page.py assembles it): the form and how a
response is shown: the clinician question, the answer with citation links and grounding verdicts, the note with
the evidence highlighted. Everything from the response is set as text (the page's `el` helper), never as HTML.
The form is serve_page.html, the script serve_page.js, both beside this file."""

from pathlib import Path

_HERE = Path(__file__).parent
FORM = (_HERE / "serve_page.html").read_text(encoding="utf-8").removesuffix("\n")
SCRIPT = "\n" + (_HERE / "serve_page.js").read_text(encoding="utf-8")
