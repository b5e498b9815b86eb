"""Load ArchEHR-QA cases (official XML) and keys (official `archehr-qa_key.json`).

Ids stay strings as given (dev notes number sentences from 0 or from 1); every element text is stripped."""

from __future__ import annotations

import codecs
import json
import logging
import re
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from common import json_input
from common.errors import ClinprogError
from common.logs import printable
from common.unicode_text import require_unicode

RELEVANCE_LABELS = ("essential", "supplementary", "not-relevant")
log = logging.getLogger(__name__)


class ArchEHRDataError(ClinprogError, ValueError):
    """Malformed ArchEHR-QA input; the message names the file, the case and the element."""


@dataclass(frozen=True)
class NoteSentence:
    id: str
    text: str
    paragraph_id: str | None = None


@dataclass(frozen=True)
class AnswerSentence:
    id: str
    text: str


@dataclass(frozen=True)
class Case:
    case_id: str
    patient_narrative: str
    patient_question_phrases: tuple[str, ...] = ()
    clinician_question: str | None = None
    note_excerpt: str | None = None
    sentences: tuple[NoteSentence, ...] = ()
    answer_sentences: tuple[AnswerSentence, ...] = ()

    @property
    def sentence_ids(self) -> list[str]:
        return [s.id for s in self.sentences]

    @property
    def note_text(self) -> str:
        return self.note_excerpt or " ".join(s.text for s in self.sentences)


@dataclass
class KeyCase:
    case_id: str
    relevance: dict[str, str] = field(default_factory=dict)
    answer_without_citations: str | None = None
    answer_sentences: list[tuple[str, str, list[str]]] = field(default_factory=list)

    @property
    def essential(self) -> set[str]:
        return {sid for sid, rel in self.relevance.items() if rel == "essential"}

    @property
    def supplementary(self) -> set[str]:
        return {sid for sid, rel in self.relevance.items() if rel == "supplementary"}


def _text(elem: ET.Element | None) -> str:
    return "".join(elem.itertext()).strip() if elem is not None else ""


def _parse_case(elem: ET.Element, where: str) -> Case:
    case_id = (elem.get("id") or "").strip()
    if not case_id:
        raise ArchEHRDataError(f"{where}: <case> without an id attribute")
    ctx = f"{where}, case {case_id}"
    narrative = _text(elem.find("patient_narrative"))
    if not narrative:
        raise ArchEHRDataError(f"{ctx}: missing or empty <patient_narrative>")
    phrases = tuple(_text(p) for p in elem.findall("patient_question/phrase") if _text(p))
    clinician = _text(elem.find("clinician_question")) or None
    note = _text(elem.find("note_excerpt")) or None

    sentences: list[NoteSentence] = []
    seen: set[str] = set()
    for s in elem.findall("note_excerpt_sentences/sentence"):
        sid = (s.get("id") or "").strip()
        if not sid:
            raise ArchEHRDataError(f"{ctx}: <note_excerpt_sentences>/<sentence> without an id attribute")
        if sid in seen:
            raise ArchEHRDataError(f"{ctx}: duplicate note sentence id {sid!r}")
        seen.add(sid)
        sentences.append(NoteSentence(sid, _text(s), s.get("paragraph_id")))

    answers: list[AnswerSentence] = []
    for s in elem.findall("answer_sentences/sentence"):
        aid = (s.get("id") or "").strip()
        if not aid:
            raise ArchEHRDataError(f"{ctx}: <answer_sentences>/<sentence> without an id attribute")
        answers.append(AnswerSentence(aid, _text(s)))
    if note and not sentences:
        log.warning("%s: <note_excerpt> has text but no <note_excerpt_sentences>/<sentence> elements: the case runs "
                    "stage 1 only (evidence ids need sentence elements)", printable(ctx, limit=None))
    return Case(case_id, narrative, phrases, clinician, note, tuple(sentences), tuple(answers))


def load_cases(path: str | Path) -> list[Case]:
    path = Path(path)
    if path.is_dir():
        raise ArchEHRDataError(f"{path}: a folder, not a cases file (name the XML file itself)")
    if path.exists() and not path.is_file():
        raise ArchEHRDataError(f"{path}: not a regular file (a FIFO, socket or device); name a file saved on disk")
    if not path.is_file():
        where = "" if path.is_absolute() else f" in {Path.cwd()}"  # the bundled cases' path starts at paths.root
        raise ArchEHRDataError(f"{path}: no such file{where} (set data.cases=...; the bundled cases are found from the "
                               "clinprog folder, or with CLINPROG_ROOT set to it)")
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        hint = "" if path.suffix.lower() == ".xml" else \
            f"; a {path.suffix or 'suffix-less'} file is read as XML: cases are .xml, or plain rows .jsonl or .csv"
        raise ArchEHRDataError(f"{path}: malformed XML ({exc}){hint}") from None
    return _cases(root, path)


_DECLARED = re.compile(rb"\s*<\?xml[^>]*?encoding\s*=\s*[\"']([A-Za-z][A-Za-z0-9._-]*)[\"']")


def decode_xml(data: bytes, where: str = "request") -> str:
    """`data` decoded as the XML parser decodes `data.cases` (a byte order mark, else the declared encoding, else
    UTF-8), so an upload reads as the same file does on the command line; undecodable bytes are one error line."""
    declared = _DECLARED.match(data[:300])
    boms = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
    encoding = next((codec for bom, codec in boms if data.startswith(bom)), None) or \
        (declared.group(1).decode("ascii") if declared else "utf-8")
    try:
        return data.decode(encoding)
    except LookupError:
        raise ArchEHRDataError(f"{where}: the XML declares encoding {encoding!r}, which is not one Python reads; save "
                               "the file as UTF-8") from None
    except UnicodeDecodeError as exc:
        fix = "fix its encoding declaration or save it as UTF-8" if declared else \
            "save it as UTF-8, or declare its encoding (<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?>)"
        raise ArchEHRDataError(f"{where}: not {encoding} (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                               f"{fix}") from None


def cases_from_xml(text: str, where: str = "request") -> list[Case]:
    """Cases from XML text (one posted case): the same checks as a file."""
    if "<!DOCTYPE" in text or "<!ENTITY" in text:  # no entity expansion from untrusted input
        raise ArchEHRDataError(f"{where}: DOCTYPE/ENTITY declarations are not accepted")
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ArchEHRDataError(f"{where}: malformed XML ({exc})") from None
    return _cases(root, where)


def _cases(root: ET.Element, path: str | Path) -> list[Case]:
    if root.tag != "annotations":
        raise ArchEHRDataError(f"{path}: root element is <{root.tag}>, expected <annotations>")
    cases = [_parse_case(e, str(path)) for e in root.findall("case")]
    if not cases:
        raise ArchEHRDataError(f"{path}: no <case> elements")
    counts = Counter(c.case_id for c in cases)  # one pass: 30,000 posted cases took 17 s with a count per id
    dupes = sorted(i for i, n in counts.items() if n > 1)
    if dupes:
        raise ArchEHRDataError(f"{path}: duplicate case ids {dupes}")
    return cases


def _citations(value: object, ctx: str) -> list[str]:
    if isinstance(value, str):  # some releases/participants use "1, 5"
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, list) and all(isinstance(v, (str, int)) for v in value):
        return [str(v).strip() for v in value]
    raise ArchEHRDataError(f"{ctx}: 'citations' must be a list of sentence ids")


def resolve_key(cases_path: str | Path, key: str | None) -> Path | None:
    """The key of `cases_path`: `auto` is `<stem>_key.json` beside it when that file exists; None/"null"/"none" is
    no key; anything else is a path."""
    if key is None or str(key).lower() in ("null", "none", ""):
        return None
    if str(key) == "auto":
        sibling = Path(cases_path).with_name(Path(cases_path).stem + "_key.json")
        return sibling if sibling.is_file() else None
    return Path(key)


def load_key(path: str | Path) -> dict[str, KeyCase]:
    path = Path(path)
    if not path.is_file():
        raise ArchEHRDataError(f"{path}: no such file (set data.key=...)")
    try:
        raw = json_input.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ArchEHRDataError(f"{path}: not UTF-8 (byte {exc.start}); save the key as UTF-8") from None
    except json.JSONDecodeError as exc:
        raise ArchEHRDataError(f"{path}: malformed JSON ({exc})") from None
    if not isinstance(raw, list):
        raise ArchEHRDataError(f"{path}: expected a JSON array of cases")
    key: dict[str, KeyCase] = {}
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or "case_id" not in item:
            raise ArchEHRDataError(f"{path}: entry {i} has no 'case_id'")
        cid = str(item["case_id"])
        ctx = f"{path}, entry {i} (case {cid})"
        if cid in key:
            raise ArchEHRDataError(f"{ctx}: duplicate case_id {cid!r}")
        kc = KeyCase(cid)
        answers = item.get("answers", [])
        if not isinstance(answers, list):
            raise ArchEHRDataError(f"{ctx}: 'answers' must be a list of {{sentence_id, relevance}} objects")
        for ans in answers:
            if not isinstance(ans, dict) or "sentence_id" not in ans or ans.get("relevance") not in RELEVANCE_LABELS:
                raise ArchEHRDataError(f"{ctx}: bad 'answers' entry {ans!r} (an object with sentence_id and a "
                                       f"relevance in {RELEVANCE_LABELS})"[:400])
            sid = str(ans["sentence_id"])
            if sid in kc.relevance:
                raise ArchEHRDataError(f"{ctx}: sentence {sid!r} labelled twice")
            kc.relevance[sid] = ans["relevance"]
        text = item.get("clinician_answer_without_citations")
        kc.answer_without_citations = text.strip() if isinstance(text, str) else None
        sentences = item.get("clinician_answer_sentences", []) or []
        if not isinstance(sentences, list):
            raise ArchEHRDataError(f"{ctx}: 'clinician_answer_sentences' must be a list")
        for s in sentences:
            if not isinstance(s, dict) or "id" not in s or "text" not in s:
                raise ArchEHRDataError(f"{ctx}: 'clinician_answer_sentences' entry without id/text")
            kc.answer_sentences.append((str(s["id"]), str(s["text"]).strip(), _citations(s.get("citations", []), ctx)))
        key[cid] = kc
    return key


def check_key(key: dict[str, KeyCase], cases: list[Case], path: str | Path) -> None:
    """The key must have the case ids of the cases with a note, and only sentence ids of that case's note."""
    by_id = {c.case_id: c for c in cases}
    with_note = {c.case_id for c in cases if c.sentences}
    extra = sorted(set(key) - set(by_id))
    missing = sorted(with_note - set(key))
    if extra or missing:
        raise ArchEHRDataError(
            f"{path}: the key does not belong to the cases: "
            + "; ".join(p for p in (f"case ids {extra} are not in the cases file" if extra else "",
                                    f"cases {missing} have no key entry" if missing else "") if p)
            + " (pass the key of these cases with data.key=..., or data.key=null to run without scores)")
    for cid, kc in key.items():
        ids = set(by_id[cid].sentence_ids)
        unknown = sorted(set(kc.relevance) - ids)
        cited = sorted({c for _, _, cs in kc.answer_sentences for c in cs} - ids)
        if unknown or cited:
            raise ArchEHRDataError(f"{path}, case {cid}: sentence ids {unknown or cited} are not in that case's note "
                                   f"(its ids: {sorted(ids, key=_id_order)[:8]}...)")


def _id_order(sid: str) -> tuple[int, str]:
    return (int(sid), "") if sid.isdigit() else (1 << 30, sid)


def load_question_pairs(path: str | Path) -> list[Case]:
    """Question pairs (JSON lines `{id, question, summary}`: MeQSum, MEDIQA-QS) as note-less cases: the question is
    the narrative, the summary the reference; ids get the file's stem as prefix, so two sets never share one."""
    path = Path(path)
    if path.is_dir():
        raise ArchEHRDataError(f"{path}: a folder, not a file of question pairs (name the .jsonl file itself)")
    if not path.is_file():
        raise ArchEHRDataError(f"{path}: no such file")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:  # never read as replacement characters: the model would learn them
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ArchEHRDataError(f"{path}:{line}: not UTF-8 (byte 0x{raw[exc.start]:02x}); save the file as UTF-8") \
            from None
    cases, ids, pairs, repeats = [], set(), set(), 0
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json_input.loads(line)
            qid, question, summary = str(row["id"]), str(row["question"]), str(row["summary"])
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ArchEHRDataError(f"{path}:{n}: not a {{id, question, summary}} JSON line ({type(exc).__name__}); "
                                   "JSON lines in data.train / data.val are question pairs, which train the question "
                                   "stage only: the other learned parts train on ArchEHR XML cases with a key") from None
        require_unicode((qid, question, summary), f"{path}:{n}")  # a "\ud800" escape: not text a tokenizer takes
        if qid in ids:
            raise ArchEHRDataError(f"{path}:{n}: id {qid[:40]!r} is on an earlier line too (ids must be unique)")
        ids.add(qid)
        pair = (question.strip(), summary.strip())
        if pair in pairs:  # a repeated pair would weigh more in training, unseen
            repeats += 1
            continue
        pairs.add(pair)
        cases.append(Case(f"{path.stem}:{qid}", question, clinician_question=summary))
    if not cases:
        raise ArchEHRDataError(f"{path}: no question pairs")
    if repeats:
        log.warning("%s: %d of %d question pairs repeat an earlier line's question and summary: each is used once",
                    path, repeats, repeats + len(cases))
    return cases
