"""A patient's question about what the care team did, asked the way a clinician asks it: about the decision, in
the passive ("Why did they double it?" -> "Why was it doubled?", "Was the pacemaker really necessary?" -> "Why was
the pacemaker needed?"). The answer is in the note, which records decisions, not who 'they' were."""

from __future__ import annotations

import re

_TEAM = r"(?:they|the doctors?|doctors?|the hospital|the nurses?|the surgeons?|the er|the staff|the team)"
_AUX_TO_BE = {"did": "was", "didn't": "wasn't", "do": "is", "does": "is", "don't": "isn't", "doesn't": "isn't",
              "would": "was", "wouldn't": "wasn't", "could": "was", "couldn't": "wasn't"}
_TEAM_QUESTION = re.compile(rf"^(why|when|how come|how)\s+(did|didn't|do|does|don't|doesn't|would|wouldn't)\s+"
                            rf"{_TEAM}\s+(?:just\s+|really\s+|ever\s+)?([a-z]+)\s+(.+)$", re.I)
_PARTICIPLE = {"give": "given", "take": "taken", "do": "done", "leave": "left", "put": "put", "keep": "kept",
               "send": "sent", "make": "made", "tell": "told", "cut": "cut", "find": "found", "see": "seen",
               "get": "gotten", "hold": "held", "choose": "chosen", "bring": "brought", "begin": "begun",
               "write": "written", "set": "set", "let": "let", "shut": "shut", "feed": "fed", "run": "run",
               "pick": "picked", "stop": "stopped", "drop": "dropped", "plan": "planned", "admit": "admitted",
               "ship": "shipped", "skip": "skipped", "tap": "tapped", "plug": "plugged", "swap": "swapped",
               "refer": "referred", "transfer": "transferred", "prefer": "preferred"}
_NOT_TRANSITIVE = {"wait", "go", "come", "say", "think", "want", "know", "have", "need", "try", "let", "be", "seem",
                   "look", "act", "happen", "listen", "care", "believe", "realize", "agree", "decide", "check",
                   "respond", "react", "talk", "ask", "call", "help"}
_OBJECT_PRONOUN = {"him": ("he", "was"), "her": ("she", "was"), "me": ("I", "was"), "it": ("it", "was"),
                   "them": ("they", "were"), "us": ("we", "were"), "that": ("that", "was"), "this": ("this", "was")}
# Where an object noun phrase ends: a particle, a preposition, or a clause word.
_OBJECT_END = {"out", "in", "on", "off", "up", "down", "back", "at", "to", "for", "with", "from", "when", "if",
               "because", "instead", "so", "without", "after", "before", "during", "first", "again",
               "since", "while", "until", "through", "into", "onto", "over", "like", "as", "but", "and"}
_NECESSARY = re.compile(r"^(was|were|is|are)\s+(.+?)\s+(?:really\s+|truly\s+)?(?:necessary|needed|required|"
                        r"warranted|justified)\b([^,;]*?)\W*$", re.I)


def participle(verb: str) -> str:
    low = verb.lower()
    if low in _PARTICIPLE:
        return _PARTICIPLE[low]
    if low.endswith("e"):
        return low + "d"
    if re.search(r"[^aeiou]y$", low):
        return low[:-1] + "ied"
    return low + "ed"


def passive(text: str) -> str:
    """'Why did they give him so much lasix' -> 'Why was he given so much lasix'; 'Why didn't they take the stone
    out' -> 'Why wasn't the stone taken out'; unchanged when the verb takes no object or none is found."""
    m = _TEAM_QUESTION.match(text.strip())
    if not m or m.group(3).lower() in _NOT_TRANSITIVE:
        return text
    wh, aux, verb, rest = m.group(1), m.group(2).lower(), m.group(3), m.group(4)
    words = rest.split()
    first = words[0].lower().strip(",.?!")
    determiner = (first == "her" and len(words) > 1 and not words[0].endswith((",", "?", "."))
                  and words[1].lower().strip(",.?!") not in _OBJECT_END)      # "her furosemide", not "her out"
    if first in _OBJECT_PRONOUN and not determiner:
        subject, be = _OBJECT_PRONOUN[first]
        tail = ([","] if words[0].endswith(",") else []) + words[1:]
    else:
        n = 0
        while n < len(words) and n < 5 and words[n].lower().strip(",.?!") not in _OBJECT_END:
            n += 1
            if words[n - 1][-1:] in ",.?!":
                break
        if n == 0 or not re.match(r"(?:the|a|an|his|her|my|their|this|that|these|those|so|all|any|some)\b",
                                  words[0], re.I):
            return text
        subject, be, tail = " ".join(words[:n]).rstrip(",.?!"), "was", words[n:]
        if words[n - 1].endswith(","):
            tail = [","] + tail
        if re.search(r"s$", subject) and not subject.endswith(("ss", "us", "is")):
            be = "were"
    to_be = _AUX_TO_BE[aux]
    if be == "were":
        to_be = to_be.replace("was", "were").replace("is", "are")
    return " ".join([wh, to_be, subject, participle(verb)] + tail).replace(" ,", ",")


def necessity(text: str) -> str:
    """'Was the pacemaker really necessary?' -> 'Why was the pacemaker needed?'."""
    m = _NECESSARY.match(text.strip())
    if not m:
        return text
    return f"Why {m.group(1).lower()} {m.group(2)} needed{m.group(3)}"
