"""`numbered_cases.xml`: the numbered notes a run of plain rows used, as official ArchEHR-QA XML, so cited ids can be
read back, a key written against them, and `data.cases=numbered_cases.xml` reruns on the same sentences."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence

from tasks.archehr.data import Case


def _child(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    elem = ET.SubElement(parent, tag, attrs)
    if text is not None:
        elem.text = text
    return elem


def _comment(text: str) -> ET.Element:
    return ET.Comment(" " + text.replace("--", "- -") + " ")  # "--" may not occur inside an XML comment


def cases_xml(cases: Sequence[Case], cut: Mapping[str, Sequence[Sequence[str]]], source: str, max_chars: int) -> str:
    """The `<annotations>` document of `cases`; each group of `cut` (case id -> ids of a sentence cut by length)
    becomes a comment in its case."""
    root = ET.Element("annotations")
    root.append(_comment(f"numbered by clinprog from {source}: each note split into sentences by common/note_text"))
    for case in cases:
        elem = _child(root, "case", id=case.case_id)
        for group in cut.get(case.case_id, ()):
            elem.append(_comment(f"sentences {group[0]}-{group[-1]}: one sentence of the note over {max_chars} "
                                 "characters with no sentence end the splitter knows, cut by length"))
        _child(elem, "patient_narrative", case.patient_narrative)
        if case.patient_question_phrases:
            phrases = _child(elem, "patient_question")
            for n, phrase in enumerate(case.patient_question_phrases):
                _child(phrases, "phrase", phrase, id=str(n))
        if case.clinician_question:
            _child(elem, "clinician_question", case.clinician_question)
        if case.note_excerpt:
            _child(elem, "note_excerpt", case.note_excerpt)
        sentences = _child(elem, "note_excerpt_sentences")
        for s in case.sentences:
            _child(sentences, "sentence", s.text, id=s.id)
        if case.answer_sentences:
            answers = _child(elem, "answer_sentences")
            for a in case.answer_sentences:
                _child(answers, "sentence", a.text, id=a.id)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode") + "\n"
