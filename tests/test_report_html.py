"""The run reports are Jinja2 templates with autoescape: a case, note or record whose texts hold markup and a
right-to-left override (U+202E) shows them as characters, each echoed text isolated in <bdi> (the override cannot
reorder the page's own words after it); compile_report.html escapes an instruction or demo the same way."""

from html.parser import HTMLParser

import pytest

from common.config_groups import compose_config
from tasks.archehr.data import Case, KeyCase, NoteSentence
from tasks.mediqa_corr.data import Note

pytestmark = pytest.mark.unit

RLO = "\u202e"
HOSTILE = f"<script>alert('x')</script>{RLO}"


class Page(HTMLParser):
    """The page's script elements, and each piece of text holding U+202E with the elements around it."""

    VOID = {"meta", "input", "img", "br"}

    def __init__(self, html: str) -> None:
        super().__init__()
        self.open: list[str] = []
        self.scripts, self.isolated, self.exposed, self.text = 0, 0, [], []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.scripts += tag == "script"
        if tag not in self.VOID:
            self.open.append(tag)

    def handle_endtag(self, tag):
        while self.open and self.open.pop() != tag:
            pass

    def handle_data(self, data):
        self.text.append(data)
        if RLO in data:
            if "bdi" in self.open:
                self.isolated += 1
            else:
                self.exposed.append((data, list(self.open)))


def test_an_archehr_record_with_markup_and_an_override_is_escaped_and_isolated():
    from programs.archehr.report_html import render

    sentences = (NoteSentence("1", "First " + HOSTILE), NoteSentence("2", "Second."))
    case = Case("c1", "Why " + HOSTILE + " now?", (HOSTILE,), clinician_question="Ref " + HOSTILE,
                sentences=sentences)
    record = {"case_id": "c1", "clinician_question": HOSTILE, "evidence_ids": ["1"], "scores": {"1": 5},
              "selection": HOSTILE, "answer": "x", "alignment_source": "generated",
              "answer_sentences": [{"id": "1", "text": "Said " + HOSTILE}, {"id": "2", "text": "Also " + HOSTILE}],
              "alignment": [{"answer_id": "1", "evidence_id": ["1"]}],
              "grounding": [{"answer_id": "1", "text": "", "verdict": HOSTILE, "reasons": [HOSTILE]},
                            {"answer_id": "2", "text": "", "verdict": "supported", "reasons": [],
                             "judge": {"unavailable": HOSTILE}}],
              "fallbacks": {HOSTILE: "x"}, "degenerate": {"answer": HOSTILE},
              "question_candidates": [{"question": HOSTILE, "eligible": False, "excluded": HOSTILE}]}
    key = {"c1": KeyCase("c1", {"1": HOSTILE, "2": "essential"})}
    page = Page(render(compose_config("program=archehr"), [case], key, [record],
                       {"fallbacks": {HOSTILE: 1}}, {"subtask_1": {"invalid": HOSTILE}}))
    assert page.scripts == 1  # the page's own filters, nothing from the record
    assert page.exposed == [] and page.isolated == 16
    assert "".join(page.text).count("<script>alert('x')</script>") == 17  # shown as characters (+ usage.json)


def test_a_mediqa_record_with_markup_and_an_override_is_escaped_and_isolated():
    from programs.mediqa_corr.report_html import render

    note = Note("ms-1", "t", (("0", "A " + HOSTILE), ("1", "He is given penicillin.")), 1, 1,
                "He is given penicillin.", "He is given " + HOSTILE)
    step = {"action": "search", "observation": HOSTILE, "thought": HOSTILE, "query": HOSTILE, "results": HOSTILE,
            "passages": [{"id": HOSTILE, "title": HOSTILE, "source": HOSTILE}], "note": HOSTILE}
    record = {"text_id": "ms-1", "flag": 1, "sentence_id": 1, "corrected": "He is given " + HOSTILE,
              "outcome": HOSTILE, "line": HOSTILE, "repairs": {HOSTILE: 1},
              "episodes": [{"steps": [step, HOSTILE, {"parsed": False, "note": HOSTILE}],
                            "proposal": {"sentence_id": 1, "corrected": HOSTILE}, "accepted": False,
                            "reviews": [{"criterion": HOSTILE, "score": 2, "reasoning": HOSTILE}],
                            "reflection": HOSTILE}]}
    page = Page(render(compose_config("program=mediqa_corr"), [note], [record], {"outcomes": {HOSTILE: 1}}, None))
    assert page.scripts == 1 and page.exposed == [] and page.isolated == 19
    assert "".join(page.text).count("<script>alert('x')</script>") == 21  # + 2 dicts shown whole


def test_a_compile_report_with_markup_in_its_instructions_shows_it_as_text():
    from reports.compile_report import html

    predictor = {"predictor": HOSTILE, "verdict": "rejected", "adopted": False, "reasons": [HOSTILE],
                 "instruction_before": HOSTILE, "instruction_proposed": HOSTILE + "!", "instruction_after": HOSTILE,
                 "demos_before": [{"case": HOSTILE}], "demos_after": []}
    report = {"program": HOSTILE, "optimizer": "gepa", "metric": HOSTILE, "train_size": 1, "val_size": 1,
              "scores": {"before": 0.1, "after": 0.2, "proposed": None}, "overlap_warning": HOSTILE,
              "adoption": {"refused": HOSTILE}, "curated_demos": {"q": [HOSTILE]}, "saved": HOSTILE,
              "optimizer_config": {"x": HOSTILE}, "predictors": [predictor]}
    page = Page(html(report))
    assert page.scripts == 1  # the page's own (empty) script element
    assert "".join(page.text).count("<script>alert('x')</script>") == 15
