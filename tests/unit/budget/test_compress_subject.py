"""A passage's opening is a candidate once the sentence after it is kept and leans on it.

The first sentence of a passage names what the rest is about; when it shares no
word with the question it sits below the relevance floor, and a packet kept
the fact about an unnamed "he" without the name the question asked for
(`_State.queue_subject`, `_leans_back`). The rule was kept because it gained at
25 and 50 % in development with the lexical and the static scorer, both halves
at 50 %, and only one set lost a question (docs/benchmarks.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from capsa.budget import Budget, Passage, compress, estimate_tokens, pack

from .conftest import answer_form, qa_row

ROOT = Path(__file__).resolve().parents[3]
HOTPOT_SINGLE = ROOT / "benchmarks" / "data" / "hotpot-single-qa.jsonl"
GOVERNOR = "hotpot-single-5ae33c4d5542992f92d82262"
"""'Robert Suettinger was the national intelligence officer under which former Governor of
Arkansas?': the answer is the name that opens the paragraph whose second sentence matches."""

CLINTON = ("William Jefferson Clinton (born 1946) is an American politician who served as the "
           "42nd President of the United States. Prior to the presidency, he was the Governor "
           "of Arkansas during two separate terms. Before that, he served as attorney general.")
OFFICERS = [
    "The Director of National Intelligence is the head of the intelligence community. The "
    "director is appointed by the President and confirmed by the Senate.",
    "A national intelligence officer leads analysis of one region for the National "
    "Intelligence Council. Officers serve terms of a few years.",
    "Little Rock is the capital of Arkansas. The Arkansas River flows through the city and "
    "the state house stands near its banks.",
]


def _packed_row(share: float) -> tuple[str, str]:
    row = qa_row(HOTPOT_SINGLE, GOVERNOR)
    contexts = row["contexts"]
    answers = row["answers_objects"]
    assert isinstance(contexts, list) and isinstance(answers, list)
    texts = [c["paragraph_text"] for c in contexts]
    budget = int(share * estimate_tokens("\n\n".join(texts)))
    passages = [Passage(id=str(n), text=t) for n, t in enumerate(texts)]
    packet = pack(str(row["question_text"]), passages, Budget(max_tokens=budget))
    return "\n".join(packet.texts), answers[0]["spans"][0]


def _packed_clinton() -> str:
    passages = [Passage(id=str(n), text=t) for n, t in enumerate([*OFFICERS, CLINTON])]
    packet = pack("Robert Suettinger was the national intelligence officer under which former "
                  "Governor of Arkansas?", passages, Budget(max_tokens=130))
    return packet.render()


@pytest.mark.parametrize("share", [0.25, 0.50])
def test_the_opening_that_names_the_answer_is_kept_beside_the_matching_sentence(
        share: float) -> None:
    text, answer = _packed_row(share)
    assert answer_form(answer) in answer_form(text)


@pytest.mark.parametrize("share", [0.25, 0.50])
def test_without_the_rule_the_same_packets_lose_the_name(
        share: float, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compress, "_SUBJECT_BESIDE", False)
    text, answer = _packed_row(share)
    assert answer_form(answer) not in answer_form(text)
    assert "William Jefferson Clinton" not in _packed_clinton()


def test_a_name_with_no_word_of_the_question_is_kept_before_its_fact() -> None:
    rendered = _packed_clinton()
    assert "William Jefferson Clinton" in rendered
    assert "Jefferson Clinton (born 1946) is an American politician" in rendered
    assert "Prior to the presidency, he was the Governor of Arkansas" in rendered


def test_the_opening_is_never_kept_apart_from_the_evidence() -> None:
    # the only matching sentence is the third: the opening is not its neighbour, so it is
    # not queued below the floor, and no sentence without a query word is kept on its own
    text = ("Clinton was born in Hope in 1946. He studied law at Yale. "
            "Later he was the Governor of Arkansas for twelve years. He then ran for President.")
    filler = [Passage(id=f"f{n}", text=f"Weather note {n} says rain and wind in spring. " * 4)
              for n in range(4)]
    packet = pack("Who was the Governor of Arkansas?", [Passage(id="c", text=text), *filler],
                  Budget(max_tokens=40))
    kept = "\n".join(packet.texts)
    assert "Governor of Arkansas" in kept
    assert "born in Hope" not in kept


def test_an_opening_is_not_pulled_in_for_a_sentence_that_names_its_own_subject() -> None:
    # "The hotel cap is EUR 165." leans on nothing before it: a policy's first line is
    # another topic, not its subject, so the room stays free
    passages = [Passage(id="a", text="Trains are booked in standard class. "
                                     "The hotel cap is EUR 165. Taxis need a receipt.")]
    packet = pack("hotel cap", passages, Budget(max_tokens=33))
    assert packet.texts[0] == "… The hotel cap is EUR 165. …"


@pytest.mark.parametrize(("sentence", "leans"), [
    ("Prior to the presidency, he was the Governor of Arkansas.", True),
    ("It was made at Cinecittà in Rome.", True),
    ("(October 23, 1924 – November 4, 2007) was notable as the captain.", True),
    ("was discovered that the boat was anchored off Cyprus.", True),
    ("The hotel cap is EUR 165.", False),
    ("Southaven is traversed by the I-55 freeway.", False),
    ("東京は日本の首都である。", False),
])
def test_a_sentence_leans_back_when_its_subject_is_named_before_it(
        sentence: str, leans: bool) -> None:
    assert compress._leans_back(sentence) is leans
