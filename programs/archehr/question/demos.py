"""Few-shot demos for the LM question stage: public dev patient/clinician question pairs (config, not learned)."""

from __future__ import annotations

import dspy

from common.errors import ConfigError
from tasks.archehr.data import load_cases


def load_question_demos(path: str | None, ids: list[str]) -> list[dspy.Example]:
    """The cases `ids` of `path` as (patient narrative, marked question) -> clinician question examples."""
    if not path or not ids:
        return []
    by_id = {c.case_id: c for c in load_cases(path)}
    missing = [i for i in ids if i not in by_id or not by_id[i].clinician_question]
    if missing:
        raise ConfigError(f"program.question.demos.ids {missing} have no clinician question in {path}")
    return [
        dspy.Example(
            patient_narrative=by_id[i].patient_narrative,
            patient_question=" ".join(by_id[i].patient_question_phrases) or "(none)",
            clinician_question=by_id[i].clinician_question,
        ).with_inputs("patient_narrative", "patient_question")
        for i in ids
    ]
