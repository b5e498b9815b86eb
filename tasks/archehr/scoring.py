"""Scorers equal to the official ArchEHR-QA 2026 evaluation scripts (leaderboard values, 0-100).

Overall scores: Subtask 1 mean(alignscore, rougeLsum, medcon, bertscore); Subtask 2 strict micro F1; Subtask 3 mean of
bleu, rougeLsum, sari (source = patient narrative), bertscore, alignscore, medcon; Subtask 4 micro F1 of
(answer_id, evidence_id) links. A metric that cannot be computed here is None, `unavailable` says why, and the overall
is the mean of the rest, which `overall_missing` names.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from statistics import mean
from typing import Any

from common.errors import ClinprogError
from tasks.archehr.data import Case, KeyCase
from tasks.sari import sari
from tasks.text_metrics import BertScoreConfig, Unavailable, bertscore, bleu, official_bleu_crashes, rouge


class SubmissionError(ClinprogError, ValueError):
    """A submission the official scorer would reject (missing cases, invalid ids)."""


@dataclass
class MetricsConfig:
    bertscore: BertScoreConfig | None = None
    alignscore_checkpoint: str | None = None
    medcon_quickumls_path: str | None = None
    unavailable: dict[str, str] = field(default_factory=dict)


def prf(tp: int, n_pred: int, n_gold: int) -> tuple[float, float, float]:
    p = tp / n_pred if n_pred else 0.0
    r = tp / n_gold if n_gold else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def _case_prf_st2(pred: set[str], gold: set[str]) -> tuple[float, float, float]:
    """Both empty: 1; either empty alone: 0 (the official Subtask 2 rule)."""
    if not pred and not gold:
        return 1.0, 1.0, 1.0
    if not pred or not gold:
        return 0.0, 0.0, 0.0
    return prf(len(pred & gold), len(pred), len(gold))


def official_prediction(text: str, max_words: int, case_id: str, subtask: str) -> str:
    """As the official loaders: stripped, refused when empty; only a text over `max_words` is cut and re-joined with
    single spaces, so a shorter one keeps its newlines (ROUGE-Lsum splits sentences on them)."""
    text = text.strip()
    if not text:
        raise SubmissionError(f"{subtask}, case {case_id}: empty prediction")
    words = text.split()
    return " ".join(words[:max_words]) if len(words) > max_words else text


def entries_of(predictions: dict[str, Any]) -> list[tuple[str, Any]]:
    """Every (case_id, prediction) to score: a read submission file's entries, duplicates included (the official
    scripts score each entry), else the dict's items."""
    entries = getattr(predictions, "entries", None)
    return list(entries) if entries is not None else list(predictions.items())


def duplicate_note(predictions: dict[str, Any]) -> list[str]:
    """The note a subtask's scores carry when a case id appears twice in its file (scored twice, as official)."""
    dupes = {cid: n for cid, n in Counter(cid for cid, _ in entries_of(predictions)).items() if n > 1}
    if not dupes:
        return []
    listed = ", ".join(f"{cid} ({n} times)" for cid, n in dupes.items())
    return [f"case ids written more than once in the submission: {listed}; every entry is scored, as the official "
            "script does"]


def bleu_crash_note(ids: list[str], predictions: list[str], what: str) -> list[str]:
    """The note for predictions on which the official BLEU crashes (see `official_bleu_crashes`)."""
    bad = [i for i, p in zip(ids, predictions, strict=True) if official_bleu_crashes(p)]
    if not bad:
        return []
    return [f"the official script crashes on this submission (ZeroDivisionError in its BLEU: the {what} of case(s) "
            f"{', '.join(dict.fromkeys(bad))} has no token after the 13a tokenizer, which deletes '<skipped>'); "
            "clinprog scores that BLEU 0"]


def with_notes(values: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """`values` with `notes` (where clinprog and the official script part), when there are any."""
    if notes:
        values["notes"] = notes
    return values


def check_case_ids(submitted: set[str], expected: set[str], subtask: str = "") -> None:
    if submitted != expected:
        missing, extra = sorted(expected - submitted), sorted(submitted - expected)
        raise SubmissionError(f"{subtask}{': ' if subtask else ''}case ids in key but not in submission: {missing}; "
                              f"in submission but not in key: {extra}")


def score_subtask2(predictions: dict[str, list[str]], key: dict[str, KeyCase]) -> dict[str, float]:
    check_case_ids(set(predictions), set(key), "subtask 2")
    out: dict[str, Any] = {}
    for mode in ("strict", "lenient"):
        per_case, tp, n_pred, n_gold = [], 0, 0, 0
        for cid, ids in entries_of(predictions):
            kc = key[cid]
            pred = set(ids)
            invalid = pred - set(kc.relevance)
            if invalid:
                raise SubmissionError(f"subtask 2, case {cid}: invalid sentence ids {sorted(invalid)}")
            gold = kc.essential
            if mode == "lenient":
                pred = pred - kc.supplementary
            per_case.append(_case_prf_st2(pred, gold))
            tp, n_pred, n_gold = tp + len(pred & gold), n_pred + len(pred), n_gold + len(gold)
        micro = (1.0, 1.0, 1.0) if n_pred == 0 and n_gold == 0 else prf(tp, n_pred, n_gold)
        for name, i in (("precision", 0), ("recall", 1), ("f1", 2)):
            out[f"{mode}_macro_{name}"] = 100 * mean(c[i] for c in per_case)
            out[f"{mode}_micro_{name}"] = 100 * micro[i]
    out["overall_score"] = out["strict_micro_f1"]
    return with_notes(out, duplicate_note(predictions))


def score_subtask4(predictions: dict[str, list[dict[str, Any]]], key: dict[str, KeyCase]) -> dict[str, float]:
    check_case_ids(set(predictions), set(key), "subtask 4")
    per_case, tp, n_pred, n_gold = [], 0, 0, 0
    for cid, alignment in entries_of(predictions):
        kc = key[cid]
        gold = {(aid, eid) for aid, _, cites in kc.answer_sentences for eid in cites}
        valid_answers = {aid for aid, _, _ in kc.answer_sentences}
        pred: set[tuple[str, str]] = set()
        for item in alignment:
            aid = item["answer_id"]
            if aid not in valid_answers:
                raise SubmissionError(f"subtask 4, case {cid}: invalid answer_id {aid!r}")
            for eid in item["evidence_id"]:
                if eid not in kc.relevance:
                    raise SubmissionError(f"subtask 4, case {cid}: invalid evidence_id {eid!r}")
                pred.add((aid, eid))
        hits = len(pred & gold)
        per_case.append(prf(hits, len(pred), len(gold)))
        tp, n_pred, n_gold = tp + hits, n_pred + len(pred), n_gold + len(gold)
    micro = prf(tp, n_pred, n_gold)
    out = {}
    for name, i in (("precision", 0), ("recall", 1), ("f1", 2)):
        out[f"micro_{name}"] = 100 * micro[i]
        out[f"macro_{name}"] = 100 * mean(c[i] for c in per_case) if per_case else 0.0
    out["overall_score"] = out["micro_f1"]
    return with_notes(out, duplicate_note(predictions))


def model_metrics(references: list[str], predictions: list[str], cfg: MetricsConfig) -> tuple[dict, dict]:
    bs = Unavailable("no BERTScore model configured") if cfg.bertscore is None \
        else bertscore(references, predictions, cfg.bertscore)
    unavailable = {"bertscore": bs.reason} if isinstance(bs, Unavailable) else {}
    unavailable["alignscore"] = cfg.unavailable.get(
        "alignscore", "AlignScore needs its checkpoint (AlignScore-base.ckpt) and roberta-base from the hub")
    unavailable["medcon"] = cfg.unavailable.get("medcon", "MEDCON needs a licensed UMLS/QuickUMLS installation")
    values = {"bertscore": None if isinstance(bs, Unavailable) else 100 * bs, "alignscore": None, "medcon": None}
    return values, unavailable


def overall_of(values: dict[str, float | None], components: list[str]) -> tuple[float | None, list[str]]:
    available = [values[c] for c in components if values.get(c) is not None]
    missing = [c for c in components if values.get(c) is None]
    return (mean(available) if available else None), missing


def score_subtask1(predictions: dict[str, str], cases: list[Case], cfg: MetricsConfig) -> dict[str, Any]:
    refs_by_id = {c.case_id: c.clinician_question for c in cases if c.clinician_question}
    check_case_ids(set(predictions), set(refs_by_id), "subtask 1")
    entries = entries_of(predictions)
    refs = [refs_by_id[i] for i, _ in entries]
    preds = [official_prediction(text, 15, i, "subtask 1") for i, text in entries]
    values: dict[str, Any] = {k: 100 * v for k, v in rouge(refs, preds).items()}
    model_values, unavailable = model_metrics(refs, preds, cfg)
    values.update(model_values)
    values["overall_score"], values["overall_missing"] = overall_of(values, ["alignscore", "rougeLsum", "medcon", "bertscore"])
    values["unavailable"] = unavailable
    return with_notes(values, duplicate_note(predictions))


def score_subtask3(predictions: dict[str, str], key: dict[str, KeyCase], cases: list[Case], cfg: MetricsConfig) -> dict[str, Any]:
    refs_by_id = {cid: kc.answer_without_citations for cid, kc in key.items() if kc.answer_without_citations}
    check_case_ids(set(predictions), set(refs_by_id), "subtask 3")
    sources = {c.case_id: c.patient_narrative for c in cases}
    entries = entries_of(predictions)
    ids = [i for i, _ in entries]
    refs = [refs_by_id[i] for i in ids]
    preds = [official_prediction(text, 75, i, "subtask 3") for i, text in entries]
    values: dict[str, Any] = {"bleu": 100 * bleu(refs, preds)}
    values.update({k: 100 * v for k, v in rouge(refs, preds).items()})
    values["sari"] = sari([sources[i] for i in ids], preds, [[r] for r in refs])
    model_values, unavailable = model_metrics(refs, preds, cfg)
    values.update(model_values)
    values["overall_score"], values["overall_missing"] = overall_of(
        values, ["bleu", "rougeLsum", "sari", "bertscore", "alignscore", "medcon"])
    values["unavailable"] = unavailable
    return with_notes(values, duplicate_note(predictions) + bleu_crash_note(ids, preds, "subtask 3 answer"))
