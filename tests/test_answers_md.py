"""answers.md (issue 53): what a person reads, per case each answer sentence with the note sentences it cites quoted
beneath it and its grounding verdict (ArchEHR), per note the flagged sentence and its correction (MEDIQA-CORR); and
MEDIQA-CORR's plain notes loaded and written back by its contract, as a run does."""

from __future__ import annotations

import json

import pytest

from common.contract import contract_for
from common.report_text import md
from programs.archehr.answers_md import render as archehr_answers
from programs.mediqa_corr.answers_md import render as mediqa_answers
from tasks.archehr.data import AnswerSentence, Case, NoteSentence
from tasks.mediqa_corr.data import Note, load_notes
from tests.builders import config

pytestmark = pytest.mark.unit

NOTE = (NoteSentence("1", "HOSPITAL COURSE:"), NoteSentence("2", "Admitted by [**Name**] with *cellulitis* <!-- x."),
        NoteSentence("3", "Treated with cefazolin."), NoteSentence("4", "Discharged on cephalexin."))
CASE = Case("c1", "Why antibiotics\nat home?", (), None, None, NOTE)


def generated(**extra):
    return {"case_id": "c1", "clinician_question": "Why was cephalexin prescribed?", "answer": "x",
            "alignment_source": "generated", "grounding": None,
            "answer_sentences": [{"id": "1", "text": "He had cellulitis."}, {"id": "2", "text": "He takes cephalexin."}],
            "alignment": [{"answer_id": "1", "evidence_id": ["2", "3"]}, {"answer_id": "2", "evidence_id": ["4"]}],
            **extra}


def test_each_answer_sentence_is_followed_by_its_cited_sentences_quoted_and_escaped():
    text = archehr_answers("archehr", "notes.jsonl", [CASE], [generated()], {}, "none")
    assert "**Message:** Why antibiotics at home?" in text  # one line: a newline in the message cannot start a block
    assert "**Clinician question:** Why was cephalexin prescribed?" in text
    assert "grounding not checked: program/archehr/grounding=none" in text
    assert ("1. He had cellulitis.\n"
            "   > - [2] Admitted by \\[\\*\\*Name\\*\\*\\] with \\*cellulitis\\* \\<!-- x.\n"
            "   > - [3] Treated with cefazolin.\n"
            "2. He takes cephalexin.\n"
            "   > - [4] Discharged on cephalexin.\n") in text


def test_grounding_verdicts_and_dropped_sentences_are_shown():
    verdicts = [{"answer_id": "1", "verdict": "supported", "support_ids": ["2"], "reasons": []},
                {"answer_id": "2", "verdict": "not in the note", "support_ids": [], "reasons": ["dose 500 mg"],
                 "text": "He takes 500 mg."}]
    record = generated(grounding=verdicts, answer_sentences=[{"id": "1", "text": "He had cellulitis."}],
                       alignment=[{"answer_id": "1", "evidence_id": ["2"]}])
    text = archehr_answers("archehr", "notes.jsonl", [CASE], [record], {}, "claims")
    assert "1. He had cellulitis. — *supported*\n   > - [2]" in text
    assert "*Dropped by the grounding check:*\n\n1. He takes 500 mg. — *not in the note* (dose 500 mg)\n" \
           "   > - (cites no note sentence)" in text
    assert "grounding not checked" not in text


def test_a_case_whose_answer_sentences_were_given_shows_both_and_the_cut_sentences():
    case = Case("c1", "Why?", (), "Why cephalexin?", None, NOTE, (AnswerSentence("1", "Cellulitis was treated."),))
    record = {"case_id": "c1", "clinician_question": "Why was he treated?", "answer": "Treated with cefazolin.",
              "alignment_source": "reference", "grounding": None, "answer_sentences": [],
              "alignment": [{"answer_id": "1", "evidence_id": ["3"]}]}
    text = archehr_answers("archehr", "x.xml", [case], [record], {"c1": [["3", "4"]]}, "none")
    assert "*The case's clinician question:* Why cephalexin?" in text
    assert "*Note sentences 3-4 are one sentence of the note cut by length" in text
    assert "1. Treated with cefazolin.\n   > - [3] Treated with cefazolin.\n" in text  # the quote it is
    assert "**The case's answer sentences, aligned (Subtask 4):**\n\n1. Cellulitis was treated.\n   > - [3]" in text


def test_cases_without_a_record_yet_are_counted_and_left_out():
    text = archehr_answers("archehr", "x.xml", [CASE, Case("c2", "Why?")], [generated()], {}, "none")
    assert text.startswith("# Answers: program=archehr, 1 of 2 cases") and "## Case c2" not in text


def test_mediqa_answers_quote_the_flagged_sentence_and_its_correction():
    notes = [Note("n1", "t", (("0", "Pain for 2 days."), ("1", "Given aspirin 5 g."))), Note("n2", "t", (("0", "Ok."),))]
    records = [{"text_id": "n1", "flag": 1, "sentence_id": 1, "corrected": "Given aspirin 325 mg.", "outcome": "accepted"},
               {"text_id": "n2", "flag": 0, "sentence_id": -1, "corrected": "NA", "outcome": "no_error"}]
    text = mediqa_answers("notes.jsonl", notes, records, {})
    assert ("**Flagged sentence** [1] (outcome: accepted):\n\n> Given aspirin 5 g.\n\n**Correction:**\n\n"
            "> Given aspirin 325 mg.") in text
    assert "## Note n2\n\nNo error flagged (outcome: no\\_error)." in text


def test_mediqa_contract_reads_plain_notes_and_writes_them_back_numbered(tmp_path):
    notes = tmp_path / "notes.jsonl"
    notes.write_text(json.dumps({"id": "n1", "note": "Pain for 2 days. Given aspirin 5 g."}) + "\n", encoding="utf-8")
    cfg = config("program=mediqa_corr", f"data.path={notes}")
    contract = contract_for(cfg)
    inputs = contract.load(cfg)
    assert [n.sentences for n in inputs.items] == [(("0", "Pain for 2 days."), ("1", "Given aspirin 5 g."))]
    assert contract.score(cfg, inputs, []) is None  # plain notes carry no labels
    record = {"text_id": "n1", "flag": 1, "sentence_id": 1, "corrected": "Given aspirin 325 mg.", "outcome": "accepted"}
    written = contract.write_readable(cfg, inputs, [record], tmp_path)
    assert [p.name for p in written] == ["answers.md", "numbered_notes.csv"]
    assert load_notes(tmp_path / "numbered_notes.csv") == inputs.items
    assert "> Given aspirin 5 g." in (tmp_path / "answers.md").read_text(encoding="utf-8")


def test_md_keeps_text_one_line_and_literal():
    assert md("a\n\n# b_c") == "a \\# b\\_c"


# --- bidi controls in echoed text (issue 69) ---------------------------------------------------------------------------
def test_a_right_to_left_override_in_a_note_sentence_is_isolated_on_its_own_line():
    """A U+202E in a note sentence reversed the rest of the rendered line, verdict included (`detroppus —`)."""
    note = (NoteSentence("1", "Seen \u202eby the team."), NoteSentence("2", "x\u2069\u202e closer first."))
    case = Case("c1", "Why?", (), None, None, note)
    record = generated(answer_sentences=[{"id": "1", "text": "He was seen \u202eby the team."}],
                       alignment=[{"answer_id": "1", "evidence_id": ["1", "2"]}],
                       grounding=[{"answer_id": "1", "verdict": "supported"}])
    text = archehr_answers("archehr", "notes.jsonl", [case], [record], {}, "similarity")
    assert "1. \u2068He was seen \u202eby the team.\u202c\u2069 — *supported*" in text
    assert "   > - [1] \u2068Seen \u202eby the team.\u202c\u2069\n" in text
    # a closer without its opener is dropped: it would end the isolate early and free the override after it
    assert "   > - [2] \u2068x\u202e closer first.\u202c\u2069\n" in text
    assert md("plain text") == "plain text"  # text without bidi controls is written as it was


def test_a_bidi_control_after_the_full_stop_gives_no_double_period():
    from programs.archehr.answer.extractive import ExtractiveAnswer

    answer = ExtractiveAnswer(max_words=75, soft_cut_ratio=0.6, choose="note_order")
    said = answer(clinician_question="Why?", evidence=[NoteSentence("1", "Treated for pneumonia.\u202c")],
                  note_excerpt="").answer
    assert said == "Treated for pneumonia.\u202c"
