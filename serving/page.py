"""The page `task=serve` shows at `/`: one self-contained HTML file that sends what a person pastes to the program's
JSON endpoint and shows the result, every echoed text set as text in its own `<bdi>`, never as HTML. A configured
token is asked for and kept in the page only, never in a URL or storage."""

from __future__ import annotations

import json
from typing import Any

from common.html import esc

_CSS = """
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d2430;background:#f6f7f9}
header{background:#24324a;color:#fff;padding:.7em 1.2em}header h1{font-size:1.15em;margin:0}
header p{margin:.2em 0 0;color:#c9d3e3;font-size:.9em}main{max-width:1100px;margin:0 auto;padding:1em}
label{display:block;font-weight:600;margin:.8em 0 .3em}textarea{width:100%;box-sizing:border-box;font:inherit;
padding:.5em;border:1px solid #b8c0cc;border-radius:4px}input[type=password]{font:inherit;padding:.3em}
button{font:inherit;font-weight:600;padding:.5em 1.4em;margin-top:.8em;border:0;border-radius:4px;background:#2f6fd6;
color:#fff;cursor:pointer}button:disabled{background:#8aa3c9;cursor:wait}.muted{color:#5b6575;font-size:.9em}
#status{margin:.8em 0;min-height:1.4em}#status.running::before{content:"";display:inline-block;width:.9em;height:.9em;
margin-right:.5em;border:2px solid #2f6fd6;border-right-color:transparent;border-radius:50%;
animation:spin .8s linear infinite;vertical-align:-2px}@keyframes spin{to{transform:rotate(360deg)}}
.refusal{background:#ffe3e3;border-left:5px solid #c62828;padding:.6em .8em;white-space:pre-wrap}
section.result{background:#fff;border:1px solid #d9dee6;border-radius:6px;padding:.4em 1em 1em;margin-top:1em}
ol.note{padding-left:0;list-style:none}ol.note li{padding:.15em .4em;border-radius:3px;margin:.1em 0}
ol.note li .sid{display:inline-block;min-width:2.4em;color:#5b6575}
li.essential{background:#fff0a8;border-left:4px solid #c79a00}li.supplementary{background:#fff8d9;
border-left:4px solid #e8d27a}li.target{outline:2px solid #2f6fd6}.legend span{padding:0 .4em;margin-right:.6em}
.legend .essential{background:#fff0a8}.legend .supplementary{background:#fff8d9}
.answer p{margin:.35em 0}a.cite{margin-left:.2em;font-size:.85em}.verdict{font-size:.8em;padding:.05em .4em;
border-radius:3px;margin-left:.4em}.verdict.supported{background:#dff3e3}.verdict.flagged{background:#ffd6d6}
p.flagged{background:#ffe3e3;border-left:5px solid #c62828;padding-left:.4em}pre{white-space:pre-wrap;font-size:.85em}
"""

_JS = r"""
const cfg = JSON.parse(document.getElementById('config').textContent);
const $ = (id) => document.getElementById(id);
// Every text child is set as text inside its own <bdi>: a note sentence, a question or an id holding U+202E (a
// right-to-left override) or U+2067 cannot reorder the page's own words after it ("(essential)" shown as
// "(laitnesse)", a citation's [3] as ]3[). So echoed text goes in as its own child, never pasted into a label.
function text(value) {
  const node = document.createElement('bdi');
  node.textContent = String(value ?? '');
  return node;
}
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  for (const c of children) node.append(c instanceof Node ? c : text(c));
  return node;
}
function status(text, cls) { const s = $('status'); s.className = cls || ''; s.textContent = text; }
async function run() {
  $('result').replaceChildren();
  const button = $('run');
  button.disabled = true;
  const started = Date.now();
  status('Running… 0 s', 'running');
  const timer = setInterval(() => status(`Running… ${Math.round((Date.now() - started) / 1000)} s`, 'running'), 500);
  try {
    const headers = {'Content-Type': 'application/json'};
    if (cfg.needs_token) headers['Authorization'] = 'Bearer ' + $('token').value;
    const response = await fetch(cfg.path, {method: 'POST', headers, body: JSON.stringify(await programBody())});
    let data = null;
    try { data = await response.json(); }
    catch (e) { data = {error: `the server answered HTTP ${response.status} without JSON`}; }
    clearInterval(timer);
    if (!response.ok || data.error) {
      status('');
      $('result').replaceChildren(el('div', {class: 'refusal', role: 'alert'},
        `Refused (HTTP ${response.status}): `, data.error || JSON.stringify(data)));
      return;
    }
    status(`Done in ${data.seconds == null ? '?' : Number(data.seconds).toFixed(2)} s.`);
    $('result').replaceChildren(programRender(data));
  } catch (e) {
    clearInterval(timer);
    status('');
    $('result').replaceChildren(el('div', {class: 'refusal', role: 'alert'}, 'Could not reach the server: ', e));
  } finally { button.disabled = false; }
}
function noteList(sentences, classOf) {
  const list = el('ol', {class: 'note'});
  for (const s of sentences) {
    const cls = classOf(s.id);
    const item = el('li', {id: 's-' + s.id, class: cls, 'data-id': s.id}, el('span', {class: 'sid'}, '[', s.id, ']'), s.text);
    if (cls) item.append(el('span', {class: 'muted'}, ` (${cls})`));
    list.append(item);
  }
  return list;
}
function cite(id) {
  const link = el('a', {class: 'cite', href: '#s-' + id}, '[', id, ']');
  link.addEventListener('click', () => {
    document.querySelectorAll('li.target').forEach((n) => n.classList.remove('target'));
    const target = document.getElementById('s-' + id);
    if (target) target.classList.add('target');
  });
  return link;
}
$('run').addEventListener('click', run);
"""


def page(program: str, lm_name: str, path: str, needs_token: bool, limits: dict[str, Any],
         parts: tuple[str, str] | None) -> str:
    """The page for `program` (its endpoint `path`). `parts` is the contract's `serve_page()` (form HTML, script): the
    script defines `programBody()` (the request body) and `programRender(data)` (a node showing a response), and may
    use this page's `el`, `noteList` and `cite`; without parts the page points to the JSON API."""
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
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>clinprog: {esc(program)}</title>'
            f'<meta name="viewport" content="width=device-width,initial-scale=1">'
            '<link rel="icon" href="/favicon.ico" type="image/svg+xml">'
            f'<style>{_CSS}</style></head><body>'
            f'<header><h1>clinprog · program={esc(program)}</h1><p>lm={esc(lm_name)} · the JSON API: POST '
            f'{esc(path)} · <a style="color:#c9d3e3" href="/openapi.json">openapi.json</a> · {esc(limits_line)}</p>'
            f'</header><main>{body}</main>'
            f'<script type="application/json" id="config">{config}</script>'
            f'<script>{script}</script></body></html>')
