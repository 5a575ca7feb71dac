from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from capsa.budget import Budget, EmbeddingScorer, LexicalScorer, Passage, Scorer, pack
from capsa.budget.relevance import analyze


def test_analyze_drops_stop_words_and_strips_inflections() -> None:
    assert analyze("The hotels were booked and seated") == ("hotel", "book", "seat")


def test_analyze_matches_word_forms_to_one_term() -> None:
    assert len({*analyze("seat seats seated seating")}) == 1


def test_analyze_splits_cjk_into_characters() -> None:
    assert analyze("東京") == ("東", "京")


def test_lexical_scorer_ranks_the_text_with_the_query_terms_first() -> None:
    scores = LexicalScorer().score("hotel cap", ["Trains are slow.", "The hotel cap is EUR 165."])
    assert scores[1] > scores[0] == 0.0


def test_lexical_scorer_weighs_rare_terms_above_common_ones() -> None:
    texts = ["the policy covers the hotel", "the policy covers travel",
             "the policy covers meals", "the policy covers rules"]
    scores = LexicalScorer().score("policy hotel", texts)
    assert scores[0] == max(scores)
    assert scores[1] == scores[2] == scores[3] > 0.0


def test_lexical_scorer_counts_a_term_once_when_k1_is_zero() -> None:
    scores = LexicalScorer(k1=0.0).score("hotel", ["hotel hotel hotel", "hotel", "taxi"])
    assert scores[0] == scores[1] > 0.0


def test_lexical_scorer_scores_zero_without_query_terms() -> None:
    assert LexicalScorer().score("the of and", ["the hotel"]) == [0.0]


def test_lexical_scorer_rejects_a_length_normalisation_above_one() -> None:
    with pytest.raises(ValueError, match="b"):
        LexicalScorer(b=1.5)


def test_embedding_scorer_scores_by_cosine_similarity() -> None:
    def embed(texts: Sequence[str]) -> list[list[float]]:
        return [[1.0, 0.0] if "hotel" in t else [0.0, 1.0] for t in texts]

    scorer = EmbeddingScorer(embed=embed, lexical_weight=0.0)
    assert scorer.score("hotel", ["a hotel", "a train"]) == [1.0, 0.0]


def test_embedding_scorer_blends_in_lexical_matches_by_default() -> None:
    def blind(texts: Sequence[str]) -> list[list[float]]:  # sees no difference at all
        return [[1.0, 1.0] for _ in texts]

    scores = EmbeddingScorer(embed=blind).score("invoice 4410", ["call 4410", "call the desk"])
    assert scores[0] == 1.0 and scores[1] == 0.5


def test_embedding_scorer_embeds_query_and_texts_in_one_call() -> None:
    calls: list[list[str]] = []

    def embed(texts: Sequence[str]) -> list[list[float]]:
        calls.append(list(texts))
        return [[1.0] for _ in texts]

    EmbeddingScorer(embed=embed).score("q", ["a", "b"])
    assert calls == [["q", "a", "b"]]


def test_embedding_scorer_rejects_a_wrong_number_of_vectors() -> None:
    with pytest.raises(ValueError, match="3 texts"):
        EmbeddingScorer(embed=lambda texts: [[1.0]]).score("q", ["a", "b"])


def test_scorers_satisfy_the_scorer_protocol() -> None:
    assert isinstance(LexicalScorer(), Scorer)
    assert isinstance(EmbeddingScorer(embed=lambda texts: [[1.0]] * len(texts)), Scorer)


def _counting_embed(calls: list[list[str]]) -> Callable[[Sequence[str]], list[list[float]]]:
    """A deterministic fake embedding: letter counts, recording every call."""

    def embed(texts: Sequence[str]) -> list[list[float]]:
        calls.append(list(texts))
        return [[float(t.count(c)) + 0.01 for c in "aehinorst"] for t in texts]

    return embed


def test_embedding_scorer_embeds_each_text_once_across_calls() -> None:
    calls: list[list[str]] = []
    scorer = EmbeddingScorer(embed=_counting_embed(calls), lexical_weight=0.0)
    first = scorer.score("hotel cap", ["the hotel cap", "trains", "the hotel cap"])
    second = scorer.score("hotel cap", ["trains", "taxis need a receipt"])
    assert calls == [["hotel cap", "the hotel cap", "trains"], ["taxis need a receipt"]]
    assert first[1] == second[0] and first[0] == first[2]


def test_pack_embeds_each_sentence_once_whatever_the_number_of_budgets() -> None:
    calls: list[list[str]] = []
    scorer = EmbeddingScorer(embed=_counting_embed(calls))
    passages = [Passage(id="a", text="The hotel cap is EUR 165. Taxis need a receipt."),
                Passage(id="b", text="Rail travel is booked in standard class.")]
    for tokens in (12, 25, 60, 400):
        pack("hotel cap", passages, Budget(max_tokens=tokens), scorer=scorer)
    embedded = [text for call in calls for text in call]
    # the query and the three sentences, once each; passages are pooled from their sentences
    assert sorted(embedded) == sorted(["hotel cap", "The hotel cap is EUR 165.",
                                       "Taxis need a receipt.",
                                       "Rail travel is booked in standard class."])


def test_embedding_scorer_cache_keeps_at_most_cache_size_texts() -> None:
    calls: list[list[str]] = []
    scorer = EmbeddingScorer(embed=_counting_embed(calls), cache_size=2)
    scorer.score("q", ["a", "b"])  # keeps a and b, the two most recent
    scorer.score("q", ["a", "b"])  # embeds q again, which pushes a out
    scorer.score("q", ["b", "c"])
    assert calls == [["q", "a", "b"], ["q"], ["c"]]
