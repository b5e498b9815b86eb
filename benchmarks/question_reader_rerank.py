"""Can a reader rerank the question stage's candidates (issue #70 item 3)?

`python benchmarks/question_reader_rerank.py [--model smollm2|qwen2.5-coder-1.5b] [--score probe|loglik]`: the
fine-tuned question stage (the shipped state) makes its candidates for the messages of the dev cases and the 2025 dev
pairs (its training messages: training data here) and of the 32 realistic cases (validation, never trained on).

- `--score probe`: the reader reads each (message, candidate) in one prompt (`read_claims`, the message as the
  "note"); a ridge regression on its last hidden state predicts the candidate's ROUGE-L against the reference.
- `--score loglik`: the model's mean log-probability of each candidate (and its end of turn) as the reply to "write
  the clinician's question" after the message. The message is read once; each candidate continues from its cache.

Reported on validation: ROUGE-L of today's pick, of the oracle among the candidates, of the new score alone, and of
today's score + w x the new one (both standardised on training); `w` is also chosen on training. Output:
results_question_reader_rerank.txt.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from hydra.utils import instantiate
from rouge_score import rouge_scorer
from sklearn.linear_model import Ridge

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common.config_groups import compose_config  # noqa: E402
from common.logistic_fit import standardisation  # noqa: E402
from common.program_state import load_module_state  # noqa: E402
from common.resources import Resources  # noqa: E402
from lms.reader import GGUFReader, model_file  # noqa: E402
from tasks.archehr.data import load_cases  # noqa: E402

DATA = ROOT / "data" / "archehr"
SPLITS = {"train": ["dev_cases", "dev_questions_2025"], "val": ["realistic_cases_a", "realistic_cases_b"]}


def question_stage():
    cfg = compose_config("program=archehr")
    stage = Resources(embedder=instantiate(cfg.program.embedder)).complete(
        instantiate(cfg.program.question, _convert_="all"), "program.question")
    return load_module_state(stage, cfg.program.compiled, "question")


LOGLIK_ASK = "Write the one short question a clinician would ask to answer this message."


class Loglik:
    """Mean log-probability of a candidate reply after the message, the message's tokens read once per message."""

    def __init__(self, model: str) -> None:
        import llama_cpp

        self.llm = llama_cpp.Llama(model_path=str(model_file(model, None)), n_ctx=1024, n_batch=512, logits_all=True,
                                   n_threads=2, verbose=False)

    def tokens(self, text: str, special: bool = False) -> list[int]:
        return self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=special)

    def __call__(self, message: str, candidates: list[str]) -> np.ndarray:
        llm = self.llm
        prefix = (self.tokens("<|im_start|>user\n", True) + self.tokens("A patient writes: ")
                  + self.tokens(message)[:700] + self.tokens("\n" + LOGLIK_ASK)
                  + self.tokens("<|im_end|>\n<|im_start|>assistant\n", True))
        llm.reset()
        llm.eval(prefix)
        first = llm.scores[len(prefix) - 1].copy()
        out = []
        for candidate in candidates:
            reply = self.tokens(candidate) + self.tokens("<|im_end|>", True)
            llm.n_tokens = len(prefix)  # the message's cache kept; eval drops what the last candidate left
            llm.eval(reply)
            logits = np.vstack([first, llm.scores[len(prefix):len(prefix) + len(reply) - 1]]).astype(np.float64)
            top = logits.max(axis=1, keepdims=True)
            logp = logits - top - np.log(np.exp(logits - top).sum(axis=1, keepdims=True))
            out.append(float(logp[np.arange(len(reply)), reply].mean()))
        return np.array(out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--score", choices=("probe", "loglik"), default="probe")
    args = parser.parse_args()
    stage = question_stage()
    reader = GGUFReader(model=args.model) if args.score == "probe" else Loglik(args.model)
    rouge = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    rows = []  # (split, message index, probe vector, ROUGE-L, today's score)
    reads, started = 0, time.perf_counter()
    for split, names in SPLITS.items():
        for name in names:
            for case in load_cases(DATA / f"{name}.xml"):
                if not case.clinician_question:
                    continue
                found = stage(patient_narrative=case.patient_narrative)
                candidates = [r for r in (found.get("candidates") or []) if r["eligible"]]
                if not candidates:
                    continue
                message = stage.prepare(case.patient_narrative)
                texts = [c["question"] for c in candidates]
                vectors = (reader.read_claims([[message]] * len(texts), texts) if args.score == "probe"
                           else reader(message, texts).reshape(-1, 1))
                reads += len(candidates)
                g = len({r[1] for r in rows})
                rows += [(split, g, v.astype(float), rouge.score(case.clinician_question, c["question"])["rougeL"].fmeasure,
                          c["score"]) for c, v in zip(candidates, vectors, strict=True)]
    print(f"{args.model}, {args.score}: {len({r[1] for r in rows})} messages, {reads} candidates read, "
          f"{(time.perf_counter() - started) / max(reads, 1):.2f} s a candidate (the stage's candidates included)")
    split = np.array([r[0] for r in rows])
    group = np.array([r[1] for r in rows])
    x, y, today = np.stack([r[2] for r in rows]), np.array([r[3] for r in rows]), np.array([r[4] for r in rows])
    train, val = split == "train", split == "val"
    mean, scale = standardisation(x[train])

    def picked(score: np.ndarray) -> float:
        """Mean ROUGE-L x100 over the validation messages of the candidate `score` ranks first."""
        return 100 * float(np.mean([y[idx[np.argmax(score[idx])]] for g in sorted(set(group[val].tolist()))
                                    for idx in [np.where(val & (group == g))[0]]]))

    def paired(before: np.ndarray, after: np.ndarray) -> str:
        """Per validation message: how many picks change, win and lose, and a bootstrap 95% interval of the mean
        ROUGE-L change (x100)."""
        ids = sorted(set(group[val].tolist()))
        diff = np.array([y[idx[np.argmax(after[idx])]] - y[idx[np.argmax(before[idx])]]
                         for g in ids for idx in [np.where(val & (group == g))[0]]]) * 100
        boot = np.random.default_rng(0).choice(diff, (10000, len(diff))).mean(axis=1)
        return (f"validation, per message: {int((diff != 0).sum())} picks changed, {int((diff > 0).sum())} better, "
                f"{int((diff < 0).sum())} worse; mean change {diff.mean():+.2f}, bootstrap 95% "
                f"[{np.percentile(boot, 2.5):+.2f}, {np.percentile(boot, 97.5):+.2f}]")

    print(f"\nvalidation ({len(set(group[val].tolist()))} messages): today's pick {picked(today):.2f}, "
          f"oracle {picked(y):.2f}\n")
    weights = (0.25, 0.5, 1.0, 2.0)
    z_today = (today - today[train].mean()) / today[train].std()
    if args.score == "loglik":
        ll = x[:, 0]
        z = (ll - ll[train].mean()) / ll[train].std()

        def on_train(score: np.ndarray) -> float:
            return float(np.mean([y[idx[np.argmax(score[idx])]] for g in sorted(set(group[train].tolist()))
                                  for idx in [np.where(train & (group == g))[0]]]))

        grid = (0.0, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0)
        chosen = max(grid, key=lambda w: on_train(z_today + w * z))
        print("| log-likelihood alone |" + "".join(f" today + {w} x it |" for w in grid))
        print("|---|" + "---|" * len(grid))
        print(f"| {picked(ll):.2f} |" + "".join(f" {picked(z_today + w * z):.2f} |" for w in grid))
        print(f"\nw chosen on the training messages: {chosen} (training {100 * on_train(z_today):.2f} -> "
              f"{100 * on_train(z_today + chosen * z):.2f}) -> validation {picked(z_today + chosen * z):.2f}")
        print(paired(z_today, z_today + chosen * z))
        return
    print("| ridge alpha | probe alone |" + "".join(f" today + {w} x probe |" for w in weights))
    print("|---|---|" + "---|" * len(weights))
    for alpha in (10, 100, 1000, 10000):
        probe = Ridge(alpha=alpha).fit((x[train] - mean) / scale, y[train]).predict((x - mean) / scale)
        z = (probe - probe[train].mean()) / probe[train].std()
        print(f"| {alpha} | {picked(probe):.2f} |" + "".join(f" {picked(z_today + w * z):.2f} |" for w in weights))


if __name__ == "__main__":
    main()
