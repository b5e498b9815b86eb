"""Signatures of MedReAct'N'MedReFlex (MEDIQA-CORR 2024): the ReAct agent, the evaluators, reflexion, the parser."""

from __future__ import annotations

from typing import Literal

import dspy


class MedReActStep(dspy.Signature):
    """You are a physician reviewing a clinical text that may contain exactly one medical error (a wrong
    diagnosis, management, treatment, pharmacotherapy or causal organism). Work step by step: state what you
    observe, think, then choose one action. `search`: look up medical knowledge (write `search_query`).
    `final_mistake`: name the erroneous sentence (`sentence_id`) and give its corrected version
    (`corrected_sentence`). `no_error`: the text is medically correct. Use the reflections from earlier
    attempts, if any, to avoid repeating their mistakes."""

    clinical_text: str = dspy.InputField(desc="the text, one sentence per line, formatted `[id] sentence`")
    reflections: str = dspy.InputField(desc="lessons from earlier failed attempts (may be empty)")
    history: str = dspy.InputField(desc="earlier steps of this attempt: thoughts, actions and search results")
    observation: str = dspy.OutputField(desc="what is relevant in the text and the history")
    thought: str = dspy.OutputField(desc="reasoning about which sentence, if any, is wrong")
    action: Literal["search", "final_mistake", "no_error"] = dspy.OutputField()
    search_query: str = dspy.OutputField(desc="for `search`: the query; else empty")
    sentence_id: int = dspy.OutputField(desc="for `final_mistake`: the id of the erroneous sentence; else -1")
    corrected_sentence: str = dspy.OutputField(desc="for `final_mistake`: the corrected sentence; else empty")


class MedEvalReview(dspy.Signature):
    """You are a senior physician reviewing a proposed correction of a clinical text against one criterion.
    Explain your judgement, then score the proposal from 1 (very poor) to 5 (excellent) on that criterion."""

    clinical_text: str = dspy.InputField()
    proposal: str = dspy.InputField(desc="the sentence judged wrong and its proposed correction")
    criterion: str = dspy.InputField(desc="the criterion to judge, with its definition")
    reasoning: str = dspy.OutputField()
    score: int = dspy.OutputField(desc="1-5")


class MedReflect(dspy.Signature):
    """The last attempt to find and correct the medical error in this clinical text failed (no answer within
    the step limit, or reviewers rejected it). Reflect on what went wrong and write a short, concrete strategy
    for the next attempt (e.g. which sentences to check, what to search for)."""

    clinical_text: str = dspy.InputField()
    history: str = dspy.InputField(desc="the failed attempt's steps")
    feedback: str = dspy.InputField(desc="why it failed: the reviews, or that no answer was given")
    reflection: str = dspy.OutputField(desc="what to do differently next time")


class MedFinalParse(dspy.Signature):
    """Rewrite the proposed correction so it reads like the original sentence: keep the original wording,
    abbreviations and structure, and change only what corrects the medical error. Output one sentence."""

    original_sentence: str = dspy.InputField()
    proposed_correction: str = dspy.InputField()
    corrected_sentence: str = dspy.OutputField()
