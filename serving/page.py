"""The page `task=serve` shows at `/`: one self-contained HTML file that sends what a person pastes to the program's
JSON endpoint and shows the result, every echoed text set as text in its own `<bdi>`, never as HTML. A configured
token is asked for and kept in the page only, never in a URL or storage. The page's skeleton and stylesheet are
page.html, its script page.js, both beside this file."""

from __future__ import annotations

import json
from pathlib import Path
from string import Template
from typing import Any

from common.html import esc

_HERE = Path(__file__).parent
# the page's skeleton with its stylesheet ($-placeholders; the file's final newline is not the page's) and its script
_PAGE = Template((_HERE / "page.html").read_text(encoding="utf-8").removesuffix("\n"))
_JS = "\n" + (_HERE / "page.js").read_text(encoding="utf-8")


def page(program: str, lm_name: str, path: str, needs_token: bool, limits: dict[str, Any],
         parts: tuple[str, str] | None) -> str:
    """The page for `program` (its endpoint `path`). `parts` is the contract's `serve_page()` (form HTML, script): the
    script defines `programBody()` (the request body) and `programRender(data)` (a node showing a response), and may
    use this page's `el`, `noteList` and `cite` (page.js); without parts the page points to the JSON API."""
    config = json.dumps({"program": program, "lm": lm_name, "path": path, "needs_token": needs_token,
                         "limits": limits}).replace("<", "\\u003c")
    limits_line = (f"Limits: {limits['max_request_bytes']:,} bytes a request, {limits['max_sentences']:,} sentences, "
                   f"{limits['timeout_s']} s.")
    if parts is None:
        body, script = (f'<p>program={esc(program)} has no page of its own: use its JSON API (POST {esc(path)}, '
                        '<a href="/openapi.json">openapi.json</a>).</p>'), ""
    else:
        form, program_script = parts
        token = ('<label for="token">Access token (this server requires one)</label>'
                 '<input type="password" id="token" autocomplete="off">') if needs_token else ""
        body = form + token + '<button id="run" type="button">Run</button><div id="status" aria-live="polite"></div>' \
            '<div id="result"></div>'
        script = _JS + program_script
    return _PAGE.substitute(program=esc(program), lm=esc(lm_name), path=esc(path), limits=esc(limits_line), body=body,
                            config=config, script=script)
