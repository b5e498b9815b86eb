import pytest

from common.note_text import split_sentences
from programs.archehr.text import last_question_sentence, numbered, soft_cut, truncate_words, whole_sentences

pytestmark = pytest.mark.unit


def words(n: int, end_at: set[int] = frozenset()) -> str:
    return " ".join(f"w{i}." if i in end_at else f"w{i}" for i in range(1, n + 1))


def test_under_limit_is_unchanged():
    assert soft_cut("One two. Three.", max_words=75) == "One two. Three."


def test_soft_cut_at_exactly_60_percent_keeps_the_sentence_end():
    # limit 10, ratio 0.6: a sentence ending at word 6 keeps 6/10 = 60% -> soft cut
    text = words(12, end_at={6})
    assert soft_cut(text, max_words=10, min_ratio=0.6) == "w1 w2 w3 w4 w5 w6."


def test_sentence_end_below_60_percent_hard_cuts_and_appends_period():
    text = words(12, end_at={5})
    assert soft_cut(text, max_words=10, min_ratio=0.6) == "w1 w2 w3 w4 w5. w6 w7 w8 w9 w10."


def test_soft_cut_uses_the_last_sentence_end_within_the_limit():
    text = words(80, end_at={50, 70, 78})
    out = soft_cut(text, max_words=75)
    assert out.split()[-1] == "w70." and len(out.split()) == 70


def test_hard_cut_does_not_double_the_period_or_keep_a_comma():
    assert soft_cut("a b c, d e f g", max_words=3, min_ratio=1.0) == "a b c."


def test_truncate_words_and_numbering():
    assert truncate_words("a b  c d", 3) == "a b c"
    assert numbered([("1", "x"), ("7", "y")]) == "[1] x\n[7] y"


def test_split_and_last_question():
    assert split_sentences("He was sick. Why? Because 3 days.") == ["He was sick.", "Why?", "Because 3 days."]
    assert last_question_sentence("I hurt. Why did it hurt? Was it bad? I hope not.") == "Was it bad?"
    assert last_question_sentence("No question here. Just words.") == "Just words."


def test_a_question_over_the_limit_keeps_its_whole_sentences_and_a_long_first_one_is_cut_at_the_limit():
    two = "Why did they delay her chemotherapy and reduce the dose? Is it possible that the infection came back?"
    assert whole_sentences(two, 15) == "Why did they delay her chemotherapy and reduce the dose?"
    assert whole_sentences(two, 30) == two  # within the limit: unchanged
    long_first = " ".join(f"w{i}" for i in range(20)) + "?"
    assert whole_sentences(long_first, 15) == " ".join(f"w{i}" for i in range(15))


def test_the_lm_question_stage_keeps_the_first_whole_question_of_a_reply_over_the_limit(dummy_lm):
    from tests.builders import archehr_stage

    dummy_lm([{"clinician_question": "Why was the furosemide dose doubled? Could the higher dose harm his kidneys "
                                     "over the coming months?"}])
    out = archehr_stage("question", "lm")(patient_narrative="My father's water pill was doubled. Why?")
    assert out.clinician_question == "Why was the furosemide dose doubled?" and out.fallback is None
