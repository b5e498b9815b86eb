"""Check data/archehr/dev_cases.xml against dev_cases_key.json (standard library only).

Usage: python3 data/archehr/check_dev_cases.py [cases.xml key.json]
"""

from __future__ import annotations

import json
import re
import statistics
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
HEADER = re.compile(r"[A-Z0-9 ,/&()-]+:")
LABELS = ("essential", "supplementary", "not-relevant")


def text(e: ET.Element | None) -> str:
    return "".join(e.itertext()).strip() if e is not None else ""


def check_case(c: ET.Element, k: dict) -> tuple[int, float]:
    cid = c.get("id")
    narrative = text(c.find("patient_narrative"))
    for p in c.findall("patient_question/phrase"):
        i = int(p.get("start_char_index", "-1"))
        assert narrative[i : i + len(text(p))] == text(p), (cid, "phrase offset", p.get("id"))
    assert len(text(c.find("clinician_question")).split()) <= 15, (cid, "clinician question > 15 words")
    note, sents = text(c.find("note_excerpt")), c.findall("note_excerpt_sentences/sentence")
    assert note == " ".join(text(s) for s in sents), (cid, "note_excerpt != sentences joined by spaces")
    for s in sents:
        i = int(s.get("start_char_index", "-1"))
        assert note[i : i + len(text(s))] == text(s), (cid, "sentence offset", s.get("id"))
    ids = [s.get("id") for s in sents]
    labels = [(a["sentence_id"], a["relevance"]) for a in k["answers"]]
    assert sorted(i for i, _ in labels) == sorted(ids) and len(set(ids)) == len(ids), (cid, "labels != sentence ids")
    rel = dict(labels)
    assert set(rel.values()) <= set(LABELS) and "essential" in rel.values(), (cid, "bad labels")
    for s in sents:
        assert not HEADER.fullmatch(text(s)) or rel[s.get("id")] == "not-relevant", (cid, "header labelled", s.get("id"))
    ans = k["clinician_answer_sentences"]
    assert 2 <= len(ans) <= 5, (cid, "answer sentence count")
    xml_answer = [(a.get("id"), text(a)) for a in c.findall("answer_sentences/sentence")]
    assert xml_answer == [(a["id"], a["text"]) for a in ans], (cid, "<answer_sentences> != clinician_answer_sentences")
    cited: set[str] = set()
    for a in ans:
        assert 1 <= len(a["citations"]) <= 3, (cid, "citation count", a["id"])
        for sid in a["citations"]:
            assert rel.get(sid) in ("essential", "supplementary"), (cid, "bad citation", sid)
            cited.add(sid)
    assert {i for i, r in rel.items() if r == "essential"} <= cited, (cid, "essential sentence not cited")
    plain = " ".join(a["text"] for a in ans)
    assert k["clinician_answer_without_citations"] == plain, (cid, "answer without citations")
    assert re.sub(r" \|[\d,]+\|", "", k["clinician_answer"]) == plain, (cid, "answer with citations")
    assert len(plain.split()) <= 75, (cid, "answer > 75 words", len(plain.split()))
    return len(sents), sum(r == "essential" for r in rel.values()) / len(sents)


def main(xml_path: Path, key_path: Path) -> None:
    cases = {c.get("id"): c for c in ET.parse(xml_path).getroot().findall("case")}
    keys = {k["case_id"]: k for k in json.loads(key_path.read_text(encoding="utf-8"))}
    assert set(cases) == set(keys), ("case ids differ", set(cases) ^ set(keys))
    total: Counter[str] = Counter()
    sizes, shares = [], []
    print(f"{'case':>6} {'sents':>5} {'ess':>4} {'supp':>4} {'share':>6} {'words':>5}")
    for cid in sorted(cases, key=int):
        n, share = check_case(cases[cid], keys[cid])
        cnt = Counter(a["relevance"] for a in keys[cid]["answers"])
        total.update(cnt)
        sizes.append(n)
        shares.append(share)
        words = len(keys[cid]["clinician_answer_without_citations"].split())
        print(f"{cid:>6} {n:>5} {cnt['essential']:>4} {cnt['supplementary']:>4} {share:>6.0%} {words:>5}")
    n_all = sum(total.values())
    print(f"\n{len(cases)} cases, {n_all} note sentences; per case {min(sizes)}-{max(sizes)} (median {statistics.median(sizes)})")
    buckets = ((1, 12), (13, 30), (31, 39), (40, 60), (61, 999))
    print("size buckets: " + ", ".join(f"{lo}-{hi}: {sum(lo <= s <= hi for s in sizes)}" for lo, hi in buckets))
    print(f"essential share per case {min(shares):.0%}-{max(shares):.0%} (median {statistics.median(shares):.0%})")
    print("labels: " + ", ".join(f"{lab} {total[lab]} ({total[lab] / n_all:.0%})" for lab in LABELS))
    print("OK")


if __name__ == "__main__":
    args = [Path(a) for a in sys.argv[1:3]]
    main(*(args if len(args) == 2 else (HERE / "dev_cases.xml", HERE / "dev_cases_key.json")))
