"""Scores equal to the official ArchEHR-QA 2025 `scoring.py` (soni-sarvesh/archehr-qa @ 771b948), 0-100.

Factuality: per case, the union of cited ids against the essential (strict) or essential + supplementary
(lenient) sentences; micro (pooled tp/fp/fn) and macro (mean of per-case P, R, F1) with zero guards;
overall_factuality_score = strict micro F1.
Relevance: ONE pair per case, the whole answer against `narrative + "\\n\\n" + clinician question + "\\n\\n" +
essential sentences joined by "\\n"` (not the cited sentences; SARI: source = narrative + question, reference =
the essential sentences); BLEU, ROUGE, SARI, BERTScore, AlignScore, MEDCON averaged over cases;
overall_relevance_score = mean(alignscore, rougeLsum, bleu, medcon, bertscore, sari) over what is available here;
overall_score = mean(factuality, relevance).
The official script orders the essential sentences by iterating a Python set (the order, and so BLEU, ROUGE-2/L and
SARI, change with PYTHONHASHSEED); this scorer uses document order, the one reproducible choice.
The official loader looks sentence texts up by `case.findall(".//sentence")`: in a 2026-layout file the
`<answer_sentences>` (after the note) overwrite note sentences with the same id, so its essential text is partly
the clinician's answer. This scorer uses the note sentences; `official_sentence_lookup=True`
(`data.official_sentence_lookup=true`) reproduces the official lookup.
"""

from __future__ import annotations

from collections import Counter
from statistics import mean
from typing import Any

from tasks.archehr.data import Case, KeyCase
from tasks.archehr.scoring import MetricsConfig, SubmissionError, bleu_crash_note, model_metrics, overall_of
from tasks.archehr2025.submission import parse_answer
from tasks.sari import sari
from tasks.text_metrics import bleu, rouge

RELEVANCE = ["alignscore", "rougeLsum", "bleu", "medcon", "bertscore", "sari"]


def _ratio(a: int, b: int) -> float:
    return a / b if b else 0.0


def _prf(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    p, r = _ratio(tp, tp + fp), _ratio(tp, tp + fn)
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def factuality(entries: list[tuple[str, frozenset[str]]], key: dict[str, KeyCase]) -> dict[str, float]:
    out: dict[str, float] = {}
    for mode, allowed in (("strict", {"essential"}), ("lenient", {"essential", "supplementary"})):
        per_case, total = [], Counter()
        for cid, cited in entries:
            gold = {sid for sid, rel in key[cid].relevance.items() if rel in allowed}
            tp, fp, fn = len(gold & cited), len(cited - gold), len(gold - cited)
            per_case.append(_prf(tp, fp, fn))
            total.update(tp=tp, fp=fp, fn=fn)
        micro = _prf(total["tp"], total["fp"], total["fn"])
        for name, i in (("precision", 0), ("recall", 1), ("f1", 2)):
            out[f"{mode}_macro_{name}"] = 100 * mean(c[i] for c in per_case)
            out[f"{mode}_micro_{name}"] = 100 * micro[i]
    out["overall_factuality_score"] = out["strict_micro_f1"]
    return out


def sentence_texts(case: Case, official_lookup: bool) -> dict[str, str]:
    """{sentence id: text} for the essential-sentence reference: the note's sentences, or with `official_lookup`
    what the official loader's `.//sentence` map holds (in the 2026 layout the answer sentences come after the
    note, so an answer sentence's text replaces the note sentence with its id)."""
    texts = {s.id: s.text for s in case.sentences}
    if official_lookup:
        texts.update({a.id: a.text for a in case.answer_sentences})
    return texts


def lookup_note(cases: list[Case], key: dict[str, KeyCase], official_lookup: bool) -> list[str]:
    """Say where the official `.//sentence` lookup would read other text than this scorer does."""
    if official_lookup:
        return []
    affected = [c.case_id for c in cases if c.case_id in key
                and {a.id for a in c.answer_sentences} & key[c.case_id].essential]
    if not affected:
        return []
    return [f"{len(affected)} case(s) ({', '.join(affected[:5])}{', ...' if len(affected) > 5 else ''}) have "
            "<answer_sentences> with the ids of essential note sentences: the official loader (.//sentence) reads "
            "the answer sentence's text there, this scorer the note's; data.official_sentence_lookup=true "
            "reproduces the official reading"]


def score(submission: list[tuple[str, str]], key: dict[str, KeyCase], cases: list[Case],
          cfg: MetricsConfig, official_sentence_lookup: bool = False) -> dict[str, Any]:
    """Official 2025 leaderboard values for `submission` ([(case_id, answer)], duplicates scored twice as the
    official script does) against `key` and the cases' narratives, questions and note sentences (or, with
    `official_sentence_lookup`, the official loader's `.//sentence` texts)."""
    submitted, expected = {cid for cid, _ in submission}, set(key)
    if submitted != expected:
        raise SubmissionError(f"case ids in key but not in submission: {sorted(expected - submitted)}; "
                              f"in submission but not in key: {sorted(submitted - expected)}")
    parsed = [(cid, parse_answer(answer)) for cid, answer in submission]
    uncited = [cid for cid, p in parsed if not p.citations]
    if uncited:  # the official script stops with an AssertionError here
        raise SubmissionError(f"cases {uncited}: no citations found (every answer must cite at least one sentence)")
    by_id = {c.case_id: c for c in cases}
    questions, references, essential_texts, predictions = [], [], [], []
    for cid, p in parsed:
        case = by_id[cid]
        if not case.clinician_question:
            raise SubmissionError(f"case {cid}: the cases file has no <clinician_question>, which relevance needs")
        question = f"{case.patient_narrative.strip()}\n\n{case.clinician_question.strip()}"
        texts = sentence_texts(case, official_sentence_lookup)
        essential = "\n".join(texts[s.id] for s in case.sentences if key[cid].relevance.get(s.id) == "essential")
        questions.append(question)
        essential_texts.append(essential)
        references.append(f"{question}\n\n{essential}")
        predictions.append(p.text)
    values: dict[str, Any] = factuality([(cid, p.citations) for cid, p in parsed], key)
    values["bleu"] = 100 * bleu(references, predictions)
    values.update({k: 100 * v for k, v in rouge(references, predictions).items()})
    values["sari"] = sari(questions, predictions, [[e] for e in essential_texts])
    model_values, unavailable = model_metrics(references, predictions, cfg)
    values.update(model_values)
    values["overall_relevance_score"], values["overall_relevance_missing"] = overall_of(values, RELEVANCE)
    values["overall_score"] = mean([values["overall_factuality_score"], values["overall_relevance_score"]]) \
        if values["overall_relevance_score"] is not None else values["overall_factuality_score"]
    values["unavailable"] = unavailable
    values["essential_order"] = "document order (the official script's order depends on PYTHONHASHSEED)"
    values["sentence_lookup"] = "official (.//sentence)" if official_sentence_lookup else "note sentences"
    notes = bleu_crash_note([cid for cid, _ in parsed], predictions, "answer text (citations removed)") \
        + lookup_note(cases, key, official_sentence_lookup)
    if notes:
        values["notes"] = notes
    return values
