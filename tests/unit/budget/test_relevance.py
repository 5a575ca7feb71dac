from __future__ import annotations

import pickle
import re
import unicodedata
from collections.abc import Callable, Sequence

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from capsa.budget import (
    Budget,
    EmbeddingScorer,
    LexicalScorer,
    Passage,
    Scorer,
    compress_text,
    pack,
)
from capsa.budget.relevance import analyze, batches, fold, known_words, respell, scores_of
from capsa.errors import CapsaError, ScorerError


def test_analyze_drops_stop_words_and_strips_inflections() -> None:
    assert analyze("The hotels were booked and seated") == ("hotel", "book", "seat")


def test_analyze_matches_word_forms_to_one_term() -> None:
    assert len({*analyze("seat seats seated seating")}) == 1


def test_analyze_splits_cjk_into_characters() -> None:
    assert analyze("東京") == ("東", "京")


@pytest.mark.parametrize(("typed", "written"), [
    ("fiancee", "fiancée"), ("Pokemon", "Pokémon"), ("Sao Paulo", "São Paulo"),
    ("Zurich", "Zürich"), ("strasse", "Straße"), ("Aeroskobing", "Ærøskøbing"),
    ("Lodz", "Łódź"), ("file", "ｆｉｌｅ"), ("office", "oﬃce"),
])
def test_a_word_typed_without_its_accents_is_the_same_term(typed: str, written: str) -> None:
    assert analyze(typed) == analyze(written)
    # so a packet ranks the passage that names it first, either way round
    for query, text in ((typed, written), (written, typed)):
        passages = [Passage(id="a", text="Unrelated words about trains."),
                    Passage(id="b", text=f"Our guide to {text} is here.")]
        packet = pack(f"Tell me about {query}", passages, Budget(max_tokens=200))
        assert [p.id for p in packet.passages] == ["b", "a"]


def test_a_decomposed_accent_does_not_split_its_word() -> None:
    decomposed = unicodedata.normalize("NFD", "Zürich fiancée")
    assert analyze(decomposed) == analyze("Zurich fiancee") == ("zurich", "fiance")
    assert LexicalScorer().score("fiancée in Zürich", [decomposed, "trains"])[0] > 0


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=24))
@example("ﹰ")  # a spacing mark's form: folds to a space, so the word stays as written
def test_folding_twice_changes_nothing_and_any_text_analyses(text: str) -> None:
    for word in re.findall(r"\w+", text.lower()):
        assert fold(fold(word)) == fold(word)
    assert all(analyze(text))  # no empty term, whatever the script


def test_folding_keeps_other_scripts_letters_apart() -> None:
    # In Cyrillic "й" is its own letter, not an accented "и"; kana keep their voicing marks.
    assert analyze("йод") != analyze("иод")
    assert analyze("が") != analyze("か")


def _words(*texts: str) -> list[list[str]]:
    return [re.findall(r"\w+", text.lower()) for text in texts]


@pytest.mark.parametrize(("mistyped", "meant"), [
    ("recieve", "receive"),  # two neighbours swapped
    ("Eurpean", "European"),  # a letter dropped; the capital kept
    ("snowbaorder", "snowboarder"),
    ("depedent", "dependent"),
    ("sountrack", "soundtrack"),
    ("similiar", "similar"),  # a letter added
    ("refnud", "refund"),
])
def test_a_mistyped_query_word_is_read_as_the_passage_word_it_misses(
        mistyped: str, meant: str) -> None:
    text = f"The {meant.lower()} is in section four of the policy."
    query, respelt = respell(f"Where is the {mistyped}?", _words(text))
    assert respelt == ((mistyped, meant),)
    assert query == f"Where is the {meant}?"
    # and a packet then ranks that passage first, where it ranked on nothing before
    passages = [Passage(id="a", text="Trains are booked in standard class."),
                Passage(id="b", text=text)]
    packet = pack(f"Where is the {mistyped}?", passages, Budget(max_tokens=200))
    assert [p.id for p in packet.passages] == ["b", "a"]
    assert packet.respelt == ((mistyped, meant),)
    assert packet.query == f"Where is the {mistyped}?"  # the caller's, unchanged


@pytest.mark.parametrize(("query", "text", "why"), [
    ("Which country is it in?", "The county of Kent.", "a word of English"),
    ("When was it founded in 1978?", "It was founded in 1979.", "a number"),
    ("What does encodr do?", "The decoder reads it.", "another first letter"),
    ("Who is Rolo?", "Rola and Rolf are towns.", "too short to tell"),
    ("Where is Gasherbrum?", "Gasherbrum II is in Pakistan.", "the passage holds it"),
    ("Where is Qwzxvbn?", "Nothing close is written here.", "no word one edit away"),
    ("Is recieve right?", "", "no passage text at all"),
])
def test_a_word_is_left_as_typed_unless_it_is_plainly_a_typo(
        query: str, text: str, why: str) -> None:
    assert respell(query, _words(text)) == (query, ()), why


@pytest.mark.parametrize(("british", "american"), [
    ("colour", "color"), ("behaviours", "behaviors"), ("organise", "organize"),
    ("organisation", "organization"), ("analysed", "analyzed"), ("centre", "center"),
    ("kilometres", "kilometers"), ("defence", "defense"), ("licence", "license"),
    ("travelled", "traveled"), ("modelling", "modeling"),
])
def test_a_word_spelt_the_other_side_of_the_atlantic_is_read_as_the_passage_spells_it(
        british: str, american: str) -> None:
    for asked, written in ((british, american), (american, british)):
        query = f"Which {asked} is meant?"
        assert respell(query, _words(f"The {written} is in section four."))[1] \
            == ((asked, written),)


@pytest.mark.parametrize(("asked", "written"), [
    ("filling", "filing"), ("filled", "filed"), ("hours", "hors"), ("acres", "acers"),
    ("country", "county"), ("bought", "brought"), ("stars", "sears"),
])
def test_a_word_of_english_is_not_read_as_another_word(asked: str, written: str) -> None:
    query = f"Which {asked} is meant?"
    assert respell(query, _words(f"The {written} is in section four.")) == (query, ())


def test_a_pasted_text_full_of_odd_words_has_only_its_first_sixteen_looked_up() -> None:
    meant = [f"zeta{letter}word" for letter in "abcdefghijklmnopqrst"]  # twenty words
    mistyped = [word.replace("word", "wrod") for word in meant]
    respelt = respell(" ".join(mistyped), _words(" ".join(meant)))[1]
    assert respelt == tuple(zip(mistyped, meant, strict=True))[:16]


def test_of_several_words_one_edit_away_the_commonest_is_read() -> None:
    words = _words("The influenza season.", "Influenza cases rose.", "Its influence waned.")
    assert respell("Which influenze strain?", words)[1] == (("influenze", "influenza"),)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["hotel", "cap", "London", "EUR", "230", "receipt", "meals",
                                 "refund", "travel", "standard", "class", "booked"]),
                min_size=1, max_size=8))
def test_a_query_the_passages_match_is_never_respelt(asked: list[str]) -> None:
    text = "The hotel cap in London is EUR 230; meals, refund and travel receipt: " \
           "standard class booked."
    query = " ".join(asked)
    assert respell(query, _words(text)) == (query, ())


def test_every_known_word_is_lower_case_letters_and_common_words_are_known() -> None:
    known = known_words()
    assert len(known) > 15_000
    assert all(word.isalpha() and word.islower() for word in known)
    assert {"country", "receive", "european", "influence"} <= known
    assert not {"recieve", "eurpean"} & known


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
    with pytest.raises(ScorerError, match="3 texts"):
        EmbeddingScorer(embed=lambda texts: [[1.0]]).score("q", ["a", "b"])


def test_scorer_error_is_still_caught_as_the_value_error_embedding_scorer_raised() -> None:
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
    assert [sorted(call) for call in calls] == [["hotel cap", "the hotel cap", "trains"],
                                                ["taxis need a receipt"]]
    assert first[1] == second[0] and first[0] == first[2]


def test_pack_embeds_each_text_once_whatever_the_number_of_budgets() -> None:
    calls: list[list[str]] = []
    scorer = EmbeddingScorer(embed=_counting_embed(calls))
    passages = [Passage(id="a", text="The hotel cap is EUR 165. Taxis need a receipt."),
                Passage(id="b", text="Rail travel is booked in standard class.")]
    for tokens in (12, 25, 60, 400):
        pack("hotel cap", passages, Budget(max_tokens=tokens), scorer=scorer)
    embedded = [text for call in calls for text in call]
    # the query, the three sentences and the passage of two, once each (b is its one sentence)
    assert sorted(embedded) == sorted(["hotel cap", "The hotel cap is EUR 165.",
                                       "Taxis need a receipt.",
                                       "Rail travel is booked in standard class.",
                                       "The hotel cap is EUR 165. Taxis need a receipt."])


def test_embedding_scorer_embeds_a_passage_by_its_opening() -> None:
    calls: list[list[str]] = []
    scorer = EmbeddingScorer(embed=_counting_embed(calls), passage_words=4)
    scorer.score_passages("q", ["one two three four five six"], [["one two three four five six"]])
    assert calls == [["q", "one two three four"]]


def test_embedding_scorer_without_passage_words_pools_the_sentences() -> None:
    calls: list[list[str]] = []
    pooled = EmbeddingScorer(embed=_counting_embed(calls), passage_words=0, lexical_weight=0.0)
    sentences = [["the hotel cap", "a taxi"], ["trains"]]
    scores = pooled.score_passages("hotel", ["the hotel cap a taxi", "trains"], sentences)
    assert sorted(text for call in calls for text in call) == sorted(
        ["hotel", "the hotel cap", "a taxi", "trains"])  # no passage embedded
    assert scores[0] > scores[1]


def test_embedding_scorer_cache_keeps_at_most_cache_size_texts() -> None:
    calls: list[list[str]] = []
    scorer = EmbeddingScorer(embed=_counting_embed(calls), cache_size=2)
    scorer.score("q", ["a", "b"])  # keeps a and b, the two most recent
    scorer.score("q", ["a", "b"])  # embeds q again, which pushes a out
    scorer.score("q", ["b", "c"])
    assert calls == [["q", "a", "b"], ["q"], ["c"]]


def test_embedding_scorer_scores_the_least_similar_texts_zero() -> None:
    def embed(texts: Sequence[str]) -> list[list[float]]:  # cosine to "q" grows with length
        return [[1.0, 0.0] if t == "q" else [1.0, 1.0 / len(t)] for t in texts]

    texts = ["a", "bb", "ccc", "dddd", "eeeee", "ffffff"]
    scores = EmbeddingScorer(embed=embed, lexical_weight=0.0).score("q", texts)
    assert scores[:2] == [0.0, 0.0] and scores[-1] == 1.0
    assert scores[2] < scores[3] < scores[4] < scores[5]


def test_embedding_scorer_with_no_baseline_zeroes_only_the_least_similar() -> None:
    def embed(texts: Sequence[str]) -> list[list[float]]:
        return [[1.0, 0.0] if t == "q" else [1.0, 1.0 / len(t)] for t in texts]

    scores = EmbeddingScorer(embed=embed, lexical_weight=0.0, baseline=0.0).score(
        "q", ["a", "bb", "ccc"])
    assert scores[0] == 0.0 and 0.0 < scores[1] < scores[2] == 1.0


def test_embedding_scorer_keeps_cosines_when_no_text_stands_out() -> None:
    def embed(texts: Sequence[str]) -> list[list[float]]:
        return [[1.0, 0.0] if t == "q" else [1.0, 1.0] for t in texts]

    assert EmbeddingScorer(embed=embed, lexical_weight=0.0).score("q", ["a", "b"]) == [1.0, 1.0]


def test_embedding_scorer_embeds_texts_of_similar_length_together() -> None:
    calls: list[list[str]] = []
    scorer = EmbeddingScorer(embed=_counting_embed(calls), batch_overhead=10)
    long_texts = [f"{n} " + "the hotel cap applies to every night of the stay" for n in range(3)]
    texts = ["hotel", "taxi", *long_texts, "rail"]
    scores = scorer.score("q", texts)
    assert [sorted(call) for call in calls] == [sorted(["q", "hotel", "taxi", "rail"]),
                                                sorted(long_texts)]
    assert len(scores) == len(texts)
    assert scores == EmbeddingScorer(embed=_counting_embed([]), batch_overhead=None).score(
        "q", texts)


def test_embedding_scorer_without_batch_overhead_embeds_in_one_call_in_order() -> None:
    calls: list[list[str]] = []
    EmbeddingScorer(embed=_counting_embed(calls), batch_overhead=None).score(
        "q", ["a long text indeed", "b"])
    assert calls == [["q", "a long text indeed", "b"]]


def test_batches_hold_every_text_once_and_at_most_largest_a_call() -> None:
    texts = [f"text {'x' * (n % 7)} {n}" for n in range(100)]
    calls = batches(texts, overhead=0, largest=8)
    assert sorted(t for call in calls for t in call) == sorted(texts)
    assert all(len(call) <= 8 for call in calls)
    assert batches([], overhead=10) == []


def test_batches_sort_by_the_length_they_are_given() -> None:
    # By the estimate "ab" and "xy" are the same size; by this counter "xy" is long.
    def length(text: str) -> int:
        return 40 if "x" in text else len(text)

    texts = ["xy", "ab", "cd", "xz"]
    assert batches(texts, overhead=5) == [texts]  # by the estimate: one call
    assert batches(texts, overhead=5, length=length) == [["ab", "cd"], ["xy", "xz"]]


def test_embedding_scorer_groups_calls_by_the_models_own_tokenizer() -> None:
    # Word pieces part from the estimate on rare words and code: a model's
    # tokenizer may split "Zygomorphic" into many tokens and "the" into one.
    def word_pieces(text: str) -> list[str]:  # list-returning, as tiktoken's encode
        return [piece for word in text.split() for piece in
                ([word] if word.islower() else [word[i:i + 2] for i in range(0, len(word), 2)])]

    calls: list[list[str]] = []
    rare = ["Zygomorphic Pseudopodia", "Xanthophyll Chlorenchyma"]
    plain = ["the small hotel", "the rail pass"]
    scorer = EmbeddingScorer(embed=_counting_embed(calls), batch_overhead=5,
                             tokenizer=word_pieces)
    scorer.score("q", [*rare, *plain])
    assert sorted(map(sorted, calls)) == sorted([sorted(["q", *plain]), sorted(rare)])


def test_embedding_scorer_refuses_a_tokenizer_that_cannot_count() -> None:
    with pytest.raises(TypeError, match="cannot count tokens"):
        EmbeddingScorer(embed=_counting_embed([]), tokenizer=42)


def test_embedding_scorer_embeds_a_long_text_by_its_opening_and_the_query_whole() -> None:
    calls: list[list[str]] = []
    query = "which hotel caps apply to a stay of more than one night in the capital city? " * 2
    scorer = EmbeddingScorer(embed=_counting_embed(calls), max_words=5, batch_overhead=None)
    scorer.score(query, ["the hotel cap (per night) applies to every night", "short text"])
    assert calls == [[query, "the hotel cap (per", "short text"]]


def test_embedding_scorer_without_max_words_embeds_texts_whole() -> None:
    calls: list[list[str]] = []
    text = "the hotel cap applies to every night of the stay " * 4
    EmbeddingScorer(embed=_counting_embed(calls), max_words=None).score("q", [text])
    assert [t for call in calls for t in call] == ["q", text]


@pytest.mark.parametrize("broken", [
    "com\u2010\n   mands",  # groff's hyphen at a man page's line end
    "com-\nmands",  # a PDF's justified line
    "com\u00admands",  # a soft hyphen
])
def test_a_word_broken_across_a_line_matches_as_the_whole_word(broken: str) -> None:
    assert analyze(f"the last {broken} are saved") == analyze("the last commands are saved")


def test_a_hyphenated_compound_on_one_line_keeps_its_parts() -> None:
    assert analyze("a well-known option") == ("well", "known", "option")


def test_a_possessive_adds_no_s_term() -> None:
    assert analyze("gzip's level") == analyze("gzip level")
    assert "s" in analyze("the -s option")  # a flag's letter is still a term


def test_a_how_to_questions_causative_verb_is_no_term() -> None:
    query = "How do I make tar delete the files?"
    passages = ["MAKE(1) documents how make runs rules.",
                "--remove-files: tar will delete files after adding them."]
    scores = LexicalScorer().score(query, passages)
    assert scores[0] == 0.0
    assert scores[1] > 0.0


def test_make_stays_a_term_where_it_is_no_how_to() -> None:
    scores = LexicalScorer().score("Which company did make the film?",
                                   ["The studio did make it.", "Nothing here."])
    assert scores[0] > 0.0


class _ShortScorer:
    """Drops the last score: the bug a hand-written scorer makes."""

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        return [1.0] * (len(texts) - 1)


class _NanScorer:
    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        return [float("nan")] * len(texts)


class _ShortPassageScorer:
    """Scores sentences right but passages (`score_passages`) wrong."""

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        return [1.0] * len(texts)

    def score_passages(self, query: str, passages: Sequence[str],
                       sentences: Sequence[Sequence[str]]) -> list[float]:
        return [1.0] * (len(passages) + 1)


_TWO = [Passage(id="a", text="The hotel cap is EUR 165. Taxis need a receipt."),
        Passage(id="b", text="Trains are slow.")]


def test_pack_names_a_scorer_that_returns_too_few_scores() -> None:
    with pytest.raises(ScorerError, match=r"_ShortScorer\.score returned 2 scores for 3 texts"):
        pack("hotel cap", _TWO, Budget(max_tokens=20), scorer=_ShortScorer())


def test_pack_refuses_a_scorer_that_returns_nan() -> None:
    with pytest.raises(ScorerError, match=r"_NanScorer\.score returned nan for text 1 of 3"):
        pack("hotel cap", _TWO, Budget(max_tokens=20), scorer=_NanScorer())


def test_pack_names_a_scorer_whose_passage_scores_are_the_wrong_length() -> None:
    with pytest.raises(ScorerError, match=r"score_passages returned 3 scores for 2 texts"):
        pack("hotel cap", _TWO, Budget(max_tokens=20), scorer=_ShortPassageScorer())


def test_compress_text_names_a_scorer_that_returns_too_few_scores() -> None:
    with pytest.raises(ScorerError) as raised:
        compress_text(_TWO[0].text, "hotel cap", 5, scorer=_ShortScorer())
    assert (raised.value.scorer, raised.value.expected, raised.value.got) == ("_ShortScorer", 2, 1)


def test_scorer_error_is_a_capsa_error_that_pickles_with_its_counts() -> None:
    error = ScorerError("MyScorer.score returned 2 scores for 3 texts", scorer="MyScorer",
                        expected=3, got=2)
    copy = pickle.loads(pickle.dumps(error))
    assert isinstance(copy, CapsaError)
    assert (str(copy), copy.scorer, copy.expected, copy.got) == (str(error), "MyScorer", 3, 2)


def test_scores_of_refuses_a_scorer_that_returns_no_sequence() -> None:
    class Scalar:
        def score(self, query: str, texts: Sequence[str]) -> float:
            return 1.0

    with pytest.raises(ScorerError, match="not one number per text"):
        scores_of(Scalar(), "q", ["a"])  # type: ignore[arg-type]


def test_embedding_scorer_names_an_embed_function_that_returns_too_few_vectors() -> None:
    def embed(texts: Sequence[str]) -> list[list[float]]:
        return [[1.0, 0.0]] * (len(texts) - 1)

    with pytest.raises(ScorerError, match=r"EmbeddingScorer\.embed \(.*embed\) returned \d+ "
                                          r"vectors for \d+ texts"):
        pack("hotel cap", _TWO, Budget(max_tokens=20), scorer=EmbeddingScorer(embed=embed))


def test_a_dotted_number_is_one_term_so_versions_are_told_apart() -> None:
    scores = LexicalScorer().score("What changed in 3.0?", ["Fixed in 0.3.", "Fixed in 3.0."])

    assert analyze("from 2.6.1 to 3.0") == ("2.6.1", "2", "3.0", "3")
    assert scores[0] == 0.0 < scores[1]


def test_a_bare_major_version_still_matches_its_dotted_releases() -> None:
    scores = LexicalScorer().score("Does it need Python 3?", ["Requires Python 3.11 or later.",
                                                              "Requires Perl 5."])

    assert scores[0] > scores[1] == 0.0
