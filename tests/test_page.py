"""The page `task=serve` shows at `/` (issue #40), in a real browser: Debian's chromium driven by Playwright.

A person pastes a message and a note of their own and sees the question, the highlighted evidence and the cited
answer; HTML and scripts pasted into either box show as text and never run; a 3 MB note gets the API's refusal
line; with a token configured the page asks for it and a wrong one shows the refusal. Screenshots go to
$CLINPROG_SCREENSHOTS (else the test's tmp folder)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from lms.local_server import free_port
from tests.browser import NEEDS_CHROMIUM
from tests.conftest import BUNDLED_CASES
from tests.serve_helpers import Server

pytestmark = [pytest.mark.integration, NEEDS_CHROMIUM]
TOKEN = "page-token-42"
MESSAGE = "My mother fell and broke her hip. Why did they give her shots in the belly after the operation?"
NOTE = ("DISCHARGE SUMMARY\n"
        "Patient underwent hemiarthroplasty of the left hip for a displaced femoral neck fracture.\n"
        "Enoxaparin 40 mg subcutaneously daily was started on postoperative day 1 for DVT prophylaxis and will "
        "continue for 28 days. She worked with physical therapy and walked with a walker. Pain was controlled with "
        "acetaminophen.\nShe was discharged to a rehabilitation facility.")


@pytest.fixture(scope="module")
def archehr(tmp_path_factory):
    # the default program (learned stages, no LM) behind a token: the page asks for it (a page without a token asks
    # for none: tests/test_serve_in_process.py)
    server = Server("program=archehr", f"hydra.run.dir={tmp_path_factory.mktemp('page')}",
                    env={"CLINPROG_SERVE_TOKEN": TOKEN})
    yield server
    server.stop()


@pytest.fixture(scope="module")
def mediqa(tmp_path_factory):
    # MEDIQA-CORR needs an LM; one that is down makes every request the documented fallback (no error flagged)
    dead = f"http://127.0.0.1:{free_port()}/v1"
    server = Server("program=mediqa_corr", "program.search.enabled=false", "lm=openai_compatible",
                    f"lm.client.api_base={dead}", "lm.client.check=false", "lm.client.num_retries=0",
                    f"cache_dir={tmp_path_factory.mktemp('cache')}",
                    f"hydra.run.dir={tmp_path_factory.mktemp('page_mediqa')}")
    yield server
    server.stop()


def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("CLINPROG_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def open_page(browser, server, token: str | None = TOKEN):
    page = browser.new_page(viewport={"width": 1100, "height": 1000})
    errors, dialogs, outside = [], [], []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("request", lambda r: None if r.url.startswith(server.url) else outside.append(r.url))
    page.goto(server.url + "/")
    if token is not None and page.locator("#token").count():
        page.fill("#token", token)
    return page, errors, dialogs, outside


def test_a_pasted_message_and_note_show_the_question_the_evidence_and_the_cited_answer(browser, archehr, tmp_path):
    page, errors, _, outside = open_page(browser, archehr)
    page.fill("#message", MESSAGE)
    page.fill("#note", NOTE)
    page.click("#run")
    page.wait_for_selector("#question", timeout=120_000)
    question = page.inner_text("#question").strip()
    assert question.endswith("?") and 2 <= len(question.split()) <= 15
    page.click("#candidates summary")  # what the stage weighed, the pick first, behind its summary line
    candidates = page.locator("#candidates li")
    assert candidates.count() >= 1 and candidates.first.inner_text().startswith(question + " (score ")
    note = page.locator("ol.note li")
    assert note.count() == 6 and note.nth(0).inner_text().startswith("[1]")  # the pasted text, numbered per sentence
    assert page.locator("ol.note li.essential").count() >= 1
    cites = page.locator("#answer a.cite")
    assert cites.count() >= 1
    for i in range(cites.count()):  # every citation is a note sentence of this note
        target = cites.nth(i).get_attribute("href")
        assert page.locator(target).count() == 1
    cites.first.click()
    assert page.locator("ol.note li.target").count() == 1
    page.screenshot(path=str(shots(tmp_path) / "page_run.png"), full_page=True)
    assert errors == [] and outside == []


def test_html_and_scripts_pasted_into_both_boxes_show_as_text(browser, archehr, tmp_path):
    page, errors, dialogs, _ = open_page(browser, archehr)
    hostile = '<script>window.pwned = 1; alert("x")</script><img src=x onerror="window.pwned = 2">'
    page.fill("#message", f"Is my <b>left</b> knee infected? {hostile}")
    page.fill("#note", f"Left knee effusion was aspirated. {hostile}\nCulture grew no <i>bacteria</i>.")
    page.click("#run")
    page.wait_for_selector("#question", timeout=120_000)
    result = page.inner_text("#result")
    assert "<img src=x" in result or "<script>" in result  # the pasted markup is shown as characters
    assert page.locator("#result img, #result script, #result b, #result i").count() == 0
    assert page.evaluate("window.pwned") is None and dialogs == [] and errors == []
    page.screenshot(path=str(shots(tmp_path) / "page_markup_as_text.png"), full_page=True)


def test_a_3_mb_note_gets_the_apis_refusal_line(browser, archehr, tmp_path):
    page, errors, _, _ = open_page(browser, archehr)
    page.fill("#message", MESSAGE)
    page.evaluate("document.getElementById('note').value = 'The patient is stable. '.repeat(140000)")  # 3.2 MB
    page.click("#run")
    refusal = page.wait_for_selector(".refusal", timeout=60_000).inner_text()
    assert "HTTP 413" in refusal and "is over serve.max_request_bytes=2000000" in refusal
    assert page.locator("#question").count() == 0 and not page.is_disabled("#run")
    page.screenshot(path=str(shots(tmp_path) / "page_too_large.png"))
    assert errors == []


def test_with_a_token_the_page_asks_for_it_and_a_wrong_one_is_refused(browser, archehr, tmp_path):
    page, errors, _, _ = open_page(browser, archehr, token=None)
    assert page.locator("#token").count() == 1
    page.fill("#message", MESSAGE)
    page.fill("#note", NOTE)
    page.fill("#token", "wrong")
    page.click("#run")
    refusal = page.wait_for_selector(".refusal", timeout=60_000).inner_text()
    assert "HTTP 401" in refusal and "missing or wrong bearer token" in refusal and "Traceback" not in refusal
    page.screenshot(path=str(shots(tmp_path) / "page_wrong_token.png"))
    page.fill("#token", TOKEN)
    page.click("#run")
    page.wait_for_selector("#question", timeout=120_000)
    assert page.locator(".refusal").count() == 0 and errors == []
    assert TOKEN not in page.url


def test_the_mediqa_page_numbers_a_pasted_note_and_shows_the_fallback_when_the_lm_is_down(browser, mediqa, tmp_path):
    page, errors, _, _ = open_page(browser, mediqa, token=None)
    assert page.locator("#message").count() == 0  # a note only
    page.fill("#note", "A 45-year-old man has fever and a red, warm abscess on his thigh.\n"
                       "He is treated with penicillin for MRSA. Culture <b>is</b> pending.")
    page.click("#run")
    page.wait_for_selector("#lm-failure", timeout=120_000)
    assert page.inner_text("h2") == "No error found" and "lm=openai_compatible" in page.inner_text("#lm-failure")
    ids = [page.locator("ol.note li").nth(i).get_attribute("data-id") for i in range(page.locator("ol.note li").count())]
    assert ids == ["0", "1", "2"] and page.locator("#result b").count() == 0
    assert page.locator("details summary").inner_text().startswith("Agent trace")
    page.screenshot(path=str(shots(tmp_path) / "page_mediqa_fallback.png"), full_page=True)
    assert errors == []


# the x position of each visible character of an element's text, in reading order of the DOM: increasing for text
# shown left to right, decreasing where a right-to-left override reversed it
CHARACTER_XS = """el => {
  const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  const xs = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode())
    for (let i = 0; i < n.length; i++) {
      if (!n.data[i].trim() || n.data.charCodeAt(i) >= 0x2000) continue;
      const r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + 1);
      xs.push(r.getBoundingClientRect().x);
    }
  return xs;
}"""


def left_to_right(locator) -> bool:
    xs = locator.evaluate(CHARACTER_XS)
    return len(xs) >= 2 and xs == sorted(xs)


RLO, RLI = "\u202e", "\u2067"  # right-to-left override; right-to-left isolate (never closed)


def test_right_to_left_overrides_in_pasted_text_do_not_flip_the_pages_own_words(browser, archehr, tmp_path):
    """Issue #54 item 4: a note sentence holding U+202E showed the page's "(essential)" label as "(laitnesse)" and
    reversed the citation links after it. Every echoed text is isolated in its own <bdi>."""
    page, errors, _, _ = open_page(browser, archehr)
    page.fill("#message", MESSAGE + RLO)
    page.fill("#note", "\n".join(line + (RLO if n % 2 else RLI) for n, line in enumerate(NOTE.splitlines())))
    page.click("#run")
    page.wait_for_selector("#question", timeout=120_000)
    labels = page.locator("ol.note li > span.muted")
    assert labels.count() >= 1
    for i in range(labels.count()):
        assert labels.nth(i).inner_text().strip() in ("(essential)", "(supplementary)")
        assert left_to_right(labels.nth(i)), labels.nth(i).inner_text()
    ids = page.locator("ol.note li > span.sid")
    assert all(left_to_right(ids.nth(i)) for i in range(1, ids.count()))  # "[2]" after sentence 1's override
    cites = page.locator("#answer a.cite")
    assert cites.count() >= 1 and all(left_to_right(cites.nth(i)) for i in range(cites.count()))
    page.screenshot(path=str(shots(tmp_path) / "page_right_to_left.png"), full_page=True)
    assert errors == []


def one_case_xml() -> str:
    text = BUNDLED_CASES.read_text(encoding="utf-8")
    case = re.search(r"<case\b.*?</case>", text, re.S)
    assert case is not None
    return f"<annotations>{case.group(0)}</annotations>"


def test_an_xml_file_is_one_source_and_can_be_cleared_for_the_text_boxes(browser, archehr, tmp_path):
    """Issue #54 item 5: after one upload, a message and note typed in were ignored and the file's case answered
    again. While a file is chosen the boxes are disabled and say why; "Clear the file" gives them back."""
    page, errors, _, _ = open_page(browser, archehr)
    sent: list[dict] = []
    page.on("request", lambda r: sent.append(json.loads(r.post_data)) if r.method == "POST" else None)
    assert page.is_hidden("#clear-xml") and page.is_enabled("#note")
    page.set_input_files("#xml", {"name": "one_case.xml", "mimeType": "text/xml", "buffer": one_case_xml().encode()})
    assert page.is_disabled("#message") and page.is_disabled("#note") and page.is_visible("#clear-xml")
    assert "one_case.xml" in page.inner_text("#source") and "not sent" in page.inner_text("#source")
    page.click("#run")
    page.wait_for_selector("#question", timeout=120_000)
    assert list(sent[-1]) == ["xml_base64"]  # the file's bytes: the server decodes them by the XML's declaration
    page.screenshot(path=str(shots(tmp_path) / "page_xml_chosen.png"), full_page=True)
    page.click("#clear-xml")
    assert page.is_enabled("#message") and page.is_enabled("#note") and page.inner_text("#source") == ""
    page.fill("#message", "Why was my aspirin stopped before the surgery?")
    page.fill("#note", "Aspirin 81 mg was held for 7 days before the operation.\nShe tolerated the procedure well.")
    page.click("#run")
    page.wait_for_function("() => (document.querySelector('ol.note li') || {innerText: ''}).innerText"
                           ".includes('Aspirin 81 mg')", timeout=120_000)
    assert set(sent[-1]) == {"patient_narrative", "note"} and "aspirin" in sent[-1]["patient_narrative"]
    assert page.locator("ol.note li").count() == 2
    page.screenshot(path=str(shots(tmp_path) / "page_xml_cleared.png"), full_page=True)
    assert errors == []



def test_an_iso_8859_1_xml_upload_reads_as_the_command_line_reads_it(browser, archehr, tmp_path):
    """Issue 69: a file declaring ISO-8859-1 came back "Done" with `Trait\ufffde` (the page read it as UTF-8); the
    page now sends the bytes and the server decodes them by the declaration, as `data.cases` reads the file."""
    page, errors, _, _ = open_page(browser, archehr)
    sent: list[dict] = []
    page.on("request", lambda r: sent.append(json.loads(r.post_data)) if r.method == "POST" else None)
    xml = re.sub(r"(<sentence id=\"1\"[^>]*>)", "\\1Trait\u00e9e le 3 mai. ", one_case_xml(), count=1)
    data = ('<?xml version="1.0" encoding="ISO-8859-1"?>\n' + xml).encode("latin-1")
    page.set_input_files("#xml", {"name": "latin1.xml", "mimeType": "text/xml", "buffer": data})
    page.click("#run")
    page.wait_for_selector("ol.note li", timeout=120_000)
    assert list(sent[-1]) == ["xml_base64"]
    first = page.locator("ol.note li").first.inner_text()
    assert "Trait\u00e9e le 3 mai." in first and "\ufffd" not in page.inner_text("body"), first
    path = tmp_path / "latin1.xml"
    path.write_bytes(data)
    from tasks.archehr.data import load_cases

    assert load_cases(path)[0].sentences[0].text in first  # the command line reads the same text
    assert errors == []
