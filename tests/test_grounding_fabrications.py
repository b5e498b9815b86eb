"""`benchmarks/grounding_eval.py --fabrications FILE` (issue #28 item 15): a fabrication set written by someone else is
checked (one `error:` line, exit 2) and scored with the script's table (tasks/archehr/fabrications.py); the numbers
here are worked out by hand on a tiny made-up set and a stub check."""

import json
import random
import subprocess
import sys
from types import SimpleNamespace

import pytest

from tasks.archehr import fabrications as ge
from tasks.archehr.data import Case, KeyCase, NoteSentence

pytestmark = pytest.mark.unit


def case(case_id, *texts):
    return Case(case_id, "narrative", sentences=tuple(NoteSentence(str(i), t) for i, t in enumerate(texts, 1)))


CASES = [case("c1", "Left knee effusion.", "Aspirin 81 mg daily."),
         case("c2", "No fever.", "Right hip pain resolved."),
         case("c3", "Discharged home.")]
KEY = {"c1": KeyCase("c1", {"1": "essential", "2": "essential"},
                     answer_sentences=[("1", "The knee on the left is swollen.", ["1"]),
                                       ("2", "She takes aspirin 81 mg.", ["2"])]),
       "c2": KeyCase("c2", {"1": "essential"},
                     answer_sentences=[("1", "She had no fever.", ["1"]), ("2", "The right hip pain went away.", ["2"])]),
       "c3": KeyCase("c3", {"1": "essential"}, answer_sentences=[("1", "She went home.", ["1"])])}
DOC = {"format": "grounding-fabrications/1", "description": "tiny",
       "cases": {"c1": [{"text": "The right knee is swollen.", "citations": ["1"], "kind": "wrong side"},
                        {"text": "She takes aspirin 600 mg.", "citations": ["2"], "kind": "wrong dose",
                         "note": "81 mg"},
                        {"text": "She takes aspirin 81 mg twice.", "citations": ["2"], "kind": "wrong dose"}],
                 "c2": [{"text": "She had a fever.", "citations": ["1", "2"], "kind": "flipped negation"}]}}


def stub_check(seen):
    """Flags a sentence that says 'right' or '600' (so: 2 of the 4 fabrications and one reference sentence)."""
    def check(sentences, alignment, note):
        seen.append((sentences, alignment, note))
        return SimpleNamespace(verdicts=[
            {"answer_id": s["id"], "verdict": "unsupported" if {"right", "600"} & set(s["text"].lower().split())
             else "supported", "reasons": ["terms not in the note: right"]} for s in sentences])
    return check


def test_a_fabrication_file_is_scored_per_kind_with_the_numbers_worked_out_by_hand(tmp_path):
    path = tmp_path / "fab.json"
    path.write_text(json.dumps(DOC))
    fabrications = ge.load_fabrications(path, CASES)
    items = ge.answers(CASES, KEY, random.Random(0), fabrications)
    assert [i.case.case_id for i in items] == ["c1", "c2"]  # only the cases the file names are scored
    seen = []
    s = ge.score(stub_check(seen), items)
    # each answer: the reference sentences in order, the fabrications inserted, each citing its own citations
    c1_sentences, c1_alignment, _ = seen[0]
    assert [x["text"] for x in c1_sentences if not x["id"].startswith("f")] == ["The knee on the left is swollen.",
                                                                                 "She takes aspirin 81 mg."]
    assert {a["answer_id"]: a["evidence_id"] for a in seen[1][1]}["f1"] == ["1", "2"]
    assert {a["answer_id"]: a["evidence_id"] for a in c1_alignment} == {"1": ["1"], "2": ["2"], "f1": ["1"],
                                                                       "f2": ["2"], "f3": ["2"]}
    # flagged: c1 'right knee' (wrong side), 'aspirin 600' (wrong dose) and the reference 'right hip' of c2;
    # missed: 'aspirin 81 mg twice' (wrong dose), 'had a fever' (flipped negation); 4 reference sentences (c1, c2)
    assert (s.tp, s.fp, s.fn, s.negatives) == (2, 1, 2, 4)
    assert s.precision == pytest.approx(2 / 3) and s.recall == 0.5 and s.false_flag_rate == 0.25
    kinds = ge.kinds_of(items)
    assert kinds == ["flipped negation", "wrong dose", "wrong side"]
    assert [s.recall_of(k) for k in kinds] == [0.0, 0.5, 1.0]
    assert [s.precision_of(k) for k in kinds] == [0.0, 0.5, 0.5]  # flagged of the kind / (that + every false flag)
    assert s.missed == [("c1", "wrong dose", "She takes aspirin 81 mg twice."),
                        ("c2", "flipped negation", "She had a fever.")]
    assert s.false_flag_reasons == {"terms not in the note": 1}
    assert ge.table([(0.2, 0.0, s, True)], kinds) == [
        "| min_similarity | min_coverage | flag precision | flag recall | false-flag rate (reference) | recall: flipped "
        "negation | recall: wrong dose | recall: wrong side |",
        "|---|---|---|---|---|---|---|---|",
        "| 0.2 (default) | 0.0 | 0.667 | 0.500 | 0.250 | 0.000 | 0.500 | 1.000 |"]
    assert ge.kind_table(s, kinds) == [
        "| kind | fabricated | flagged | recall | flag precision |", "|---|---|---|---|---|",
        "| flipped negation | 1 | 0 | 0.000 | 0.000 |",
        "| wrong dose | 2 | 1 | 0.500 | 0.500 |",
        "| wrong side | 1 | 1 | 1.000 | 0.500 |",
        "| all | 4 | 2 | 0.500 | 0.667 |"]


def test_without_a_file_the_scripts_own_fabrications_keep_their_kinds():
    items = ge.answers(CASES[:1], KEY, random.Random(0))
    assert sorted(items[0].fabricated.values()) == sorted(ge.BUILTIN_KINDS)  # the note has a number: all three
    cited = {a["answer_id"]: a["evidence_id"] for a in items[0].alignment}
    assert all(cited[f][0] in KEY["c1"].essential for f in items[0].fabricated)


def edited(**changes):
    doc = json.loads(json.dumps(DOC))
    for path, value in changes.items():
        node, *keys = [doc, *path.split("__")]
        for k in keys[:-1]:
            node = node[int(k) if isinstance(node, list) else k]
        last = int(keys[-1]) if isinstance(node, list) else keys[-1]
        if value is DELETE:
            del node[last]
        else:
            node[last] = value
    return doc


DELETE = object()
INVALID = [
    ([], "expected a JSON object"),
    (edited(format=DELETE), 'no "format": the file must say "format": "grounding-fabrications/1"'),
    (edited(format="grounding-fabrications/2"),
     '"format" must be "grounding-fabrications/1", not "grounding-fabrications/2"'),
    (edited(case={}), 'unknown top-level field "case"'),
    (edited(cases=DELETE), 'no "cases"'),
    (edited(cases={}), '"cases" must be a non-empty object'),
    (edited(cases={"c9": DOC["cases"]["c1"]}), 'case "c9" is not one of the 3 loaded cases (c1, c2, c3)'),
    (edited(cases__c1={}), 'cases["c1"] must be a non-empty list of fabrications'),
    (edited(cases__c1=["x"]), 'cases["c1"][0] must be an object'),
    (edited(cases__c1__1__kind=DELETE), 'cases["c1"][1] has no "kind"'),
    (edited(cases__c1__0__citations=DELETE), 'cases["c1"][0] has no "citations"'),
    (edited(cases__c2__0__text=DELETE), 'cases["c2"][0] has no "text"'),
    (edited(cases__c1__0__source="x"), 'cases["c1"][0] has an unknown field "source"'),
    (edited(cases__c1__0__citations=["7"]), 'cases["c1"][0]: citation "7" is not a sentence id of case c1 '
                                            '(its ids: 1, 2)'),
    (edited(cases__c1__0__citations=[1]), 'cases["c1"][0]: citation 1 must be a string'),
    (edited(cases__c1__0__citations=[]), 'cases["c1"][0]: "citations" must be a non-empty list'),
    (edited(cases__c1__0__citations="1"), 'cases["c1"][0]: "citations" must be a non-empty list'),
    (edited(cases__c1__2__text=" "), 'cases["c1"][2]: "text" must be a non-empty string'),
    (edited(cases__c1__2__kind=3), 'cases["c1"][2]: "kind" must be a non-empty string'),
]


@pytest.mark.parametrize(("doc", "message"), INVALID)
def test_a_malformed_fabrication_set_is_refused_with_what_and_where(doc, message):
    with pytest.raises(ge.FabricationsError) as err:
        ge.parse_fabrications(doc, CASES, where="fab.json")
    assert str(err.value).startswith("fab.json: ") and message in str(err.value), str(err.value)


def test_an_unreadable_or_non_json_file_is_one_error(tmp_path):
    with pytest.raises(ge.FabricationsError, match="cannot read the fabrications file"):
        ge.load_fabrications(tmp_path / "missing.json", CASES)
    with pytest.raises(ge.FabricationsError, match="cannot read the fabrications file"):
        ge.load_fabrications(tmp_path, CASES)  # a folder
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ge.FabricationsError, match=r"bad.json: not valid JSON \(Expecting property name"):
        ge.load_fabrications(tmp_path / "bad.json", CASES)


@pytest.mark.parametrize(("content", "message"), [
    (json.dumps({"format": "grounding-fabrications/1", "cases": {"9999": [
        {"text": "x", "citations": ["1"], "kind": "k"}]}}), 'case "9999" is not one of the 37 loaded cases'),
    (json.dumps({"format": "grounding-fabrications/1", "cases": {"1001": [
        {"text": "x", "citations": ["21"], "kind": "k"}]}}), 'citation "21" is not a sentence id of case 1001 '
                                                             '(its ids: 1-20)'),
    ("[1, 2", "not valid JSON"),
])
def test_the_command_prints_one_error_line_and_exits_2(tmp_path, content, message):
    """Against the script's default cases, before any model is loaded (the script run as a user runs it)."""
    path = tmp_path / "fab.json"
    path.write_text(content)
    done = subprocess.run([sys.executable, str(ge.DATA.parents[1] / "benchmarks" / "grounding_eval.py"),
                           "--fabrications", str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    err = done.stderr
    assert err.count("\n") == 1 and err.startswith(f"error: {path}: ") and message in err, err
    assert "Traceback" not in err


def test_the_subtle_set_in_the_repository_is_valid():
    """benchmarks/fabrications_subtle.json: six kinds, at least 5 of each, on the cases the script loads."""
    cases, _ = ge.load([str(ge.DATA / "dev_cases.xml"), str(ge.DATA / "bundled_cases.xml")],
                       [str(ge.DATA / "dev_cases_key.json"), str(ge.DATA / "bundled_cases_key.json")])
    fabrications = ge.load_fabrications(ge.DATA.parents[1] / "benchmarks" / "fabrications_subtle.json", cases)
    kinds = [f.kind for entries in fabrications.values() for f in entries]
    assert {k: kinds.count(k) >= 5 for k in set(kinds)} == dict.fromkeys(
        ["flipped negation", "reversed trend", "wrong dose", "wrong side", "invented reason", "wrong order"], True)
