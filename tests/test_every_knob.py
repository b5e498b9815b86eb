"""Every documented parameter of the default run's stage implementations changes its predictions; a parameter of
an implementation that is not in use is refused in one line; every hparams_search config sweeps live parameters."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from pathlib import Path

import dspy
import pytest
import yaml
from omegaconf import OmegaConf

from common.contract import contract_for
from common.overrides import dead_stage_key
from tasks.archehr.data import load_cases
from tests.builders import archehr_stage, config, shared_embedder
from tests.cli import run_main

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
CASES = load_cases(ROOT / "data" / "archehr" / "dev_cases.xml")[:6]
VOLATILE = ("seconds", "usage")

# (implementation option, parameter) -> a value that must change the default run's predictions on the dev cases.
# A parameter a stage file gains without an entry here fails test_every_parameter_has_a_changed_value.
CHANGED = {
    ("question/finetuned", "max_words"): 6,
    ("question/finetuned", "register"): "consumer",
    ("question/finetuned", "samples"): 0,
    ("question/finetuned", "temperature"): 3.0,
    ("question/finetuned", "coverage_weight"): 0.0,
    ("question/finetuned", "opening_weight"): 50.0,
    ("question/finetuned", "max_new_tokens"): 5,
    ("question/baseline", "max_words"): 6,
    ("question/baseline", "method"): "first 15 words",
    ("evidence/embedding", "anchor"): "patient_narrative",
    ("evidence/embedding", "top_share"): 0.3,
    ("evidence/embedding", "min_selected"): 40,
    ("evidence/embedding", "lexical_weight"): 0.6,
    ("evidence/embedding", "relative"): False,
    ("evidence/embedding", "cuts"): [0.2, 0.3, 0.4, 0.5],
    ("answer/extractive", "max_words"): 20,
    ("answer/extractive", "choose"): "note_order",
    ("alignment/similarity", "max_citations"): 1,
    ("alignment/similarity", "threshold"): 0.6,
    ("alignment/similarity", "margin"): None,
    ("alignment/similarity", "min_links"): 2,
    ("alignment/similarity", "lexical_weight"): 0.0,
    # the learned stages (the default run's): None/null in conf means "the compiled program's fitted value"
    ("evidence/learned", "anchor"): "patient_narrative",
    ("evidence/learned", "threshold"): 0.05,
    ("evidence/learned", "relative"): 0.3,
    ("evidence/learned", "min_selected"): 40,
    ("evidence/learned", "cuts"): [0.1, 0.2, 0.3, 0.4],
    ("alignment/learned", "max_citations"): 1,
    ("alignment/learned", "threshold"): 0.9,
    ("alignment/learned", "relative"): 0.95,
    ("alignment/learned", "min_links"): 3,
}
# The grounding check runs on an LM's answer (the default run's extractive answer quotes the note): each parameter
# must change its verdicts on the dev cases' reference answers, which paraphrase the note.
GROUNDING_CHANGED = {
    ("grounding/similarity", "min_similarity"): 0.8,
    ("grounding/similarity", "min_coverage"): 0.9,
    ("grounding/similarity", "on_unsupported"): "drop",
}
# a parameter whose other values need something these runs do not have: refused in one line instead
NEEDS_MORE = {("grounding/similarity", "judge"): ("lm", "needs an LM")}
# parameters that change how a stage runs, not what it predicts: each acts where the named test checks it
ACTS_ELSEWHERE = {("question/finetuned", "threads"):
                  "test_question_stage.py::test_threads_reach_the_model_and_come_from_the_environment_by_default",
                  ("question/finetuned", "cache"):
                  "test_question_stage.py::test_a_cached_message_gets_the_candidates_a_decode_gives_and_false_decodes",
                  # the default answer keeps whole sentences: the soft cut acts on a sentence over the limit alone, or
                  # with choose=note_order (none of the first dev cases has one)
                  ("answer/extractive", "soft_cut_ratio"):
                  "test_archehr_no_lm.py::test_the_soft_cut_ratio_acts_on_a_sentence_over_the_limit_in_either_mode"}


def default_implementations() -> dict[str, tuple[str, list[str]]]:
    """{stage: (group/option, its parameters)} of the default run (lm=none), read from the composed config."""
    from common.config_groups import choice

    cfg = config("program=archehr")
    out = {}
    for stage in ("question", "evidence", "answer", "alignment", "grounding"):
        node = cfg.program[stage]
        if not node.get("_target_"):
            continue
        option = choice(cfg, f"program/archehr/{stage}")
        out[stage] = (f"{stage}/{option}", [k for k in node if not str(k).startswith("_")])
    return out


# The question stage's output feeds the others; a knob of another stage is measured with the baseline question stage
# (the same questions before and after, and a tenth of the time of the learned model's sampling).
FAST_QUESTION = "program/archehr/question=baseline"


def _with_question(overrides: tuple[str, ...]) -> tuple[str, ...]:
    if not any(o.startswith(("program.question.", "program/archehr/question=")) for o in overrides):
        return (FAST_QUESTION, *overrides)
    return overrides


def each_prediction(*overrides: str) -> Iterator[dict]:
    """The default run's record of each dev case in turn (`predictions` keeps the lists a test reads again)."""
    cfg = config("program=archehr", "metrics.bertscore=null", *_with_question(overrides))
    contract = contract_for(cfg)
    program = contract.build(cfg, None, embedder=shared_embedder())
    for case in CASES:
        record = contract.predict(program, case)
        yield {k: v for k, v in record.items() if k not in VOLATILE}


@functools.cache
def predictions(*overrides: str) -> list[dict]:
    return list(each_prediction(*overrides))


FIRST_CASES = (0, 1, 2)
# the first 3 dev cases, except where their questions do not meet what the knob acts on: the opening prior acts on
# over-used openings, and the coverage term where the most probable candidate names less of the message than another.
# Those knobs run on the first dev case each changes with the shipped adapter (measured: opening case 3, coverage
# case 1), alone: the stage's sampling is this module's cost
QUESTION_CASES = {"opening_weight": (3,), "coverage_weight": (1,)}
QUESTION_MESSAGES = load_cases(ROOT / "data" / "archehr" / "dev_cases.xml")[:8]


@functools.cache
def _question_stage(*overrides: str):
    choice = next(o for o in overrides if o.startswith("program/archehr/question=")).split("=", 1)[1]
    return archehr_stage("question", choice, *(o for o in overrides if not o.startswith("program/archehr/")))


def each_question(*overrides: str, cases: tuple[int, ...] = FIRST_CASES) -> Iterator[str]:
    """The question stage's output on these dev cases, alone, in turn: its output is all a question knob can change
    (the other stages only pass it on), and the learned model's sampling is the cost of this module."""
    stage = _question_stage(*overrides)
    for case in (QUESTION_MESSAGES[i] for i in cases):
        yield stage(patient_narrative=case.patient_narrative,
                    patient_question=" ".join(case.patient_question_phrases)).clinician_question


@functools.cache
def questions(*overrides: str, cases: tuple[int, ...] = FIRST_CASES) -> list[str]:
    return list(each_question(*overrides, cases=cases))


def any_differs(before: list, after: Iterator) -> bool:
    """Whether a changed run's outputs differ from `before`, computed case by case up to the first difference."""
    return any(changed != unchanged for changed, unchanged in zip(after, before, strict=True))


@pytest.fixture
def no_lm() -> None:
    """The default run has no LM (a DummyLM test before may have configured one)."""
    dspy.configure(lm=None)


def test_every_parameter_has_a_changed_value():
    missing = [(impl, p) for impl, params in default_implementations().values() for p in params
               if (impl, p) not in CHANGED and (impl, p) not in NEEDS_MORE and (impl, p) not in ACTS_ELSEWHERE]
    assert not missing, f"add a changed value for {missing} to CHANGED (or NEEDS_MORE)"


@pytest.mark.parametrize(("impl", "param"), sorted(CHANGED, key=str))
def test_each_parameter_of_the_default_run_changes_its_predictions(no_lm, impl, param):
    """The default run's implementations against the default run; another implementation of a stage (no longer the
    default, e.g. evidence/embedding) against the default run with that implementation chosen. A question stage is
    always named, so that predictions() keeps it instead of FAST_QUESTION."""
    stage = impl.split("/")[0]
    named = stage == "question" or impl not in {i for i, _ in default_implementations().values()}
    chosen = (f"program/archehr/{impl.replace('/', '=')}",) if named else ()
    cases = QUESTION_CASES.get(param, FIRST_CASES)
    before = questions(*chosen, cases=cases) if stage == "question" else predictions(*chosen)
    value = CHANGED[(impl, param)]
    override = f"program.{stage}.{param}={'null' if value is None else value}"
    after = each_question(*chosen, override, cases=cases) if stage == "question" else each_prediction(*chosen, override)
    assert any_differs(before, after), f"program.{stage}.{param}={value} left every prediction unchanged"


def grounding_verdicts(*overrides: str) -> list:
    from hydra.utils import instantiate

    from common.resources import Resources
    from tasks.archehr.data import load_key

    key = load_key(ROOT / "data" / "archehr" / "dev_cases_key.json")
    cfg = config("program=archehr", "program/archehr/grounding=similarity", *overrides)
    check = Resources(embedder=shared_embedder()).complete(instantiate(cfg.program.grounding, _convert_="all"),
                                                           "program.grounding", max_words=75, soft_cut_ratio=0.6)
    out = []
    for case in CASES:
        ref = key[case.case_id].answer_sentences
        items = [{"id": sid, "text": text} for sid, text, _ in ref]
        links = [{"answer_id": sid, "evidence_id": list(cites)} for sid, _, cites in ref]
        result = check(items, links, list(case.sentences), " ".join(text for _, text, _ in ref))
        out.append((result.verdicts, result.answer))
    return out


@pytest.mark.parametrize(("impl", "param"), sorted(GROUNDING_CHANGED))
def test_each_grounding_parameter_changes_its_verdicts(no_lm, impl, param):
    value = GROUNDING_CHANGED[(impl, param)]
    assert grounding_verdicts(f"program.grounding.{param}={value}") != grounding_verdicts(), \
        f"program.grounding.{param}={value} changed no verdict"


def test_every_grounding_parameter_has_a_changed_value():
    cfg = config("program=archehr", "program/archehr/grounding=similarity")
    params = [k for k in cfg.program.grounding if not str(k).startswith("_")]
    missing = [p for p in params if ("grounding/similarity", p) not in {**GROUNDING_CHANGED, **NEEDS_MORE}]
    assert not missing, f"add a changed value for {missing} to GROUNDING_CHANGED (or NEEDS_MORE)"


def test_each_parameter_said_to_act_elsewhere_names_a_test_that_exists():
    for where in ACTS_ELSEWHERE.values():
        module, name = where.split("::")
        assert f"def {name}(" in (Path(__file__).parent / module).read_text(), where


@pytest.mark.parametrize(("impl", "param"), sorted(NEEDS_MORE))
def test_a_parameter_needing_more_is_refused_in_one_line(impl, param):
    from common.errors import ClinprogError
    from runners.program import choose_lm_or_no_lm

    stage = impl.split("/")[0]
    value, reason = NEEDS_MORE[(impl, param)]
    cfg = config("program=archehr", f"program/archehr/{impl.replace('/', '=')}", f"program.{stage}.{param}={value}")
    with pytest.raises(ClinprogError, match=reason):
        choose_lm_or_no_lm(cfg, contract_for(cfg))


@pytest.mark.parametrize("override", ["program.evidence.strict_threshold=5", "program.evidence.fallback_count=1",
                                      "program.alignment.tokens_per_citation=2", "program.question.demos.ids=[1]"])
def test_a_parameter_of_an_unused_implementation_is_refused_in_one_line(override):
    key = override.split("=")[0]
    line = dead_stage_key(key, config("program=archehr"))
    stage = override.split(".")[1]
    assert line is not None and line.startswith(f"{key}: not a setting of program/archehr/{stage}=")
    assert f"(the {stage} stage in use); its settings: " in line
    assert f"program/archehr/{stage}=" in line and "\n" not in line
    # the same key with its implementation chosen is live: Hydra composes it
    owner = re.search(r"add (program/archehr/\w+=\w+)", line).group(1)
    assert OmegaConf.select(config("program=archehr", owner, override), key) is not None


def test_the_refusal_reaches_the_user_as_one_error_line(tmp_path):
    """`main.cli()` prints it (a process: the command line is the point)."""
    proc = run_main("program=archehr", "program.evidence.strict_threshold=5", f"hydra.run.dir={tmp_path / 'r'}",
                    cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("error: program.evidence.strict_threshold: not a setting of "
                                  "program/archehr/evidence=learned (the evidence stage in use); its settings: anchor, ")
    assert not (tmp_path / "r").exists()


def test_a_parameter_added_with_plus_is_refused_when_built():
    from common.errors import ConfigError

    cfg = config("program=archehr", "+program.evidence.strict_threshold=5")
    with pytest.raises(ConfigError, match=r"^program.evidence.strict_threshold: not a setting of programs.archehr.evidence."
                                          r"learned.LearnedEvidenceScorer \(the implementation in use\); its settings: "
                                          r"anchor, cuts, min_selected, relative, threshold; choose another "):
        contract_for(cfg).build(cfg, None, embedder=shared_embedder())


def _choices(spec: str) -> list:
    """The values of an Optuna sweeper param: choice(a, b, ...) or range(a, b)."""
    inner = spec[spec.index("(") + 1: spec.rindex(")")]
    values = [yaml.safe_load(v.strip()) for v in inner.split(",")]
    return list(range(*values)) if spec.startswith("range") else values


SEARCHES = sorted(p.stem for p in (ROOT / "conf" / "hparams_search").glob("archehr*.yaml"))


def _search(search: str) -> tuple[list[str], dict[str, list]]:
    """A search config's group choices as command-line overrides (without the Optuna sweeper plugin, an extra) and
    its swept parameters with their values."""
    text = yaml.safe_load((ROOT / "conf" / "hparams_search" / f"{search}.yaml").read_text())
    overrides = []
    for entry in text.get("defaults", []):
        (group, option), = entry.items()
        group = group.removeprefix("override ").lstrip("/")
        if not group.startswith("hydra/"):
            overrides.append(f"{group}={option}")
    return overrides, {k: _choices(v) for k, v in text["hydra"]["sweeper"]["params"].items()}


@pytest.mark.parametrize("search", SEARCHES)
def test_each_swept_parameter_is_a_parameter_of_the_implementation_the_search_selects(search):
    overrides, params = _search(search)
    for key in params:
        cfg = config("program=archehr", *overrides)
        assert dead_stage_key(key, cfg) is None, f"{search}: {key}"
        assert OmegaConf.select(cfg, key, default="missing") != "missing", f"{search} sweeps {key}: not in its config"


def test_the_default_run_search_sweeps_live_parameters(no_lm):
    overrides, params = _search("archehr_thresholds")
    for key, values in params.items():
        seen = {str(predictions(*overrides, f"{key}={v}")) for v in values}
        assert len(seen) > 1, f"archehr_thresholds sweeps {key} over {values}, which never changes the predictions"


def test_the_lm_evidence_search_sweeps_live_parameters(dummy_lm):
    from tasks.archehr.data import NoteSentence

    note = [NoteSentence(str(i), f"Sentence number {i} of the note.") for i in range(1, 7)]
    overrides, params = _search("archehr_lm_thresholds")
    cfg = config("program=archehr", *overrides)
    assert contract_for(cfg).stage_choices(cfg)["evidence"] == "lm"  # the search selects the LM evidence stage
    for key, values in params.items():
        selections = set()
        for v in values:
            picked = []
            # scores that separate every threshold (5..1), and one with nothing >= 3 (the first-n fallback)
            for scores in ([5, 4, 3, 2, 1, 1], [2, 2, 1, 1, 1, 1]):
                dummy_lm([{"scores": scores}])
                stage = archehr_stage("evidence", "lm", *overrides, f"{key}={v}")
                picked.append(tuple(stage(clinician_question="q", patient_narrative="", sentences=note).evidence_ids))
            selections.add(tuple(picked))
        assert len(selections) > 1, f"archehr_lm_thresholds sweeps {key} over {values}: the selection never changes"
