"""report.html in a real browser: headless Chromium (Debian's package) driven by Playwright, no browser download.

Checks: one section per case, the highlighted sentences are the run's selection, every citation link resolves to a
note sentence element, filters change what is shown, no console errors, no network requests. Saves screenshots."""

import json
from pathlib import Path

import pytest

from tests.browser import NEEDS_CHROMIUM
from tests.cli import dispatch_run
from tests.conftest import ROOT

pytestmark = [pytest.mark.integration, NEEDS_CHROMIUM]


def open_page(browser, path: Path, width: int = 1280):
    page = browser.new_page(viewport={"width": width, "height": 900})
    errors, requests = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(path.as_uri())
    return page, errors, requests


def test_archehr_report_in_chromium(browser, tmp_path):
    out = tmp_path / "run"
    proc = dispatch_run(f"data.cases={ROOT / 'data/archehr/dev_cases.xml'}", "data.limit=6", f"hydra.run.dir={out}",
                        quiet=True)  # the default run, in process
    assert proc.returncode == 0, proc.stderr[-1500:]
    records = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    page, errors, requests = open_page(browser, out / "report.html")
    assert page.locator("section.case").count() == len(records) == 6
    for r in records:
        selected = page.locator(f"#case-{r['case_id']} .sent.selected").evaluate_all(
            "els => els.map(e => e.id.split('-s').pop())")
        assert selected == r["evidence_ids"]
    links = page.locator("a.cite").evaluate_all("els => els.map(e => e.getAttribute('href'))")
    assert links and all(page.locator(href).count() == 1 for href in links)
    assert page.locator(links[0]).evaluate("e => e.classList.contains('sent')")
    shown = lambda: page.locator("section.case:visible").count()  # noqa: E731
    disagreeing = sum(1 for c in page.locator("section.case").evaluate_all("els => els.map(e => e.dataset.errors)")
                      if c == "1")
    page.get_by_label("only disagreements with gold").check()
    assert shown() == disagreeing
    page.get_by_label("only cases with fallbacks").check()  # the no-LM program has none: nothing is shown
    with_fallbacks = sum(1 for r in records if r["fallbacks"])
    assert shown() == with_fallbacks == 0 and page.locator("#shown-count").inner_text() == "0 of 6 shown"
    page.get_by_label("only disagreements with gold").uncheck()
    page.get_by_label("only cases with fallbacks").uncheck()
    assert shown() == 6
    form = page.locator("h2:text-is('Questions') + table tbody tr").evaluate_all(
        "rows => rows.map(r => Array.from(r.cells).map(c => c.innerText))")
    assert form[0] == ["questions", "6"] and form[1][0] == "most common 4-word opening"  # the run's question form
    # the question stage's candidates: what it weighed, the pick first, behind a summary line
    for r in records:
        candidates = page.locator(f"#case-{r['case_id']} details.candidates")
        assert candidates.count() == 1 and not candidates.evaluate("e => e.open")
        candidates.locator("summary").click()
        cells = candidates.locator("tbody tr").evaluate_all(
            "rows => rows.map(r => Array.from(r.cells).map(c => c.innerText))")
        assert [row[0] for row in cells] == [c["question"] for c in r["question_candidates"]]
        assert cells[0][0] == r["clinician_question"] and cells[0][-1] == "picked"
        assert all(row[-1] != "picked" for row in cells[1:])
    page.keyboard.press("Tab")  # keyboard reachable: focus lands on a control or a link
    assert page.evaluate("document.activeElement.tagName") in ("A", "INPUT")
    page.screenshot(path=str(tmp_path / "archehr_1280.png"), full_page=False)
    phone, phone_errors, _ = open_page(browser, out / "report.html", width=390)
    phone.locator("details.candidates").evaluate_all("els => els.forEach(e => { e.open = true; })")
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390 + 1  # no horizontal scroll at phone width
    phone.screenshot(path=str(tmp_path / "archehr_390.png"))
    assert errors == [] and phone_errors == []
    assert all(url.startswith("file://") for url in requests), requests  # no network, no CDN


def test_mediqa_report_in_chromium(browser, tmp_path, dummy_lm):
    from common.config_groups import compose_config
    from programs.mediqa_corr.contract import MediqaCorrContract
    from tasks.mediqa_corr.data import load_notes
    from tests.builders import program

    notes = load_notes(ROOT / "data/mediqa_corr/MEDEC-MS-ValidationSet-with-GroundTruth-and-ErrorType.csv", 2)
    step = {"observation": "o", "thought": "t", "action": "final_mistake", "search_query": "", "sentence_id": 5,
            "corrected_sentence": "Culture tests indicate Trichomonas vaginalis."}
    reviews = [{"reasoning": "fine", "score": 4}] * 5
    dummy_lm([step, *reviews, {"corrected_sentence": "Culture tests indicate Trichomonas vaginalis."},
              {**step, "action": "no_error", "sentence_id": -1, "corrected_sentence": ""}])
    agent, contract = program("mediqa_corr"), MediqaCorrContract()
    records = [contract.predict(agent, n) for n in notes]
    cfg = compose_config("program=mediqa_corr")
    path = tmp_path / "report.html"
    path.write_text(contract.report_html(cfg, contract.load(cfg), records, contract.usage(records), None))
    page, errors, requests = open_page(browser, path)
    assert page.locator("section.case").count() == 2
    assert page.locator("#note-ms-val-0 .tag", has_text="flagged by the program").count() == 1
    assert page.locator("#note-ms-val-0 ins").count() >= 1  # the correction as a word diff
    page.locator("#note-ms-val-0 summary").click()
    assert page.locator("#note-ms-val-0 caption", has_text="MedEval: accepted").is_visible()
    page.get_by_label("only notes the program corrected").check()
    assert page.locator("section.case:visible").count() == 1
    page.screenshot(path=str(tmp_path / "mediqa.png"))
    assert errors == [] and all(url.startswith("file://") for url in requests)


def test_right_to_left_overrides_in_a_run_do_not_flip_the_reports_own_text(browser, tmp_path):
    """Issue #54 item 4: in report.html the citation links after a sentence holding U+202E showed reversed, so the id a
    reader saw was not the id the link pointed to. Every echoed text is isolated (<bdi>)."""
    from common.config_groups import compose_config
    from programs.archehr.report_html import render
    from tasks.archehr.data import Case, NoteSentence

    rlo, rli = "\u202e", "\u2067"
    sentences = tuple(NoteSentence(str(i), f"Sentence {i} of the note{rlo if i % 2 else rli}") for i in range(1, 5))
    case = Case("c1" + rlo, "Why was it held?" + rlo, sentences=sentences)
    answer = [{"id": "1", "text": "Lisinopril was held" + rlo}, {"id": "2", "text": "It was restarted" + rli}]
    record = {"case_id": case.case_id, "clinician_question": "Why was it held?" + rlo, "evidence_ids": ["12", "3"],
              "answer": "x", "alignment_source": "generated", "answer_sentences": answer, "seconds": 1.0,
              "alignment": [{"answer_id": "1", "evidence_id": ["12", "3"]}, {"answer_id": "2", "evidence_id": ["4"]}],
              "grounding": [{"answer_id": "1", "text": "", "verdict": "contradicted", "reasons": ["r" + rlo]}],
              "fallbacks": {}, "scores": {"1": 5, "2": 1, "3": 5, "4": 4}}
    path = tmp_path / "report.html"
    path.write_text(render(compose_config("program=archehr"), [case], None, [record], {}, None), encoding="utf-8")
    page, errors, _ = open_page(browser, path)
    xs = """el => { const t = el.textContent; const out = [];
      const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
      for (let n = walker.nextNode(); n; n = walker.nextNode())
        for (let i = 0; i < n.length; i++) {
          if (!n.data[i].trim() || n.data.charCodeAt(i) >= 0x2000) continue;
          const r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + 1); out.push(r.getBoundingClientRect().x);
        }
      return out; }"""
    cites = page.locator("a.cite")
    assert cites.count() == 3
    for i in range(cites.count()):
        positions = cites.nth(i).evaluate(xs)
        assert positions == sorted(positions), cites.nth(i).inner_text()  # "[12]" reads [12], not ]21[
    metas = page.locator(".sent .meta")
    for i in range(metas.count()):
        positions = metas.nth(i).evaluate(xs)
        assert positions == sorted(positions), metas.nth(i).inner_text()
    page.screenshot(path=str(tmp_path / "archehr_right_to_left.png"), full_page=True)
    assert errors == []
