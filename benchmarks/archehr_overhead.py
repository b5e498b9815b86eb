"""Per-case overhead of the ArchEHR cascade with a zero-latency DummyLM (no model time), and LM calls per case.

    python benchmarks/archehr_overhead.py [--repeats 30]

The baseline, run in the same process, is the bare cost of the 4 DSPy `Predict` calls the cascade makes
(same signatures and inputs, no stage logic). The ratio shows what our stage logic, schemas, fallbacks and
usage accounting add on top of DSPy itself. Targets: <= 5 ms/case overhead, <= 4 LM calls per case.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dspy  # noqa: E402

from common.config_groups import compose_config  # noqa: E402
from programs.archehr.text import numbered  # noqa: E402
from runners.program import contract_for  # noqa: E402
from signatures.archehr import AlignAnswer, GenerateAnswer, InterpretQuestion, ScoreEvidence  # noqa: E402
from signatures.constrained import ConstrainedJSONAdapter  # noqa: E402
from tasks.archehr.data import load_cases  # noqa: E402

CASES = Path(__file__).resolve().parents[1] / "data" / "archehr" / "bundled_cases.xml"


def answers_for(case):
    return [
        {"clinician_question": "Why was the procedure performed?"},
        {"scores": [5] + [1] * (len(case.sentences) - 1)},
        {"answer": "The note documents the reason. It was done."},
        {"citations": [[case.sentences[0].id]] * len(case.answer_sentences or [1, 2])},
    ]


def time_per_case(fn, cases, repeats: int) -> list[float]:
    samples = []
    for _ in range(repeats):
        for case in cases:
            lm = dspy.utils.DummyLM(answers_for(case), adapter=ConstrainedJSONAdapter())
            with dspy.context(lm=lm, adapter=ConstrainedJSONAdapter()):
                start = time.perf_counter()
                fn(case)
                samples.append(time.perf_counter() - start)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    cases = load_cases(CASES)
    cfg = compose_config("program=archehr")  # the LM cascade as configured (every stage: lm)
    program = contract_for(cfg).build(cfg, None)
    predictors = [dspy.Predict(s) for s in (InterpretQuestion, ScoreEvidence, GenerateAnswer, AlignAnswer)]

    def bare(case):
        sents = numbered((s.id, s.text) for s in case.sentences)
        predictors[0](patient_narrative=case.patient_narrative, patient_question="")
        predictors[1](clinician_question="q", note_sentences=sents)
        predictors[2](clinician_question="q", evidence=sents, note_excerpt=case.note_text)
        predictors[3](answer_sentences=numbered((a.id, a.text) for a in case.answer_sentences), note_sentences=sents)

    calls = []

    def cascade(case):
        pred = program(case=case)
        calls.append(sum(u["lm_calls"] for u in pred.usage.values()))

    time_per_case(cascade, cases, 2)  # warm-up (imports, pydantic schema caches)
    time_per_case(bare, cases, 2)
    calls.clear()
    base = time_per_case(bare, cases, args.repeats)
    ours = time_per_case(cascade, cases, args.repeats)
    b, o = statistics.median(base) * 1e3, statistics.median(ours) * 1e3
    print(f"cases: {len(cases)} x {args.repeats} repeats, zero-latency DummyLM")
    print("| run | median ms/case | p95 ms/case |")
    print("|---|---|---|")
    for name, xs in (("baseline: 4 bare dspy.Predict calls", base), ("clinprog cascade", ours)):
        print(f"| {name} | {statistics.median(xs) * 1e3:.2f} | {sorted(xs)[int(0.95 * len(xs))] * 1e3:.2f} |")
    print(f"cascade / baseline: {o / b:.2f}x; overhead of our stage logic: {o - b:.2f} ms/case (target <= 5)")
    print(f"LM calls per case: {statistics.mean(calls):.2f} (target <= 4)")


if __name__ == "__main__":
    main()
