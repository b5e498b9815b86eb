"""Cross-validated Subtask 2 and Subtask 4 of the non-LLM ArchEHR stages, against trivial baselines.

    python benchmarks/archehr_no_lm_cv.py [--folds 5] [--seed 0]

Cases: data/archehr/dev_cases.xml (34 clean, one-paragraph notes) + realistic_cases_a.xml + realistic_cases_b.xml
(32 realistic: placeholders, headers, lab lines, medication lists, paraphrased answers), each with its key; scores
are reported on the union and on each half. Every prediction comes from the program itself (contract.build +
program(case), grounding off), never from a re-implementation, and no case is scored by a model fitted or tuned
on it:

* learned (program/archehr/{evidence,alignment}=learned): per fold, the logistic scorers and their selection
  rules are fitted on the other folds (optimizer=logistic's LogisticFit.compile, as task=compile does) and the held-out fold is
  predicted with that state.
* embedding / similarity tuned by CV: per fold, the grid point with the best Subtask 2 (Subtask 4) micro F1 on
  the other folds predicts the held-out fold.
* as configured: the option's values in conf/ (no tuning here); baselines need no tuning.
* by writer: the learned stages fitted on the clean cases + one realistic set and scored on the other realistic set
  (the two sets were written apart: the closest these files come to unseen cases from another hand).
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

import dspy  # noqa: E402
from hydra.utils import instantiate  # noqa: E402

from common.config_groups import compose_config  # noqa: E402
from optimizers.logistic import LogisticFit  # noqa: E402
from programs.archehr.shared.note_layout import is_header  # noqa: E402
from programs.archehr.shared.similarity import cosine_matrix  # noqa: E402
from runners.program import contract_for  # noqa: E402
from tasks.archehr.data import Case, KeyCase, load_cases, load_key  # noqa: E402
from tasks.archehr.scoring import score_subtask2, score_subtask4  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "archehr"
SETS = (("dev_cases", "clean"), ("realistic_cases_a", "realistic"), ("realistic_cases_b", "realistic"))
NO_LM = ("program=archehr", "lm=none", "program/archehr/grounding=none")
SIMILARITY_STAGES = ("program/archehr/evidence=embedding", "program/archehr/alignment=similarity")
LEARNED_STAGES = ("program/archehr/evidence=learned", "program/archehr/alignment=learned")
EVIDENCE_GRID = {"program.evidence.anchor": ["clinician_question", "both"],
                 "program.evidence.lexical_weight": [0.0, 0.3, 0.5],
                 "program.evidence.top_share": [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]}
ALIGN_GRID = {"program.alignment.threshold": [0.2, 0.3, 0.4, 0.5], "program.alignment.max_citations": [1, 2, 3],
              "program.alignment.min_links": [0, 1], "program.alignment.margin": ["null", 0.05, 0.1],
              "program.alignment.lexical_weight": [0.0, 0.3]}


def load_sets() -> tuple[dict[str, Case], dict[str, KeyCase], dict[str, str], dict[str, str]]:
    """(cases by id, key, half: clean/realistic, source: the file's stem) of the three hand-written sets."""
    cases, key, half, source = [], {}, {}, {}
    for name, kind in SETS:
        these = load_cases(DATA / f"{name}.xml")
        cases += these
        key.update(load_key(DATA / f"{name}_key.json"))
        half.update({c.case_id: kind for c in these})
        source.update({c.case_id: name for c in these})
    return {c.case_id: c for c in cases}, key, half, source


def case_folds(by_id: dict, k: int, seed: int) -> tuple[list[str], list[set[str]]]:
    """(the case ids in their shuffled order, k folds of whole cases): every benchmark that compares with this one's
    numbers (archehr_reader_cv.py) holds out the same cases."""
    ids = sorted(by_id)
    random.Random(seed).shuffle(ids)
    return ids, [set(ids[i::k]) for i in range(k)]


def grid(space: dict[str, list]) -> list[tuple[str, ...]]:
    return [tuple(f"{k}={v}" for k, v in zip(space, values, strict=True)) for values in itertools.product(*space.values())]


def learned_predictions(embedder, by_id: dict, key: dict, ids: list[str], folds: list[set[str]],
                        source: dict[str, str]) -> tuple[dict[str, list[str]], dict[str, list], list[tuple]]:
    """The learned heads' predictions: per fold, fitted on the other folds exactly as task=compile fits; and by
    writer, fitted on the clean cases + one realistic set and scored on the other set (written apart)."""
    learned_ev: dict[str, list[str]] = {}
    learned_al: dict[str, list] = {}
    by_set: list[tuple[str, dict, dict]] = []
    learned_cfg = compose_config(*NO_LM, *LEARNED_STAGES)
    student = contract_for(learned_cfg).build(learned_cfg, None, embedder=embedder)  # the shipped question stage

    def fit_and_predict(train_ids: list[str], test_ids: list[str]) -> dict[str, object]:
        trainset = [dspy.Example(case=by_id[c], key=key[c]).with_inputs("case") for c in train_ids]
        compiled = LogisticFit().compile(student, trainset=trainset)
        return {cid: compiled(case=by_id[cid]) for cid in sorted(test_ids)}

    for held in folds:
        out = fit_and_predict([c for c in ids if c not in held], sorted(held))
        learned_ev.update({c: list(p.evidence_ids) for c, p in out.items()})
        learned_al.update({c: p.alignment for c, p in out.items()})
    for test_set in ("realistic_cases_b", "realistic_cases_a"):
        test_ids = [c for c in ids if source[c] == test_set]
        out = fit_and_predict([c for c in ids if source[c] != test_set], test_ids)
        by_set.append((test_set, {c: list(p.evidence_ids) for c, p in out.items()},
                       {c: p.alignment for c, p in out.items()}))
    return learned_ev, learned_al, by_set


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    by_id, key, half, source = load_sets()
    ids, folds = case_folds(by_id, args.folds, args.seed)
    base_cfg = compose_config(*NO_LM)
    embedder = instantiate(base_cfg.program.embedder)

    def predict(overrides: tuple[str, ...], subset: list[str]) -> dict[str, object]:
        cfg = compose_config(*NO_LM, *overrides)
        program = contract_for(cfg).build(cfg, None, embedder=embedder)
        return {cid: program(case=by_id[cid]) for cid in subset}

    def st2(preds: dict[str, list[str]], subset) -> dict[str, float]:
        return score_subtask2({c: preds[c] for c in subset}, {c: key[c] for c in subset})

    def st4(preds: dict[str, list], subset) -> dict[str, float]:
        return score_subtask4({c: preds[c] for c in subset}, {c: key[c] for c in subset})

    start = time.perf_counter()
    learned_ev, learned_al, by_set = learned_predictions(embedder, by_id, key, ids, folds, source)
    learned_seconds = time.perf_counter() - start

    # embedding / similarity over a grid, tuned per fold on the other folds
    evidence = {combo: {c: list(p.evidence_ids) for c, p in predict((*SIMILARITY_STAGES, *combo), ids).items()}
                for combo in grid(EVIDENCE_GRID)}
    align = {combo: {c: p.alignment for c, p in predict((*SIMILARITY_STAGES, *combo), ids).items()}
             for combo in grid(ALIGN_GRID)}
    configured = predict(SIMILARITY_STAGES, ids)
    seconds = time.perf_counter() - start

    def cross_validate(table, scorer, metric):
        pooled, chosen = {}, []
        for held in folds:
            train = [c for c in ids if c not in held]
            best = max(table, key=lambda combo: scorer(table[combo], train)[metric])
            chosen.append(best)
            pooled.update({c: table[best][c] for c in held})
        return pooled, chosen

    tuned_ev, ev_chosen = cross_validate(evidence, st2, "strict_micro_f1")
    tuned_al, al_chosen = cross_validate(align, st4, "micro_f1")

    all_sentences = {c: [s.id for s in by_id[c].sentences] for c in ids}
    first3 = {c: [s.id for s in by_id[c].sentences[:3]] for c in ids}

    def align_baseline(choose) -> dict[str, list]:
        return {cid: [{"answer_id": aid, "evidence_id": choose(by_id[cid], text)}
                      for aid, text, _ in key[cid].answer_sentences] for cid in ids}

    def top1(case, text):
        candidates = [s for s in case.sentences if not is_header(s.text)]
        sims = cosine_matrix(embedder, [text], [s.text for s in candidates])[0]
        return [candidates[int(sims.argmax())].id]

    halves = {"all": ids, "clean": [c for c in ids if half[c] == "clean"],
              "realistic": [c for c in ids if half[c] == "realistic"]}

    def row(name: str, preds, scorer, prefix: str) -> str:
        cells = []
        for subset in halves.values():
            s = scorer(preds, subset)
            cells.append(f"{s[prefix + 'f1']:.1f} ({s[prefix + 'precision']:.0f}/{s[prefix + 'recall']:.0f})")
        return f"| {name} | " + " | ".join(cells) + " |"

    sizes = ", ".join(f"{k} {len(v)}" for k, v in halves.items())
    print(f"{len(ids)} cases ({sizes}); {args.folds} folds, seed {args.seed}; {len(evidence)} evidence x "
          f"{len(align)} alignment grid points; {seconds:.0f} s for all predictions ({learned_seconds:.0f} s learned)\n")
    print("Cross-validated F1 (precision/recall) pooled over the held-out folds; no case is scored by a model fitted "
          "or tuned on it.\n")
    print("| Subtask 2 (strict micro F1) | all | clean half | realistic half |")
    print("|---|---|---|---|")
    print(row("**learned** (evidence=learned, fitted per fold)", learned_ev, st2, "strict_micro_"))
    print(row("embedding, tuned per fold (grid)", tuned_ev, st2, "strict_micro_"))
    print(row("embedding as configured (the earlier default)",
              {c: list(p.evidence_ids) for c, p in configured.items()}, st2, "strict_micro_"))
    print(row("baseline: all sentences", all_sentences, st2, "strict_micro_"))
    print(row("baseline: first 3 sentences", first3, st2, "strict_micro_"))
    print("\n| Subtask 4 (micro F1) | all | clean half | realistic half |")
    print("|---|---|---|---|")
    print(row("**learned** (alignment=learned, fitted per fold)", learned_al, st4, "micro_"))
    print(row("similarity, tuned per fold (grid)", tuned_al, st4, "micro_"))
    print(row("similarity as configured (the earlier default)", {c: p.alignment for c, p in configured.items()},
              st4, "micro_"))
    print(row("baseline: every note sentence", align_baseline(lambda case, text: [s.id for s in case.sentences]),
              st4, "micro_"))
    print(row("baseline: first 3 sentences", align_baseline(lambda case, text: [s.id for s in case.sentences[:3]]),
              st4, "micro_"))
    print(row("baseline: the most similar note sentence", align_baseline(top1), st4, "micro_"))
    print("\nFitted on the clean cases and one realistic set, scored on the other realistic set (another writer's):\n")
    print("| held-out set | Subtask 2 strict micro F1 (P/R) | Subtask 4 micro F1 (P/R) |")
    print("|---|---|---|")
    for test_set, ev_preds, al_preds in by_set:
        subset = sorted(ev_preds)
        s2, s4 = st2(ev_preds, subset), st4(al_preds, subset)
        print(f"| {test_set} ({len(subset)} cases) | {s2['strict_micro_f1']:.1f} ({s2['strict_micro_precision']:.0f}/"
              f"{s2['strict_micro_recall']:.0f}) | {s4['micro_f1']:.1f} ({s4['micro_precision']:.0f}/"
              f"{s4['micro_recall']:.0f}) |")
    print("\nchosen per fold (embedding):", [" ".join(c) for c in ev_chosen])
    print("chosen per fold (similarity):", [" ".join(c) for c in al_chosen])


if __name__ == "__main__":
    main()
