"""Subtask 1 without an LM on real patient messages: the rule question stage against the previous one and trivial
baselines, by the project's Subtask-1 ROUGE, with the defects a reader sees counted.

    python benchmarks/question_eval.py [--pairs-2025 P] [--test-2026 P] [--refs-2026 P] [--dev P] [--show]

Sets: (a) the 20 public ArchEHR-QA 2025 dev pairs with the marked question phrases REMOVED (narrative only, as the
2026 test is released; (a2) repeats them with the phrases, the stage's input on 2025-format data); (b) the 47 public
2026 Subtask-1 test narratives against clinician-style questions written for them in this repository
(data/archehr/question_refs_2026.json, written and committed before the rules); (c) the 34 hand-written dev cases
(data/archehr/dev_cases.xml), narrative only. The oracle row is the best single narrative sentence per reference:
the ceiling of any stage that picks a sentence. Every prediction is cut to 15 words and
scored as the official scorer does (tasks.archehr.metrics.official_prediction, tasks.text_metrics.rouge).

Defects counted on each set: a pleasantry or opinion-only question ("Thank you", "What do you think?"), a sentence
cut mid-way (ending on a function word or without an end mark), more than 15 words, no final '?'.

The stage's switches (RuleQuestionInterpreter's keyword parameters) are the only thing chosen with data: the table
"leave-one-out" picks them on 19 of the 20 public pairs, predicts the held-out one, and pools the 20 predictions.
The rules and word lists were written while reading all three sets, so none of them is a held-out test of the rules.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from statistics import mean

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from programs.archehr.offline.question import RuleQuestionInterpreter  # noqa: E402
from programs.archehr.offline.question_lexicon import GREETING, SIGN_OFF, THANKS  # noqa: E402
from programs.archehr.text import last_question_sentence, split_sentences, truncate_words  # noqa: E402
from tasks.archehr.data import ArchEHRDataError, load_cases  # noqa: E402
from tasks.archehr.metrics import official_prediction  # noqa: E402
from tasks.text_metrics import rouge  # noqa: E402

SHARED = ROOT.parent / "shared" / "data" / "archehr-qa"
DEFAULTS = {
    "pairs_2025": ROOT / "data" / "archehr" / "dev_questions_2025.xml",
    "test_2026": SHARED / "2026-subtask1-test" / "archehr-qa.xml",
    "refs_2026": ROOT / "data" / "archehr" / "question_refs_2026.json",
    "dev": ROOT / "data" / "archehr" / "dev_cases.xml",
}
MAX_WORDS = 15
Predictor = Callable[[str, str], str]      # (narrative, marked question phrases or "") -> question

# --- the rule stage before #20, kept here as a baseline: the last '?' sentence, 'my <relative>' and 'I' -> the
# patient, cut at 15 words ----------------------------------------------------------------------------------------
_OLD_RELATIVE = (r"(?:mother|mom|mum|father|dad|husband|wife|son|daughter|brother|sister|grandmother|grandfather|"
                 r"aunt|uncle|friend|partner)")
_OLD_RULES = [
    (re.compile(rf"\bmy {_OLD_RELATIVE}'s\b", re.I), "the patient's"),
    (re.compile(rf"\bmy {_OLD_RELATIVE}\b", re.I), "the patient"),
    (re.compile(r"\bI am\b|\bI'm\b", re.I), "the patient is"),
    (re.compile(r"\bI was\b", re.I), "the patient was"),
    (re.compile(r"\bI have\b|\bI've\b", re.I), "the patient has"),
    (re.compile(r"\bI\b"), "the patient"),
    (re.compile(r"\bme\b", re.I), "the patient"),
    (re.compile(r"\bmy\b", re.I), "the patient's"),
]


def previous_rule(narrative: str, marked: str = "") -> str:
    source = marked.strip() or narrative
    question = last_question_sentence(source) if split_sentences(source) else source
    for pattern, repl in _OLD_RULES:
        question = pattern.sub(repl, question)
    return truncate_words(question[:1].upper() + question[1:], MAX_WORDS)


def last_question(narrative: str, marked: str = "") -> str:
    return last_question_sentence(marked.strip() or narrative)


def first_sentence(narrative: str, marked: str = "") -> str:
    sentences = split_sentences(marked.strip() or narrative)
    return sentences[0] if sentences else narrative


def rule_stage(**switches: object) -> Predictor:
    stage = RuleQuestionInterpreter(max_words=MAX_WORDS, **switches)
    return lambda narrative, marked="": stage(patient_narrative=narrative, patient_question=marked).clinician_question


# --- defects a reader sees --------------------------------------------------------------------------------------
_OPINION_ONLY = re.compile(r"^\W*(?:what do you (?:think|recommend|suggest)|what would you (?:recommend|suggest|do)|"
                           r"any (?:ideas?|advice|suggestions?)|can you help|please (?:help|advi[cs]e)|what should I do|"
                           r"what do I do)\W*$", re.I)
# A sentence cut mid-way ends on an article, possessive or conjunction ("..., if", "the patient's"); a question may
# end on a preposition or pronoun ("What is the dizziness from?", "What could this be?").
_FUNCTION_END = re.compile(r"\b(?:the|a|an|and|or|but|if|because|his|their|my|your|of|with|very|so|when|while|"
                           r"than|whose|which)\W*$|'s\W*$", re.I)


def defects(text: str) -> list[str]:
    found = []
    body = GREETING.sub("", text).strip()
    if not re.sub(r"\W", "", body) or THANKS.search(text) or SIGN_OFF.search(text) or _OPINION_ONLY.match(text):
        found.append("pleasantry")
    if _FUNCTION_END.search(text) or not re.search(r"[.?!]\W*$", text):
        found.append("cut")
    if len(text.split()) > MAX_WORDS:
        found.append("over 15 words")
    if not text.rstrip().endswith("?"):
        found.append("no '?'")
    return found


# --- scoring ----------------------------------------------------------------------------------------------------
Pairs = list[tuple[str, str, str, str]]      # (case id, narrative, marked phrases or "", reference question)


def score(predict: Predictor, pairs: Pairs) -> tuple[float, float, list[str], list[str]]:
    outputs = [predict(narrative, marked) for _, narrative, marked, _ in pairs]
    cut = [official_prediction(o or "?", MAX_WORDS, p[0], "subtask 1") for o, p in zip(outputs, pairs, strict=True)]
    values = rouge([p[3] for p in pairs], cut)
    flagged = [f"{p[0]}: {', '.join(d)}" for o, p in zip(outputs, pairs, strict=True) if (d := defects(o))]
    return 100 * values["rougeL"], 100 * values["rougeLsum"], flagged, outputs


def per_case_rouge_l(outputs: list[str], pairs: Pairs) -> list[float]:
    refs = [p[3] for p in pairs]
    return [100 * rouge([r], [official_prediction(o, MAX_WORDS, "x", "subtask 1")])["rougeL"]
            for r, o in zip(refs, outputs, strict=True)]


SWITCH_GRID = {"fill_vague": [True, False], "passive": [True, False], "add_focus": [True, False]}


def leave_one_out(pairs: Pairs) -> tuple[float, float, list[dict]]:
    """Switches chosen on 19 pairs (best mean ROUGE-L), scored on the held-out one; in-sample: best on all 20."""
    configs = [dict(zip(SWITCH_GRID, values, strict=True)) for values in itertools.product(*SWITCH_GRID.values())]
    table = [per_case_rouge_l([rule_stage(**c)(n, m) for _, n, m, _ in pairs], pairs) for c in configs]
    held_out, chosen = [], []
    for i in range(len(pairs)):
        best = max(range(len(configs)), key=lambda k: (mean(v for j, v in enumerate(table[k]) if j != i), -k))
        held_out.append(table[best][i])
        chosen.append(configs[best])
    in_sample = max(mean(row) for row in table)
    return mean(held_out), in_sample, chosen


def load_pairs(path: Path, refs: dict[str, str] | None = None, marked: bool = False) -> Pairs:
    """(id, narrative, marked phrases joined as the pipeline joins them -- only with `marked` --, reference)."""
    cases = load_cases(path)
    if refs is not None:
        missing = [c.case_id for c in cases if c.case_id not in refs]
        if missing:
            raise ArchEHRDataError(f"{path}: no reference question for cases {', '.join(missing)}")
        return [(c.case_id, c.patient_narrative, "", refs[c.case_id]) for c in cases]
    return [(c.case_id, c.patient_narrative, " ".join(c.patient_question_phrases) if marked else "",
             c.clinician_question) for c in cases if c.clinician_question]


def oracle_sentence(pairs: Pairs) -> float:
    """The best single narrative sentence per reference (cut to 15 words): the ceiling of choosing a sentence."""
    best = []
    for cid, narrative, _, ref in pairs:
        cut = [official_prediction(s, MAX_WORDS, cid, "subtask 1") for s in split_sentences(narrative) or [narrative]]
        best.append(max(100 * rouge([ref], [c])["rougeL"] for c in cut))
    return mean(best)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name, default in DEFAULTS.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=Path, default=default)
    parser.add_argument("--show", action="store_true", help="print every output of the rule stage on the 2026 set")
    args = parser.parse_args()
    try:
        refs = json.loads(args.refs_2026.read_text(encoding="utf-8"))
        sets = {
            "(a) 2025 public pairs, phrases removed": load_pairs(args.pairs_2025),
            "(b) 2026 test narratives, references written here": load_pairs(args.test_2026, refs),
            "(c) hand-written dev cases": load_pairs(args.dev),
            "(a2) 2025 public pairs WITH the marked phrases (for reference: the 2025 input)": load_pairs(
                args.pairs_2025, marked=True),
        }
    except (OSError, ValueError, ArchEHRDataError) as exc:
        raise SystemExit(f"error: {exc}") from None

    systems: dict[str, Predictor] = {
        "rule stage (default)": rule_stage(),
        "rule stage before #20": previous_rule,
        "baseline: last question sentence": last_question,
        "baseline: first sentence": first_sentence,
        "ablation: no vague-word filling": rule_stage(fill_vague=False),
        "ablation: no passive rewrite": rule_stage(passive=False),
        "ablation: no focus added": rule_stage(add_focus=False),
    }
    default_outputs: dict[str, list[str]] = {}
    for title, pairs in sets.items():
        print(f"\n## {title} ({len(pairs)} cases)\n")
        print("| system | ROUGE-L | ROUGE-Lsum | defects (pleasantry, cut, >15 words, no '?') |")
        print("|---|---|---|---|")
        for name, predict in systems.items():
            rouge_l, rouge_lsum, flagged, outputs = score(predict, pairs)
            shown = f"**{rouge_l:.1f}**" if name.endswith("(default)") else f"{rouge_l:.1f}"
            print(f"| {name} | {shown} | {rouge_lsum:.1f} | {len(flagged)} |")
            if name.endswith("(default)"):
                default_outputs[title] = outputs
                for line in flagged:
                    print(f"|   defect {line} | | | |")
        print(f"| oracle: best single narrative sentence (ceiling of picking one) | {oracle_sentence(pairs):.1f} | | |")

    pairs_2025 = next(iter(sets.values()))
    cv, in_sample, chosen = leave_one_out(pairs_2025)
    print("\n## Switches chosen on the 2025 pairs (leave-one-out)\n")
    print(f"ROUGE-L leave-one-out {cv:.1f}, in-sample best {in_sample:.1f}, default switches "
          f"{score(rule_stage(), pairs_2025)[0]:.1f}")
    picks = sorted({json.dumps(c, sort_keys=True) for c in chosen})
    print("switches chosen per held-out case: " + "; ".join(picks))

    test_pairs = sets["(b) 2026 test narratives, references written here"]
    stage = rule_stage()
    passes = []
    for _ in range(5):
        start = time.perf_counter()
        for _, narrative, _, _ in test_pairs:
            stage(narrative)
        passes.append(time.perf_counter() - start)
    print(f"\nspeed: {1000 * min(passes) / len(test_pairs):.2f} ms per narrative (rule stage, 2026 set, best of 5 "
          f"passes; mean {1000 * mean(passes) / len(test_pairs):.2f})")

    if args.show:
        print("\n## Rule stage outputs on the 2026 narratives\n")
        for (cid, _, _, ref), out in zip(test_pairs, default_outputs[
                "(b) 2026 test narratives, references written here"], strict=True):
            print(f"{cid}: {out}\n     reference: {ref}")


if __name__ == "__main__":
    main()
