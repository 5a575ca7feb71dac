"""A passage's source is read as its title when passages are scored.

Past an article's first lines a passage rarely names its subject again, so a
retriever over titled passages scores each under its title. The packer adds
the source's words (`source_words`) to the whole passage's score only.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from capsa.budget import Budget, EmbeddingScorer, Passage, pack
from capsa.budget.relevance import heading_words, source_words

QUERY = "Where was the 1956 film Tosca made?"
UNTITLED_FIRST = Passage(id="butterfly", text="It was made in Milan. The cast sang in Italian.")
TITLED = Passage(id="tosca", text="It was made at the Cinecittà studios in Rome. "
                 "The cast sang in Italian.")
TOSCA = TITLED.model_copy(update={"source": "Tosca (1956 film)"})


@pytest.mark.parametrize(("source", "words"), [
    ("Tosca (1956 film)", "Tosca (1956 film)"),
    ("/srv/tenants/acme/q3_travel-policy.pdf", "q3 travel-policy"),
    ("C:\\reports\\annual_report.docx", "annual report"),
    ("https://en.wikipedia.org/wiki/Kiss_and_Tell_(1945_film)", "Kiss and Tell (1945 film)"),
    ("https://example.com/a%20b.html?page=2#top", "a b"),
    ("https://example.com/", "example"),
    ("Python 3.11", "Python 3.11"),
    ("U.S. Route 66", "U.S. Route 66"),
    ("", ""),
    (None, ""),
])
def test_source_words_keep_a_title_and_a_file_or_url_by_its_name(source: str | None,
                                                                  words: str) -> None:
    assert source_words(source) == words


def test_a_source_naming_the_subject_lifts_its_passage_over_an_untitled_tie() -> None:
    untitled = pack(QUERY, [UNTITLED_FIRST, TITLED], Budget(max_tokens=30))
    titled = pack(QUERY, [UNTITLED_FIRST, TOSCA],
                  Budget(max_tokens=30))
    # a file name is a source too: its words are read the same way
    named = pack(QUERY, [UNTITLED_FIRST, TITLED.model_copy(update={"source": "/srv/tosca.txt"})],
                 Budget(max_tokens=30))

    assert [p.id for p in untitled.passages] == ["butterfly"]
    assert [p.id for p in titled.passages] == ["tosca"]
    assert "Rome" in titled.texts[0]
    assert [p.id for p in named.passages] == ["tosca"]


def test_a_source_never_makes_a_sentence_relevant_on_its_own() -> None:
    # The title matches the query; neither sentence does. A source lifts a
    # passage's prior, not a sentence's relevance, so the packet still keeps
    # only what the budget and the prior choose, and says what it dropped.
    passages = [Passage(id="a", text="Nothing here matches. Still nothing.", source="Tosca film"),
                Passage(id="b", text="Tosca was made in Rome in 1956.")]
    packet = pack(QUERY, passages, Budget(max_tokens=30))

    assert [p.id for p in packet.passages] == ["b"]
    assert {r.passage_id for r in packet.receipts if r.dropped} == {"a"}


def test_other_scorers_read_the_source_with_the_passage() -> None:
    seen: list[str] = []

    def embed(texts: list[str]) -> list[list[float]]:
        seen.extend(texts)
        return [[float("Tosca" in t), 1.0] for t in texts]

    scorer = EmbeddingScorer(embed=embed)
    packet = pack(QUERY, [UNTITLED_FIRST, TOSCA],
                  Budget(max_tokens=30), scorer=scorer)

    assert any(text.startswith("Tosca (1956 film)\n") for text in seen)  # the passage, titled
    assert [p.id for p in packet.passages] == ["tosca"]


def test_a_source_is_not_rendered_in_compact_markup_but_stays_on_the_receipt() -> None:
    packet = pack(QUERY, [UNTITLED_FIRST, TOSCA],
                  Budget(max_tokens=30))

    assert packet.compact
    assert "Tosca (1956 film)" not in packet.render()
    assert [r.source for r in packet.receipts if r.passage_id == "tosca"] == ["Tosca (1956 film)"]


@given(st.text(max_size=200))
def test_source_words_are_single_spaced_words_of_the_source(source: str) -> None:
    words = source_words(source)

    assert "_" not in words
    assert words == " ".join(words.split())
    assert "/" not in words or "://" in source  # a path keeps only its last name


# --- a title beside the source (`Passage.title`) ---------------------------------------------

URL = "https://example.com/p/8412"


@pytest.mark.parametrize(("source", "title", "heading"), [
    (URL, "Tosca (1956 film)", "Tosca (1956 film) (8412)"),
    ("Tosca (1956 film)", "Tosca (1956 film)", "Tosca (1956 film)"),  # once, not twice
    ("/srv/tosca.txt", "Tosca", "tosca"),  # the title adds nothing the file's name has not
    (None, "  Tosca  (1956 film) ", "Tosca (1956 film)"),
    (URL, None, "8412"),
])
def test_heading_words_add_a_title_only_where_it_adds_words(
        source: str | None, title: str | None, heading: str) -> None:
    assert heading_words(source, title) == heading


def test_a_title_lifts_a_passage_whose_source_says_nothing_of_its_subject() -> None:
    at_url = TITLED.model_copy(update={"source": URL})
    untitled = pack(QUERY, [UNTITLED_FIRST, at_url], Budget(max_tokens=30))
    titled = pack(QUERY, [UNTITLED_FIRST, at_url.model_copy(update={"title": "Tosca (1956 film)"})],
                  Budget(max_tokens=30))

    assert [p.id for p in untitled.passages] == ["butterfly"]
    assert [p.id for p in titled.passages] == ["tosca"]
    # the title is read, never shown: the document is still rendered under its source
    assert "Tosca (1956 film)" not in titled.render()
    assert titled.receipts[1].source == URL


def test_packing_again_with_another_title_is_scored_again() -> None:
    # the prepared input is cached by what is scored: a changed title is a new input
    at_url = TITLED.model_copy(update={"source": URL, "title": "Tosca (1956 film)"})
    first = pack(QUERY, [UNTITLED_FIRST, at_url], Budget(max_tokens=30))
    other = pack(QUERY, [UNTITLED_FIRST, at_url.model_copy(update={"title": "Opera houses"})],
                 Budget(max_tokens=30))

    assert [p.id for p in first.passages] == ["tosca"]
    assert [p.id for p in other.passages] == ["butterfly"]
