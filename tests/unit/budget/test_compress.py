from __future__ import annotations

from capsa.budget import LexicalScorer, Passage, estimate_tokens
from capsa.budget.compress import Prepared, prepare, select, select_whole

from .conftest import HOTEL, MEALS, TRAINS, make_passage


def prepared(query: str, passages: list[Passage]) -> Prepared:
    return prepare(query, (), passages, tokenizer=estimate_tokens, scorer=LexicalScorer())


def test_prepare_counts_every_sentence_and_the_whole_passage() -> None:
    doc = prepared("hotel", [make_passage(HOTEL)]).retrieved[0]
    assert len(doc.units) == 5
    assert doc.tokens_full == estimate_tokens(HOTEL)
    assert doc.whole_tokens == sum(u.tokens for u in doc.units) + sum(doc.joins)


def test_prepare_ranks_the_matching_passage_with_the_higher_prior() -> None:
    docs = prepared("hotel cap", [make_passage(TRAINS, id="t"), make_passage(HOTEL, id="h")])
    assert docs.retrieved[1].prior > docs.retrieved[0].prior


def test_prepare_adds_the_retrievers_score_to_the_prior() -> None:
    docs = prepared("nothing matches", [make_passage(TRAINS, id="t", score=2.0),
                                        make_passage(MEALS, id="m", score=1.0)])
    assert docs.retrieved[0].prior > docs.retrieved[1].prior == 0.0


def test_select_keeps_the_most_relevant_sentence_when_room_is_short() -> None:
    ready = prepared("high-cost cities", [make_passage(HOTEL)])
    selection = select(ready, ready.retrieved, 30, shape="passages")
    assert selection.chosen[0].kept == [2]


def test_select_spreads_over_the_query_instead_of_repeating_one_term() -> None:
    text = ("The hotel and taxi rules apply. The hotel and taxi rates vary. Meals are paid. "
            "Meal times vary. A meal is free.")
    ready = prepared("hotel taxi meal", [make_passage(text)])
    assert ready.retrieved[0].units[1].relevance > ready.retrieved[0].units[2].relevance
    selection = select(ready, ready.retrieved, 26, shape="passages")
    assert selection.chosen[0].kept == [0, 2]


def test_select_keeps_one_sentence_per_passage_for_a_brief() -> None:
    ready = prepared("hotel cap", [make_passage(HOTEL)])
    assert select(ready, ready.retrieved, 500, shape="brief").chosen[0].kept == [1]


def test_select_stays_within_the_planned_budget() -> None:
    ready = prepared("hotel cap", [make_passage(HOTEL, id="h"), make_passage(MEALS, id="m")])
    selection = select(ready, ready.retrieved, 50, shape="passages", context=10)
    assert 0 < selection.used <= 50


def test_select_skips_sentences_already_packed_elsewhere() -> None:
    ready = prepared("hotel cap", [make_passage(HOTEL, id="a"), make_passage(HOTEL, id="b")])
    selection = select(ready, ready.retrieved, 1000, shape="passages")
    assert list(selection.chosen) == [0] and selection.duplicate == {1}


def test_select_caps_the_number_of_passages() -> None:
    ready = prepared("class", [make_passage(TRAINS, id="t"), make_passage(HOTEL, id="h")])
    selection = select(ready, ready.retrieved, 1000, shape="passages", max_items=1)
    assert len(selection.chosen) == 1 and len(selection.capped) == 1


def test_select_whole_packs_passages_by_prior_and_skips_what_does_not_fit() -> None:
    ready = prepared("hotel cap", [make_passage(TRAINS, id="t"), make_passage(HOTEL, id="h"),
                                   make_passage(MEALS, id="m")])
    selection = select_whole(ready, ready.retrieved, 100, shape="passages")
    assert next(iter(selection.chosen)) == 1
    assert all(choice.cut is None for choice in selection.chosen.values())


def test_select_whole_cuts_the_first_passage_when_it_alone_is_too_big() -> None:
    ready = prepared("hotel cap", [make_passage(HOTEL)])
    choice = select_whole(ready, ready.retrieved, 35, shape="passages").chosen[0]
    assert choice.cut is not None and choice.kept[0] == 0


RULE = ("The licensee must give written notice of the royalty within thirty days to any third "
        "party that receives the work in the territory, and the notice must name every "
        "contributor of the work in full, with their addresses.")
ASIDE = "Royalty questions go to the licensing office of the territory."


def test_select_cuts_the_best_sentence_when_it_can_never_fit_whole() -> None:
    ready = prepared("within how many days must the licensee give notice of the royalty?",
                     [make_passage(RULE, id="rule"), make_passage(ASIDE, id="aside")])
    rule = ready.retrieved[0]
    room = rule.overhead + rule.units[0].tokens - 8  # the rule alone overflows by a few words
    selection = select(ready, ready.retrieved, room, shape="passages")
    assert list(selection.chosen) == [0]
    choice = selection.chosen[0]
    assert choice.cut is not None and "thirty days" in RULE[:choice.cut]
    assert selection.used <= room


def test_select_skips_the_best_sentence_when_its_cut_would_keep_too_little() -> None:
    ready = prepared("within how many days must the licensee give notice of the royalty?",
                     [make_passage(RULE, id="rule"), make_passage(ASIDE, id="aside")])
    aside = ready.retrieved[1]
    room = aside.overhead + aside.units[0].tokens  # the aside fits, half the rule does not
    selection = select(ready, ready.retrieved, room, shape="passages")
    assert list(selection.chosen) == [1]
    assert selection.chosen[1].cut is None
