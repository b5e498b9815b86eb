"""What a message gets is a function of the message, the config and the compiled state only: not of what the process
ran before. The question stage after other messages, the embedder's vectors beside other texts, a whole run in the
given order and reversed, and repeated requests to the served app, each compared bit for bit."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from fastapi.testclient import TestClient

from tasks.archehr.data import load_cases
from tests.builders import archehr_stage, config, shared_embedder
from tests.cli import dispatch_run
from tests.conftest import ROOT

pytestmark = pytest.mark.unit

CASES = ROOT / "data" / "archehr" / "realistic_cases_b.xml"
N_CASES = 3


def candidates(stage, narrative: str) -> list[tuple[str, float, bool]]:
    message = stage.prepare(narrative)
    return stage.candidates(message, stage.choose_register(message))


def test_the_question_stage_gives_a_message_the_same_candidates_whatever_it_decoded_before():
    from lms.gguf_causal_lm import _DECODERS

    stage = archehr_stage("question", "finetuned")
    narratives = [c.patient_narrative for c in load_cases(ROOT / "data" / "archehr" / "dev_cases.xml")][:3]
    for decoder in _DECODERS.values():  # as in a new process: the first message meets an empty cache
        decoder.close()
    first = [candidates(stage, n) for n in narratives]
    # a much longer message in between (a larger cache, other cells), then the messages in reverse order: each one
    # after another message than the first time (the first one after the long one)
    candidates(stage, " ".join(narratives) * 2)
    reverse = [candidates(stage, n) for n in reversed(narratives)][::-1]
    assert reverse == first  # texts and log-probabilities, exactly


def test_every_product_of_the_embedder_runs_on_one_torch_thread_whatever_its_threads_setting():
    # the mechanism behind the test above, checkable on any CPU (the summation order a product split over threads
    # takes differs by kernel: an AVX2 machine can agree on 1 and 2 threads where an AVX-512 one does not)
    import threading

    import torch

    embedder = shared_embedder()
    model = embedder._load()
    seen: list[tuple[int, int]] = []
    forward = model.forward

    def spying(features, *args, **kwargs):
        seen.append((torch.get_num_threads(), threading.get_ident()))
        return forward(features, *args, **kwargs)

    texts = [s.text for s in load_cases(CASES)[4].sentences]
    model.forward = spying
    try:
        embedder.threads = 2
        embedder._vectors(model, texts)
    finally:
        model.forward, embedder.threads = forward, "auto"
    assert seen and {n for n, _ in seen} == {1}
    assert len({ident for _, ident in seen}) == 2  # the step's 2 threads took batches


def test_a_text_gets_the_same_vector_alone_in_any_batch_and_after_the_cache_held_it():
    embedder = shared_embedder()
    texts = [s.text for c in load_cases(CASES)[:2] for s in c.sentences][:24]
    others = ["A much longer sentence about something else entirely, to pad a batch out to another length " * 3,
              "Short."]
    alone = np.stack([embedder._vectors(embedder._load(), [t])[0] for t in texts])
    batched = embedder._vectors(embedder._load(), others + texts)[len(others):]
    assert np.array_equal(alone, batched)
    assert np.array_equal(embedder.encode_documents(texts), alone)  # the cache keeps the text's own vector


def reversed_copy(path, out, n: int):
    tree = ET.parse(path)
    root = tree.getroot()
    cases = list(root)[:n]
    for case in list(root):
        root.remove(case)
    for case in reversed(cases):
        root.append(case)
    tree.write(out, encoding="utf-8")
    return out


def submissions(folder) -> dict[str, list]:
    out = {}
    for task in (1, 2, 3, 4):
        records = json.loads((folder / f"submission_subtask_{task}.json").read_text())
        out[task] = sorted(records, key=lambda r: str(r.get("case_id")))
    return out


def test_a_run_in_reverse_order_and_a_resumed_run_write_the_same_submissions(tmp_path):
    forward, resumed = tmp_path / "forward", tmp_path / "resumed"
    # the question stage decodes every message in each run (its cache would hand the resumed run the forward run's
    # candidates: tests/test_question_stage.py checks that a hit equals a decode)
    common = ("program=archehr", "task=run", "program.question.cache=false")
    assert dispatch_run(*common, f"data.cases={CASES}", f"data.limit={N_CASES}", f"hydra.run.dir={forward}",
                        quiet=True).returncode == 0
    # the same cases in reverse order, in a run cut short after 1 case and resumed in a new run state: every case
    # comes after other ones than in the forward run (the last first, then the others reversed after a restart; a
    # separate uncut reverse run would repeat these same orders)
    reverse = reversed_copy(CASES, tmp_path / "reversed.xml", N_CASES)
    for limit in (1, N_CASES):
        assert dispatch_run(*common, f"data.cases={reverse}", f"data.limit={limit}", f"hydra.run.dir={resumed}",
                            quiet=True).returncode == 0
    expected = submissions(forward)
    assert len(expected[1]) == N_CASES
    records = [json.loads(line)["case_id"] for line in (resumed / "predictions.jsonl").read_text().splitlines()]
    assert records == [c.case_id for c in load_cases(CASES)[:N_CASES]][::-1]  # run in reverse order
    assert submissions(resumed) == expected


def test_repeated_identical_requests_get_identical_responses(monkeypatch):
    from runners.serve import build_app

    monkeypatch.delenv("CLINPROG_SERVE_TOKEN", raising=False)
    overrides = ["task=serve", "program=archehr", "program.question.cache=false"]  # each request decodes its message
    app, _ = build_app(config(*overrides), overrides)
    case = load_cases(CASES)[0]
    body = {"case_id": "r", "patient_narrative": case.patient_narrative,
            "sentences": [{"id": s.id, "text": s.text} for s in case.sentences]}
    other = {**body, "patient_narrative": load_cases(CASES)[1].patient_narrative}
    with TestClient(app, base_url="http://127.0.0.1") as client:  # the Host a token-less loopback server answers
        answers = []
        for request in (body, other, body, other):  # each message again after the other one
            r = client.post("/v1/archehr/answer", json=request)
            assert r.status_code == 200, r.text
            answers.append({k: v for k, v in r.json().items() if k not in ("usage", "seconds")})
    assert answers[0] == answers[2] and answers[1] == answers[3] and answers[0] != answers[1]


def test_each_instruction_restores_its_own_frame_and_a_register_in_between_changes_nothing():
    from lms.gguf_causal_lm import _DECODERS

    stage = archehr_stage("question", "finetuned")
    message = stage.prepare("My father had a stent put in last week. Why does he need two blood thinners now?")
    first = stage.candidates(message, "clinician")  # the clinician frame read (or restored)
    consumer = stage.candidates(message, "consumer")  # another instruction: another frame
    assert stage.candidates(message, "clinician") == first and consumer != first
    assert stage.candidates(message, "consumer") == consumer
    assert any(len(decoder._prefixes) >= 2 for decoder in _DECODERS.values())
