"""`program=archehr`: what the ArchEHR-QA 2026 cascade declares for the shared runner skeleton."""

from __future__ import annotations

import base64
import binascii
import logging
import time
from pathlib import Path
from typing import Any

import dspy
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig
from pydantic import BaseModel

from common.config_groups import chosen_name, options
from common.contract import Inputs, ProgramContract
from common.errors import ClinprogError, ConfigError
from common.note_text import split_note
from common.outputs import write_text
from common.plain_rows import is_plain, plain_fingerprint
from common.program_state import load_program_state
from common.resources import Resources, instantiate_node
from common.submission_coverage import coverage, foreign
from common.usage import repairs_summary
from programs.archehr import answers_md, report_html
from programs.archehr import objectives as objectives_module
from programs.archehr.fitted_on import caveat
from programs.archehr.pipeline import ROLES
from programs.archehr.record import ArchEHRRecord, record_of, record_problem
from programs.archehr.report import print_scores, report_markdown, usage_summary
from programs.archehr.serve_page import FORM, SCRIPT
from programs.archehr.serve_schemas import ArchEHRRequest, ArchEHRResponse
from programs.archehr.stages import STAGE_PROTOCOLS, missing_members, uses_lm
from tasks.archehr.case_xml import cases_xml
from tasks.archehr.data import (
    ArchEHRDataError,
    Case,
    NoteSentence,
    cases_from_xml,
    check_key,
    decode_xml,
    load_cases,
    load_key,
    load_question_pairs,
    resolve_key,
)
from tasks.archehr.plain_cases import load_plain_cases
from tasks.archehr.scoring import (
    MetricsConfig,
    SubmissionError,
    score_subtask1,
    score_subtask2,
    score_subtask3,
    score_subtask4,
)
from tasks.archehr.submission import SUBMISSION_FILES, read_submission, write_submissions
from tasks.text_metrics import bertscore_config

log = logging.getLogger(__name__)
SPLITS = {"run": ("cases", "key"), "train": ("train", "train_key"), "val": ("val", "val_key")}


class ArchEHRContract(ProgramContract[Case]):
    name = "archehr"
    unit = "case"
    roles = ROLES
    stage_group = "program/archehr"   # conf/program/archehr/<stage>/<implementation>.yaml
    objectives = objectives_module.OBJECTIVES

    # --- inputs -------------------------------------------------------------------------------------------------
    def load(self, cfg: DictConfig, split: str = "run") -> Inputs[Case]:
        cases_field, key_field = SPLITS[split]
        cases_path = cfg.data[cases_field]
        if split != "run" and not isinstance(cases_path, str) and cases_path is not None:  # data.train / data.val: a list
            return self._load_files([str(p) for p in cases_path], cfg.data.get(key_field), key_field)
        if split != "run" and str(cases_path).endswith(".jsonl"):
            return self._load_files([str(cases_path)], cfg.data.get(key_field), key_field)
        plain = None
        if split == "run" and is_plain(cases_path):  # notes.jsonl | notes.csv: plain rows, split here
            plain = load_plain_cases(cases_path, cfg.data.get("plain") or {})
            cases = plain.cases
        else:
            cases = load_cases(cases_path)
        key_path = resolve_key(cases_path, cfg.data.get(key_field))
        key = None
        if key_path is not None:
            key = load_key(key_path)
            check_key(key, cases, key_path)  # before any LM call: a foreign key never scores these cases
            if str(cfg.data.get(key_field)) == "auto":
                log.info("data.%s=auto: scoring with %s (the key beside the cases file)", key_field, key_path)
        if split == "run" and cfg.data.get("limit"):
            cases = cases[: int(cfg.data.limit)]
        if key is not None:  # the loaded cases only, like the official scripts' --case_ids_to_score
            key = {c.case_id: key[c.case_id] for c in cases if c.case_id in key}
        files = {"cases": str(cases_path)}
        demos = (cfg.program.get("question") or {}).get("demos") or {}
        if demos.get("path"):  # the LM question stage's few-shot demos
            files["question_demos"] = str(demos.path)
        return Inputs(cases, references={"key": key, "key_path": str(key_path) if key_path else None,
                                         "registers": {}, "cut": plain.cut if plain else None}, files=files)

    @staticmethod
    def _load_files(paths: list[str], key_setting: Any, key_field: str) -> Inputs[Case]:
        """data.train / data.val as several files: ArchEHR XML (each key beside its file) and question-pair JSON lines
        (the consumer register); ids must not repeat across the files."""
        if len(paths) > 1 and str(key_setting) != "auto" and key_setting is not None:
            raise ConfigError(f"data.{key_field}={key_setting}: with several files each key is found beside its file; "
                              f"set data.{key_field}=auto")
        cases: list[Case] = []
        key: dict[str, Any] = {}
        registers: dict[str, str] = {}
        for path in paths:
            if path.endswith(".jsonl"):
                these = load_question_pairs(path)
                registers.update({c.case_id: "consumer" for c in these})
            else:
                these = load_cases(path)
                key_path = resolve_key(path, key_setting)
                if key_path is not None:
                    their_key = load_key(key_path)
                    check_key(their_key, these, key_path)
                    key.update(their_key)
            seen = {c.case_id for c in cases}
            repeated = sorted(c.case_id for c in these if c.case_id in seen)
            if repeated:
                raise ArchEHRDataError(f"{path}: case ids {repeated[:3]} are in another data.{key_field[:-4]} file too")
            cases += these
        return Inputs(cases, references={"key": key or None, "key_path": None, "registers": registers},
                      files={f"cases_{i}": p for i, p in enumerate(paths)})

    def item_id(self, item: Case) -> str:
        return item.case_id

    def record_id(self, record: dict[str, Any]) -> str:
        return str(record["case_id"])

    # what the submissions and scores are made of (answer None: a case without a note, Subtask 1 only)
    record_fields = ("case_id", "clinician_question", "evidence_ids", "answer", "alignment")

    def record_problem(self, record: dict[str, Any]) -> str | None:
        return super().record_problem(record) or record_problem(record)

    def fingerprint_extra(self, cfg: DictConfig) -> dict[str, Any]:
        """Plain rows: the settings that split and cut the notes change the numbered sentences, not the file."""
        if not is_plain(cfg.data.cases):
            return {}
        return {"plain": plain_fingerprint(cfg.data.get("plain") or {})}

    # --- the program --------------------------------------------------------------------------------------------
    def stage_nodes(self, cfg: DictConfig) -> dict[str, DictConfig]:
        """Each stage's implementation node (`program.<stage>`, chosen by program/archehr/<stage>=<option>)."""
        missing = [stage for stage in self.roles if not (cfg.program.get(stage) or {}).get("_target_")]
        if missing:
            raise ConfigError(f"program={cfg.program.name}: no implementation chosen for {missing}; choose one with "
                              + ", ".join(f"{self.stage_group}/{s}=<{'|'.join(options(f'{self.stage_group}/{s}'))}>"
                                          for s in missing))
        return {stage: cfg.program[stage] for stage in self.roles}

    def stage_choices(self, cfg: DictConfig) -> dict[str, str]:
        """{stage: the option of program/archehr/<stage> the run chose} (the class name in a hand-written config)."""
        return {stage: chosen_name(cfg, f"{self.stage_group}/{stage}", node)
                for stage, node in self.stage_nodes(cfg).items()}

    def lm_roles(self, cfg: DictConfig) -> list[str]:
        roles = [stage for stage, node in self.stage_nodes(cfg).items() if uses_lm(get_class(node._target_))]
        grounding = cfg.program.get("grounding") or {}
        if grounding.get("_target_") and grounding.get("judge") == "lm":
            roles.append("grounding")  # the LM judge of the grounding check
        return roles

    def no_lm_stages(self, cfg: DictConfig) -> list[str]:
        """The stages that run without an LM (every one, in the default run)."""
        return [stage for stage in self.roles if stage not in self.lm_roles(cfg)]

    def build(self, cfg: DictConfig, role_lms: dict[str, dspy.LM] | None, **resources: Any) -> dspy.Module:
        p = cfg.program
        # ONE embedder for every stage, loaded on first use; a caller's (a test's, a benchmark's) is used as it is
        shared = Resources(embedder=resources.get("embedder") or instantiate(p.embedder),
                           role_lms=dict(role_lms or {}))

        def stage(node: DictConfig, where: str, group: str) -> Any:
            hint = f"choose another implementation with {group}=<{'|'.join(options(group))}> (conf/{group}/)"
            built = shared.complete(instantiate(node, _convert_="all"), where, hint)
            protocol = STAGE_PROTOCOLS.get(where.rsplit(".", 1)[-1])
            missing = missing_members(built, protocol) if protocol is not None else []
            if missing:
                raise ConfigError(f"{where}: {type(built).__name__} does not implement the {protocol.__name__} protocol "
                                  f"(programs/archehr/stages.py): no {', '.join(missing)}")
            return built

        stages = {name: stage(node, f"program.{name}", f"{self.stage_group}/{name}")
                  for name, node in self.stage_nodes(cfg).items()}
        lm_stages = [name for name in self.roles if uses_lm(stages[name])]
        fallback_nodes = p.get("fallback") or {}
        fallbacks = {name: stage(fallback_nodes[name], f"program.fallback.{name}", f"{self.stage_group}/{name}")
                     for name in lm_stages if name in fallback_nodes}
        grounding = None
        if (p.get("grounding") or {}).get("_target_"):
            answer = stages["answer"]  # a dropped sentence re-applies the answer stage's own soft cut
            grounding = shared.complete(instantiate(p.grounding, _convert_="all"), "program.grounding",
                                        max_words=answer.max_words, soft_cut_ratio=answer.soft_cut_ratio)
        program = shared.complete(instantiate_node(p.get("module"), "program.module"), "program.module",
                                  no_lm_fallbacks=fallbacks, grounding=grounding, **stages)
        return load_program_state(program, cfg)

    def predict(self, program: dspy.Module, item: Case) -> ArchEHRRecord:
        start = time.perf_counter()
        pred = program(case=item)
        return record_of(pred, time.perf_counter() - start)

    # --- outputs ------------------------------------------------------------------------------------------------
    def write_submission(self, records: list[dict[str, Any]], out: Path) -> list[Path]:
        return list(write_submissions(records, out).values())

    def write_readable(self, cfg: DictConfig, inputs: Inputs[Case], records: list[dict[str, Any]],
                       out: Path) -> list[Path]:
        """answers.md; a run of plain rows also writes the numbered notes it used (numbered_cases.xml)."""
        cut = inputs.references.get("cut")
        grounding = chosen_name(cfg, "program/archehr/grounding", cfg.program.get("grounding") or {})
        written = [out / "answers.md"]
        write_text(written[0], answers_md.render(cfg.program.name, str(cfg.data.cases), inputs.items, records, cut or {},
                                      grounding))
        if cut is not None:
            max_chars = int((cfg.data.get("plain") or {}).get("max_sentence_chars"))
            written.append(out / "numbered_cases.xml")
            write_text(written[1], cases_xml(inputs.items, cut, str(cfg.data.cases), max_chars))
        return written

    def _metrics_config(self, cfg: DictConfig) -> MetricsConfig:
        return MetricsConfig(bertscore=bertscore_config(cfg.metrics.get("bertscore")))

    def score(self, cfg: DictConfig, inputs: Inputs[Case], records: list[dict[str, Any]]) -> dict[str, Any] | None:
        with_note = [r for r in records if r.get("answer") is not None]
        # Subtask 1 is scored on the cases that give a reference question (a plain file may give some only)
        referenced = {c.case_id for c in inputs.items if c.clinician_question}
        submissions = {
            1: {r["case_id"]: r["clinician_question"] for r in records if r["case_id"] in referenced},
            2: {r["case_id"]: r["evidence_ids"] for r in with_note},
            3: {r["case_id"]: r["answer"] for r in with_note},
            4: {r["case_id"]: r["alignment"] for r in with_note},
        }
        generated = [r["case_id"] for r in records if r.get("alignment_source") == "generated"]
        scores = self._score(cfg, inputs, submissions, generated)
        st1 = (scores or {}).get("subtask_1") or {}
        if referenced and len(referenced) < len(records) and "overall_score" in st1:
            st1["notes"] = [*(st1.get("notes") or []), f"scored on the {len(referenced)} of {len(records)} cases that "
                            "give a clinician_question"]
        return scores

    def score_files(self, cfg: DictConfig, inputs: Inputs[Case], path: str) -> dict[str, Any]:
        folder = Path(path)
        if not folder.is_dir():
            raise ArchEHRDataError(f"data.submissions={folder}: not a folder holding {SUBMISSION_FILES[1]} ... "
                                   f"{SUBMISSION_FILES[4]}")
        submissions: dict[int, Any] = {}
        invalid: dict[int, str] = {}
        for st, name in SUBMISSION_FILES.items():
            try:  # like the official scripts: an invalid file fails its own subtask only
                submissions[st] = read_submission(folder / name, st)
            except ArchEHRDataError as exc:
                invalid[st] = str(exc)
        submitted = {cid for sub in submissions.values() for cid in sub}
        case_ids = [c.case_id for c in inputs.items]
        only_submitted = bool(cfg.data.get("score_only_submitted"))
        cov = coverage(case_ids, sorted(submitted), only_submitted)
        error = foreign(cov, folder, "case", "cases", cfg.data.cases, min(submitted, default=""), case_ids[0])
        if error:
            raise ArchEHRDataError(error)
        if only_submitted:
            inputs = self.subset(inputs, submitted)
        scores = self._score(cfg, inputs, submissions, [], invalid)
        if scores is not None:
            scores["coverage"] = {**cov, "scored": len(inputs.items)}
        return scores

    @staticmethod
    def subset(inputs: Inputs[Case], ids: set[str]) -> Inputs[Case]:
        """The cases (and their key) whose ids are in `ids`, in file order."""
        cases = [c for c in inputs.items if c.case_id in ids]
        key = inputs.references.get("key")
        refs = {**inputs.references, "key": {i: k for i, k in key.items() if i in ids} if key is not None else None}
        return Inputs(cases, references=refs, files=inputs.files)

    def _score(self, cfg: DictConfig, inputs: Inputs[Case], submissions: dict[int, Any], generated: list[str],
               invalid: dict[int, str] | None = None) -> dict[str, Any] | None:
        cases, key = inputs.items, inputs.references["key"]
        if key is None and not any(c.clinician_question for c in cases):
            return None
        mcfg = self._metrics_config(cfg)
        invalid = dict(invalid or {})
        scores: dict[str, Any] = {}

        def attempt(st: int, fn) -> None:
            if st in invalid:
                scores[f"subtask_{st}"] = {"invalid": invalid[st]}
                return
            try:
                scores[f"subtask_{st}"] = fn()
            except SubmissionError as exc:  # missing / extra cases: the official script rejects this subtask only
                scores[f"subtask_{st}"] = {"invalid": str(exc)}

        if any(c.clinician_question for c in cases):
            attempt(1, lambda: score_subtask1(submissions[1], cases, mcfg))
        else:
            scores["subtask_1"] = {"unavailable": "the cases file has no <clinician_question> references"}
        if key is not None:
            attempt(2, lambda: score_subtask2(submissions[2], key))
            attempt(3, lambda: score_subtask3(submissions[3], key, cases, mcfg))
            if not all(kc.answer_sentences for kc in key.values()):
                scores["subtask_4"] = {"unavailable": "the key has no clinician_answer_sentences with citations"}
            elif generated:
                scores["subtask_4"] = {"unavailable": f"cases {generated} aligned generated answer sentences; "
                                       "Subtask 4 aligns the reference <answer_sentences>, which the cases file must "
                                       "provide"}
            else:
                attempt(4, lambda: score_subtask4(submissions[4], key))
        else:
            for st in (2, 3, 4):
                scores[f"subtask_{st}"] = {"unavailable": "no key for these cases (data.key)"}
        bs = cfg.metrics.get("bertscore")
        scores["bertscore_model"] = {"model_type": bs.model_type, "num_layers": bs.num_layers,
                                     "rescaled": bs.rescale_with_baseline, "official": bs.official} if bs else None
        scores["key"] = inputs.references.get("key_path")
        said = caveat(inputs.files.get("cases", ""), cfg.paths.data) if cfg.program.get("compiled") else None
        if said:  # a bundled file the shipped state was tuned on: the printed scores say so
            scores["caveat"] = said
        vals = [s["overall_score"] for s in scores.values()
                if isinstance(s, dict) and s.get("overall_score") is not None]
        scores["objective"] = sum(vals) / len(vals) if vals else None  # the mean of the subtask overall scores
        return scores

    def print_scores(self, scores: dict[str, Any]) -> None:
        print_scores(scores)

    def usage(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        # outputs whose leaked markup was stripped, per stage and in total (records written before: none)
        return {**usage_summary(records, self.roles), "repairs": repairs_summary(records)}

    def report(self, cfg: DictConfig, usage: dict[str, Any], scores: dict[str, Any] | None) -> str:
        return report_markdown(cfg, usage, scores)

    def report_html(self, cfg: DictConfig, inputs: Inputs[Case], records: list[dict[str, Any]],
                    usage: dict[str, Any], scores: dict[str, Any] | None) -> str:
        return report_html.render(cfg, inputs.items, inputs.references["key"], records, usage, scores)

    # --- compiling ----------------------------------------------------------------------------------------------
    def examples(self, cfg: DictConfig, split: str) -> list[dspy.Example]:
        """Cases as DSPy examples: the case is the input; the key and the reference question are for the metric."""
        inputs = self.load(cfg, split)
        key = inputs.references["key"] or {}
        registers = inputs.references.get("registers") or {}
        return [dspy.Example(case=c, key=key.get(c.case_id), clinician_question=c.clinician_question,
                             register=registers.get(c.case_id, "clinician")).with_inputs("case")
                for c in inputs.items]

    def feedback(self, gold: dspy.Example, pred: Any, value: float) -> str:
        return objectives_module.describe_archehr(gold, pred, value)

    # --- serving (task=serve) -----------------------------------------------------------------------------------
    serve_verb = "answer"

    def serve_schemas(self) -> tuple[type[BaseModel], type[BaseModel]]:
        return ArchEHRRequest, ArchEHRResponse

    def serve_item(self, request: BaseModel) -> Case:
        """One case: the official XML of one `<case>` in `xml`, or the narrative, question phrases and sentences."""
        if request.xml is not None or request.xml_base64 is not None:
            field = "xml" if request.xml is not None else "xml_base64"
            try:
                cases = cases_from_xml(request.xml if request.xml is not None else decode_xml(_base64(request.xml_base64)))
            except ClinprogError as exc:
                raise ArchEHRDataError(f"{field}: {exc}") from None
            if len(cases) != 1:
                raise ArchEHRDataError(f"xml: one <case> per request, not {len(cases)}")
            return cases[0]
        sentences = tuple(NoteSentence(x.id, x.text) for x in request.sentences)
        if request.note is not None:
            sentences = tuple(NoteSentence(str(n), t) for n, t in enumerate(split_note(request.note), 1))
        return Case(request.case_id, request.patient_narrative or "", tuple(request.patient_question),
                    request.clinician_question, None, sentences)

    def serve_page(self) -> tuple[str, str]:
        return FORM, SCRIPT

    def serve_echo(self, item: Case) -> dict[str, Any]:
        return {"sentences": [{"id": s.id, "text": s.text} for s in item.sentences]}

    def serve_response(self, record: dict[str, Any], lm_failure: str | None, seconds: float) -> dict[str, Any]:
        keys = ("case_id", "clinician_question", "question_candidates", "evidence_ids", "scores", "selection", "answer",
                "answer_sentences", "alignment", "grounding", "fallbacks", "usage")
        return {**{k: record.get(k) for k in keys}, "lm_failure": lm_failure, "seconds": seconds}


def _base64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error as exc:
        raise ArchEHRDataError(f"not base64 ({exc}); send the file's bytes base64-encoded") from None
