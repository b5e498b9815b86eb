"""Scores equal to the official ArchEHR-QA 2025 `scoring.py` (soni-sarvesh/archehr-qa @ 771b948), 0-100.

Factuality: the union of each answer's cited ids against the essential (strict) or essential + supplementary
(lenient) sentences. Relevance: one pair per case, the answer against narrative, clinician question and essential
sentences (SARI: source = narrative + question, reference = the essential sentences). overall_score = mean(factuality,
relevance). Two official quirks are not copied by default: the essential sentences' order (a Python set's, so it
changes with PYTHONHASHSEED; here document order) and the `.//sentence` lookup, where a 2026-layout file's
`<answer_sentences>` overwrite note sentences of the same id (`data.official_sentence_lookup=true` reproduces it).
"""

from __future__ import annotations

from collections import Counter
from statistics import mean
from typing import Any

from tasks.archehr.data import Case, KeyCase
from tasks.archehr.scoring import MetricsConfig, SubmissionError, bleu_crash_note, check_case_ids, model_metrics, overall_of, prf
from tasks.archehr2025.submission import parse_answer
from tasks.sari import sari
from tasks.text_metrics import bleu, rouge

RELEVANCE = ["alignscore", "rougeLsum", "bleu", "medcon", "bertscore", "sari"]


def factuality(entries: list[tuple[str, frozenset[str]]], key: dict[str, KeyCase]) -> dict[str, float]:
    out: dict[str, float] = {}
    for mode, allowed in (("strict", {"essential"}), ("lenient", {"essential", "supplementary"})):
        per_case, total = [], Counter()
        for cid, cited in entries:
            gold = {sid for sid, rel in key[cid].relevance.items() if rel in allowed}
            counts = {"tp": len(gold & cited), "pred": len(cited), "gold": len(gold)}
            per_case.append(prf(counts["tp"], counts["pred"], counts["gold"]))
            total.update(counts)
        micro = prf(total["tp"], total["pred"], total["gold"])
        for name, i in (("precision", 0), ("recall", 1), ("f1", 2)):
            out[f"{mode}_macro_{name}"] = 100 * mean(c[i] for c in per_case)
            out[f"{mode}_micro_{name}"] = 100 * micro[i]
    out["overall_factuality_score"] = out["strict_micro_f1"]
    return out


def sentence_texts(case: Case, official_lookup: bool) -> dict[str, str]:
    """{sentence id: text} of the note, or with `official_lookup` the official loader's `.//sentence` map (answer
    sentences, after the note, replace note sentences of the same id)."""
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
    """Official 2025 leaderboard values for `submission` ([(case_id, answer)]; a duplicate is scored twice, as
    official)."""
    check_case_ids({cid for cid, _ in submission}, set(key))
    parsed = [(cid, parse_answer(answer)) for cid, answer in submission]
    uncited = [cid for cid, p in parsed if not p.citations]
    if uncited:  # the official script stops with an AssertionError here
        raise SubmissionError(f"cases {uncited}: no citations found (every answer must cite at least one sentence)")
    by_id = {c.case_id: c for c in cases}
    # relevance reads each case's clinician question: a case without one (a plain row may lack it) is scored for
    # factuality only, and a note names it
    asked = [(cid, p) for cid, p in parsed if by_id[cid].clinician_question]
    questions, references, essential_texts, predictions = [], [], [], []
    for cid, p in asked:
        case = by_id[cid]
        question = f"{case.patient_narrative.strip()}\n\n{case.clinician_question.strip()}"
        texts = sentence_texts(case, official_sentence_lookup)
        essential = "\n".join(texts[s.id] for s in case.sentences if key[cid].relevance.get(s.id) == "essential")
        questions.append(question)
        essential_texts.append(essential)
        references.append(f"{question}\n\n{essential}")
        predictions.append(p.text)
    values: dict[str, Any] = factuality([(cid, p.citations) for cid, p in parsed], key)
    unavailable: dict[str, str] = {}
    if asked:
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
    unasked = [cid for cid, _ in parsed if not by_id[cid].clinician_question]
    notes = bleu_crash_note([cid for cid, _ in asked], predictions, "answer text (citations removed)") \
        + lookup_note(cases, key, official_sentence_lookup) \
        + ([f"relevance is scored on the {len(asked)} of {len(parsed)} cases with a clinician question (none in "
            f"{', '.join(unasked[:5])}{', ...' if len(unasked) > 5 else ''})"] if unasked else [])
    if notes:
        values["notes"] = notes
    return values
