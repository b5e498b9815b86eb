"""`GroundingJudge` (`program.grounding.judge=lm`): does the note support an answer sentence, as an LM judges it?
`fit` compiles it with a DSPy teleprompter on the training reference sentences as written and misstated by perturb.py;
a compile worse than its start, or no better than chance, is refused.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

import dspy

from common.errors import ConfigError
from common.failures import RECOVERABLE, StageOutputError
from common.markup import strip_markup
from programs.archehr.grounding.perturb import CONFLICT_KINDS, perturb
from programs.archehr.grounding.verdicts import CONTRADICTED, MAX_PREMISE_SENTENCES, NOT_IN_NOTE, SUPPORTED
from programs.archehr.text import numbered
from signatures.archehr import JudgeGrounding
from signatures.constrained import reply_bound, with_output_schema
from tasks.archehr.data import NoteSentence
from tasks.archehr.fabrications import fabricate

VERDICTS = (SUPPORTED, CONTRADICTED, NOT_IN_NOTE)
KINDS = ("none", *CONFLICT_KINDS, "other")
REPLY_TOKENS = 96  # a verdict, a kind and a few quoted words
MAX_QUOTE_CHARS = 120
BOOTSTRAP = functools.partial(dspy.BootstrapFewShot, max_bootstrapped_demos=4, max_labeled_demos=4, max_rounds=1)

NO_TRAINING_SENTENCES = ("the judge's training cases have no reference answer sentences with citations (data.train "
                         "needs ArchEHR XML cases with a key; JSON lines of question pairs train the question stage)")


class GroundingJudge(dspy.Module):
    def __init__(self, teleprompter: Callable[..., Any] | None = None, train_examples: int = 48,
                 val_examples: int = 80, seed: int = 0) -> None:
        super().__init__()
        if int(train_examples) < 2 or int(val_examples) < 2:
            raise ConfigError("program.grounding.judge_compile: train_examples and val_examples must be >= 2")
        # a teleprompter class or partial, given its metric when compiling
        self.teleprompter = teleprompter or BOOTSTRAP
        if not callable(self.teleprompter):
            raise ConfigError("program.grounding.judge_compile.teleprompter must name a DSPy teleprompter "
                              "(_target_: dspy.BootstrapFewShot, _partial_: true)")
        self.train_examples, self.val_examples, self.seed = int(train_examples), int(val_examples), int(seed)
        # a quote, not an essay: a small model otherwise repeats itself up to the reply bound
        self.predict = dspy.Predict(with_output_schema(JudgeGrounding, "conflicting_words",
                                                       {"type": "string", "maxLength": MAX_QUOTE_CHARS}))

    def forward(self, answer_sentence: str, note_sentences: Sequence[NoteSentence] | str) -> dspy.Prediction:
        """`note_sentences`: the cited note sentences, or their `[id] text` lines (how examples and demos hold them)."""
        out = self.predict(answer_sentence=answer_sentence, note_sentences=note_lines(note_sentences),
                           config=reply_bound(REPLY_TOKENS))
        verdict = str(out.verdict).strip().lower()
        if verdict not in VERDICTS:
            raise StageOutputError(f"the judge answered {out.verdict!r}, not one of {VERDICTS}")
        kind = str(out.kind).strip().lower()
        words = strip_markup(str(out.conflicting_words or ""))[0].strip()[:MAX_QUOTE_CHARS]
        if verdict == SUPPORTED:
            kind, words = "none", ""
        elif kind not in KINDS or kind == "none":
            kind = "other"
        return dspy.Prediction(verdict=verdict, kind=kind, conflicting_words=words)

    # --- compiling ------------------------------------------------------------------------------------------------
    def preflight(self, trainset: Sequence[dspy.Example]) -> None:
        """What fit needs of `trainset` (cited reference answer sentences), checked before the compile's scoring."""
        if not any(cites for ex in trainset if getattr(ex, "key", None) is not None
                   for _, _, cites in ex.key.answer_sentences):
            raise ConfigError(NO_TRAINING_SENTENCES)

    def fit(self, trainset: Sequence[dspy.Example], valset: Sequence[dspy.Example],
            log: Callable[[str], None] = print) -> dict[str, Any]:
        if dspy.settings.lm is None:
            raise ConfigError("compiling the LM judge needs an LM: lm=embedded, or a server (conf/lm/)")
        started = time.time()
        train = sentence_examples(trainset, self.seed, self.train_examples)
        val = sentence_examples(valset, self.seed + 1, self.val_examples, perturbed=False)
        if not train:
            raise ConfigError(NO_TRAINING_SENTENCES)
        log(f"LM judge: {len(train)} training sentences, {len(val)} validation sentences")
        before = judge_scores(self, val)
        takes = inspect.signature(self.teleprompter).parameters
        # the metric goes to a teleprompter that takes one (LabeledFewShot does not: it copies labelled demos)
        teleprompter = self.teleprompter(**({"metric": flag_agrees} if "metric" in takes else {}))
        if not callable(getattr(teleprompter, "compile", None)):
            raise ConfigError(f"program.grounding.judge_compile.teleprompter: {type(teleprompter).__name__} has no "
                              "compile(student, trainset)")
        accepts_val = "valset" in inspect.signature(teleprompter.compile).parameters
        compiled = teleprompter.compile(self.deepcopy(), trainset=train, **({"valset": val} if accepts_val else {}))
        candidate = compiled.predict
        after = judge_scores(compiled, val)
        fit: dict[str, Any] = {"training_sentences": len(train), "validation_sentences": len(val),
                               "teleprompter": type(teleprompter).__name__, "demos": len(candidate.demos),
                               "before": before, "after": after, "seconds": round(time.time() - started, 1)}
        log(f"LM judge: validation recall {before['recall']} -> {after['recall']}, false flags "
            f"{before['false_flags']} -> {after['false_flags']} ({len(candidate.demos)} demos)")
        gain, start = after["recall"] - after["false_flags"], before["recall"] - before["false_flags"]
        if gain < start:
            fit["refused"] = (f"the compiled judge separates the validation sentences worse than the one it started "
                              f"from (recall - false flags {gain:.3f} < {start:.3f})")
        elif gain <= 0:
            fit["refused"] = (f"the compiled judge flags {after['recall']:.0%} of the validation's misstated sentences "
                              f"and {after['false_flags']:.0%} of its supported ones: no better than chance (this LM "
                              "cannot tell them apart)")
        if "refused" not in fit:
            self.predict.demos = list(candidate.demos)
            self.predict.signature = candidate.signature
        return fit


def note_lines(note_sentences: Sequence[NoteSentence] | str) -> str:
    if isinstance(note_sentences, str):
        return note_sentences
    return numbered((s.id, s.text) for s in note_sentences)


def flag_agrees(example: dspy.Example, pred: dspy.Prediction, trace: Any = None) -> bool:
    """Is the sentence flagged (contradicted / not in the note) exactly when its label says it misstates the note?"""
    return (str(getattr(pred, "verdict", SUPPORTED)) != SUPPORTED) == (example.verdict != SUPPORTED)


def judge_scores(judge: GroundingJudge, examples: Sequence[dspy.Example]) -> dict[str, Any]:
    """Flag recall on the misstated sentences, false flags on the supported ones, and how many replies failed."""
    flagged_bad = flagged_good = bad = good = failed = 0
    for ex in examples:
        try:
            flag = judge(answer_sentence=ex.answer_sentence, note_sentences=ex.note_sentences).verdict != SUPPORTED
        except RECOVERABLE:
            flag, failed = False, failed + 1  # an unparsable judgement flags nothing, as in a run
        if ex.verdict == SUPPORTED:
            good, flagged_good = good + 1, flagged_good + flag
        else:
            bad, flagged_bad = bad + 1, flagged_bad + flag
    return {"recall": round(flagged_bad / bad, 4) if bad else 0.0,
            "false_flags": round(flagged_good / good, 4) if good else 0.0, "failed_replies": failed}


def changed_words(original: str, changed: str) -> str:
    """The words of `changed` that replace or add to `original` (the word before a deletion when it only drops)."""
    a, b = original.split(), changed.split()
    out: list[str] = []
    for op, _, _, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op in ("replace", "insert"):
            out.extend(b[j1:j2])
        elif op == "delete" and j1 > 0:
            out.append(b[j1 - 1])
    return " ".join(out)


def sentence_examples(examples: Sequence[dspy.Example], seed: int, limit: int,
                      perturbed: bool = True) -> list[dspy.Example]:
    """Up to `limit` sentence examples, half supported (reference sentences against the note sentences they cite) and
    half misstated: with `perturbed` the same sentences with one fact changed (training), else the built-in
    fabrications of tasks/archehr/fabrications.py citing an essential sentence (validation)."""
    rng = random.Random(seed)
    keyed = [ex for ex in examples if getattr(ex, "key", None) is not None]
    supported, misstated = [], []
    for ex in keyed:
        # other cases' answer sentences: what the reason and not-in-the-note perturbations borrow from
        foreign = [t for other in keyed if other.case.case_id != ex.case.case_id
                   for _, t, _ in other.key.answer_sentences] if perturbed else []
        by_id = {s.id: s for s in ex.case.sentences}
        for _, text, cites in ex.key.answer_sentences:
            cited = [by_id[i] for i in cites if i in by_id][:MAX_PREMISE_SENTENCES]
            if not cited:
                continue
            supported.append(_example(text, cited, SUPPORTED, "none", ""))
            if not perturbed:
                continue
            kind = rng.choice([*CONFLICT_KINDS, NOT_IN_NOTE])
            changed = perturb(text, kind, rng, foreign)
            if changed:
                verdict = NOT_IN_NOTE if kind == NOT_IN_NOTE else CONTRADICTED
                misstated.append(_example(changed, cited, verdict, "other" if kind == NOT_IN_NOTE else kind,
                                          changed_words(text, changed)))
        if not perturbed and ex.case.sentences:
            essential = [by_id[i] for i in sorted(ex.key.essential) if i in by_id] or [ex.case.sentences[0]]
            for text in fabricate(ex.case, rng):
                misstated.append(_example(text, [rng.choice(essential)], NOT_IN_NOTE, "other", ""))
    rng.shuffle(supported)
    rng.shuffle(misstated)
    half = limit // 2
    out = supported[:half] + misstated[: limit - min(half, len(supported))]
    rng.shuffle(out)
    return out


def _example(text: str, cited: list[NoteSentence], verdict: str, kind: str, words: str) -> dspy.Example:
    return dspy.Example(answer_sentence=text, note_sentences=note_lines(cited), verdict=verdict, kind=kind,
                        conflicting_words=words).with_inputs("answer_sentence", "note_sentences")
