"""Cross-validated tuning of the non-LLM ArchEHR stages on the hand-written dev cases, against trivial baselines.

    python benchmarks/archehr_offline_cv.py [--folds 5] [--seed 0]

Cases: data/archehr/dev_cases.xml (34) + bundled_cases.xml (3), each with its key. For each fold, the evidence
configuration (anchor, lexical weight, selection rule) with the best Subtask-2 strict micro F1 on the other folds is
applied to the held-out fold, and likewise the alignment configuration (threshold, citations) for Subtask 4; the
held-out predictions of all folds are pooled and scored (cross-validated micro F1). "in-sample" is the best
configuration chosen and scored on all cases. Baselines need no tuning and are scored on the same cases. Every
prediction comes from the program itself (contract.build + program(case)), not a re-implementation.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common.instantiate import build  # noqa: E402
from programs.archehr.offline.similarity import cosine_matrix  # noqa: E402
from runners.program import compose_config, contract_for  # noqa: E402
from tasks.archehr.data import load_cases, load_key  # noqa: E402
from tasks.archehr.metrics import score_subtask2, score_subtask4  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "archehr"
OFFLINE = ["program.stages.question=rule", "program.stages.evidence=embedding", "program.stages.answer=extractive",
           "program.stages.alignment=similarity"]
EVIDENCE_GRID = {
    "program.evidence.anchor": ["clinician_question", "both"],
    "program.offline.lexical_weight": [0.0, 0.3, 0.5],
    "selection": ["cuts=[0.5,0.7,0.8,0.95]", "cuts=[0.4,0.6,0.7,0.85]", "top_share=0.2", "top_share=0.3",
                  "top_share=0.4", "top_share=0.5", "top_share=0.6",
                  "top_share=0.7", "top_share=0.8"],
}
ALIGN_GRID = {"program.offline.align_threshold": [0.2, 0.3, 0.4, 0.5], "program.alignment.max_citations": [1, 2, 3],
              "program.offline.align_min_links": [0, 1], "program.offline.align_margin": ["null", 0.05, 0.1],
              "program.offline.align_lexical_weight": [0.0, 0.3]}


def overrides_of(combo: dict[str, object]) -> list[str]:
    out = []
    for k, v in combo.items():
        if k == "selection":
            name, _, value = str(v).partition("=")
            out.append(f"program.offline.evidence_cuts={value}" if name == "cuts" else f"program.offline.top_share={value}")
        else:
            out.append(f"{k}={v}")
    return out


def grid(space: dict[str, list]) -> list[dict[str, object]]:
    return [dict(zip(space, values, strict=True)) for values in itertools.product(*space.values())]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    cases = load_cases(DATA / "dev_cases.xml") + load_cases(DATA / "bundled_cases.xml")
    key = {**load_key(DATA / "dev_cases_key.json"), **load_key(DATA / "bundled_cases_key.json")}
    ids = sorted(c.case_id for c in cases)
    random.Random(args.seed).shuffle(ids)
    folds = [set(ids[i:: args.folds]) for i in range(args.folds)]
    embedder = build(compose_config().program.offline.embedder)

    def predict(extra: list[str]) -> dict[str, dict]:
        cfg = compose_config("program=archehr", *OFFLINE, *extra)
        program = contract_for(cfg).build(cfg, None, embedder=embedder)
        return {c.case_id: program(case=c) for c in cases}

    def st2(preds: dict[str, list[str]], subset) -> float:
        return score_subtask2({c: preds[c] for c in subset}, {c: key[c] for c in subset})["strict_micro_f1"]

    def st4(preds: dict[str, list], subset) -> float:
        return score_subtask4({c: preds[c] for c in subset}, {c: key[c] for c in subset})["micro_f1"]

    start = time.perf_counter()
    evidence = {}
    for combo in grid(EVIDENCE_GRID):
        out = predict(overrides_of(combo))
        evidence[tuple(overrides_of(combo))] = {cid: list(p.evidence_ids) for cid, p in out.items()}
    align = {}
    for combo in grid(ALIGN_GRID):
        out = predict(overrides_of(combo))
        align[tuple(overrides_of(combo))] = {cid: p.alignment for cid, p in out.items()}
    seconds = time.perf_counter() - start

    def cross_validate(table, scorer):
        pooled, chosen = {}, []
        for held in folds:
            train = [c for c in ids if c not in held]
            best = max(table, key=lambda cfg: scorer(table[cfg], train))
            chosen.append(best)
            pooled.update({c: table[best][c] for c in held})
        best_all = max(table, key=lambda cfg: scorer(table[cfg], ids))
        return scorer(pooled, ids), scorer(table[best_all], ids), best_all, chosen

    ev_cv, ev_in, ev_best, ev_chosen = cross_validate(evidence, st2)
    al_cv, al_in, al_best, al_chosen = cross_validate(align, st4)

    # Baselines on the same cases (no tuning)
    by_id = {c.case_id: c for c in cases}
    all_sentences = {c: [s.id for s in by_id[c].sentences] for c in ids}
    first3 = {c: [s.id for s in by_id[c].sentences[:3]] for c in ids}

    def top_k_dense(cid: str, k: int) -> list[str]:
        case = by_id[cid]
        sims = cosine_matrix(embedder, [case.clinician_question or case.patient_narrative],
                             [s.text for s in case.sentences])[0]
        return [case.sentences[i].id for i in sorted(sorted(range(len(sims)), key=lambda i: -sims[i])[:k])]

    top3 = {c: top_k_dense(c, 3) for c in ids}

    def align_baseline(choose) -> dict[str, list]:
        out = {}
        for cid in ids:
            case = by_id[cid]
            out[cid] = [{"answer_id": aid, "evidence_id": choose(case, text)} for aid, text, _ in key[cid].answer_sentences]
        return out

    def top1(case, text):
        sims = cosine_matrix(embedder, [text], [s.text for s in case.sentences])[0]
        return [case.sentences[int(sims.argmax())].id]

    st4_all = align_baseline(lambda case, text: [s.id for s in case.sentences])
    st4_first3 = align_baseline(lambda case, text: [s.id for s in case.sentences[:3]])
    st4_top1 = align_baseline(top1)

    print(f"{len(ids)} cases ({args.folds} folds, seed {args.seed}); {len(evidence)} evidence x {len(align)} alignment "
          f"configurations; {seconds:.0f} s for all predictions\n")
    print("| Subtask 2 (strict micro F1) | cross-validated | in-sample |")
    print("|---|---|---|")
    print(f"| offline program (tuned by CV) | **{ev_cv:.2f}** | {ev_in:.2f} |")
    for name, preds in (("all sentences", all_sentences), ("first 3 sentences", first3),
                        ("top 3 by similarity to the reference question", top3)):
        print(f"| baseline: {name} | {st2(preds, ids):.2f} | (no tuning) |")
    print("\n| Subtask 4 (micro F1) | cross-validated | in-sample |")
    print("|---|---|---|")
    print(f"| offline program (tuned by CV) | **{al_cv:.2f}** | {al_in:.2f} |")
    for name, preds in (("every note sentence", st4_all), ("first 3 sentences", st4_first3),
                        ("the most similar note sentence", st4_top1)):
        print(f"| baseline: {name} | {st4(preds, ids):.2f} | (no tuning) |")
    print(f"\nchosen on all cases: evidence {' '.join(ev_best)}; alignment {' '.join(al_best)}")
    print("chosen per fold (evidence):", [" ".join(c) for c in ev_chosen])
    print("chosen per fold (alignment):", [" ".join(c) for c in al_chosen])


if __name__ == "__main__":
    main()
