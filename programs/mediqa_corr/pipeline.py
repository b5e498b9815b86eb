"""MedReAct'N'MedReFlex: up to M episodes of (MedReAct <= N steps -> MedEval) with MedReFlex between them (a failed
episode's reflexion is written for the next episode, so the last episode has none)."""

from __future__ import annotations

import time

import dspy

from common.errors import number_in
from common.usage import UsageLedger
from programs.mediqa_corr.final_parser import MedFinalParser
from programs.mediqa_corr.medeval import MedEval
from programs.mediqa_corr.react import MedReAct, cap
from programs.mediqa_corr.reflect import MedReFlex
from tasks.mediqa_corr.data import Note
from tasks.mediqa_corr.submission import Correction, no_error

ROLES = ("agent", "evaluator", "reflexion", "parser")
TEXT_CAP = 2000  # characters of a free text in predictions.jsonl (the agent itself reads them whole)


class MedReActNMedReFlex(dspy.Module):
    """The agent loop; its four agents are built by Hydra from `conf/program/mediqa_corr.yaml` (`program.module`)."""

    def __init__(self, *, react: MedReAct, evaluator: MedEval, reflexion: MedReFlex, parser: MedFinalParser,
                 max_episodes: int, role_lms: dict[str, dspy.LM] | None = None) -> None:
        super().__init__()
        self.max_episodes = number_in("program.reflexion.max_episodes", max_episodes, 1, integer=True)
        self.react, self.evaluator, self.reflexion, self.parser = react, evaluator, reflexion, parser
        self._role_lms = dict(role_lms or {})

    def forward(self, note: Note) -> dspy.Prediction:
        start = time.perf_counter()
        ledger = UsageLedger()
        memory: list[str] = []
        trace = {"react_steps": 0, "searches": 0, "reflexion_turns": 0, "review_scores": [], "parse_failures": 0}
        episodes: list[dict] = []  # the agent trace of predictions.jsonl and report.html
        result: Correction | None = None
        outcome = "no_error_after_max_episodes"
        for n in range(1, self.max_episodes + 1):
            with ledger.stage("agent", self._role_lms.get("agent")):
                episode = self.react(note, memory).episode
                ledger.repaired("agent", episode.repairs)
            trace["react_steps"] += len(episode.steps)
            trace["searches"] += episode.searches
            trace["parse_failures"] += episode.parse_failures
            proposal = ({"sentence_id": episode.proposal[0], "corrected": episode.proposal[1]}
                        if episode.proposal else None)
            seen = {"steps": [s.as_record(TEXT_CAP) for s in episode.steps], "proposal": proposal,
                    "no_error": episode.no_error, "reviews": [], "accepted": None, "reflection": None}
            episodes.append(seen)
            if episode.no_error:
                result, outcome = no_error(note.text_id), "agent_no_error"
                break
            if episode.proposal is None:
                feedback = f"No final answer within {self.react.max_steps} steps."
            elif same_sentence(episode.proposal[1], note.sentence(episode.proposal[0]) or ""):
                seen["unchanged"] = True  # nothing to review: a submission line must change the sentence it flags
                feedback = f"The corrected sentence repeats sentence {episode.proposal[0]} unchanged."
            else:
                sid, corrected = episode.proposal
                with ledger.stage("evaluator", self._role_lms.get("evaluator")):
                    verdict = self.evaluator(note, sid, corrected)
                    ledger.repaired("evaluator", verdict.get("repairs", 0))
                trace["review_scores"].append(verdict.scores)
                trace["parse_failures"] += verdict.get("parse_failures", 0)
                seen["reviews"] = [{"criterion": r.criterion, "score": r.score, "reasoning": cap(r.reasoning, TEXT_CAP)}
                                   for r in verdict.reviews]
                seen["accepted"] = bool(verdict.accepted)
                if verdict.accepted:
                    with ledger.stage("parser", self._role_lms.get("parser")):
                        parsed = self.parser(note.sentence(sid) or "", corrected)
                        ledger.repaired("parser", parsed.get("repairs", 0))
                    if not same_sentence(parsed.corrected_sentence, note.sentence(sid) or ""):
                        result, outcome = Correction(note.text_id, 1, sid, parsed.corrected_sentence), "accepted"
                        break
                    # the parser gave the sentence back as written: an "error" it does not change is no correction
                    seen["unchanged"] = True
                    feedback = f"The accepted correction, in the note's style, repeats sentence {sid} unchanged."
                else:
                    feedback = "Reviewers rejected the answer:\n" + "\n".join(
                        f"- {r.criterion}: {r.score if r.score is not None else 'unparsable'} ({r.reasoning[:200]})"
                        for r in verdict.reviews)
            if n == self.max_episodes:
                break  # a reflexion is read by the next episode: after the last one nobody would read it
            with ledger.stage("reflexion", self._role_lms.get("reflexion")):
                lesson = self.reflexion(note.numbered(), episode.history(self.react.history_tokens), feedback)
                ledger.repaired("reflexion", lesson.get("repairs", 0))
            memory.append(lesson.reflection)
            seen["reflection"] = cap(memory[-1], TEXT_CAP)
            trace["reflexion_turns"] += 1
        if result is None:
            result = no_error(note.text_id)  # after M failed episodes the parser concludes "no error"
        usage = ledger.as_dict()
        return dspy.Prediction(correction=result, outcome=outcome, reflections=memory, usage=usage, episodes=episodes,
                               repairs=ledger.repairs(),
                               lm_calls=sum(u["lm_calls"] for u in usage.values()),
                               seconds=time.perf_counter() - start, **trace)


def same_sentence(corrected: str, original: str) -> bool:
    """Does a correction repeat its sentence (case, spacing and the final full stop aside)?"""
    def norm(text: str) -> str:
        return " ".join(text.split()).rstrip(".").casefold()

    return norm(corrected) == norm(original)
