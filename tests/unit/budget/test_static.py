from __future__ import annotations

import math
import pickle
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capsa.budget import (
    Budget,
    LexicalScorer,
    Passage,
    Scorer,
    StaticScorer,
    compress_text,
    pack,
)
from capsa.budget import static as static_module
from capsa.budget.static import MODEL_PATH, _load
from capsa.errors import CapsaError, ModelUnreadable

pytest.importorskip("numpy")

RENT = "What does it cost to rent an automobile?"
OFFICE = ["Parking costs nothing at the office.", "A car is EUR 40 a day to hire.",
          "Staff meet on Fridays."]


@pytest.fixture
def fresh_models(monkeypatch: pytest.MonkeyPatch) -> dict[Path, object]:
    """An empty model registry, so a test sees the first load; the real one is put back."""
    models: dict[Path, object] = {}
    monkeypatch.setattr(static_module, "_MODELS", models)
    return models


def test_static_scorer_ranks_a_paraphrase_above_an_unrelated_sentence() -> None:
    car, tree = StaticScorer().score("Which automobile is fastest?",
                                     ["This car is the quickest.", "The oak tree is tall."])
    assert car > tree == 0.0


def test_static_scorer_credits_what_the_lexical_scorer_misses() -> None:
    assert LexicalScorer().score(RENT, OFFICE)[1] == 0.0
    assert StaticScorer().score(RENT, OFFICE)[1] > 0.0


def test_static_scorer_gives_no_stand_in_for_a_number() -> None:
    # "1997" sits at cosine 0.87 from "1998": a year is never another year
    assert StaticScorer().score("What happened in 1998?", ["It rained in 1997."]) == [0.0]


def test_static_scorer_gives_no_stand_in_for_a_name() -> None:
    assert StaticScorer().score("Where did Obama speak?", ["Clinton was there."]) == [0.0]
    day, = StaticScorer().score("Which day did France vote on Monday?",
                                ["Germany voted on Tuesday."])
    # "voted" still stands in for "vote", but neither name nor weekday earns credit
    assert day == pytest.approx(StaticScorer().score("Which day did they vote?",
                                                     ["Germany voted on Tuesday."])[0])


def test_static_scorer_reads_a_title_case_question_as_words_not_names() -> None:
    titled, plain = (StaticScorer().score(q, [OFFICE[1]])[0] for q in (
        "What Does It Cost To Rent An Automobile?", RENT))
    assert titled == plain > 0.0


def test_static_scorer_treats_a_lower_case_name_as_a_word() -> None:
    # without capitals nothing marks a name: the question is read as plain words
    assert StaticScorer().score("where did obama speak", ["Clinton was there."])[0] > 0.0


def test_static_scorer_scores_exact_matches_as_the_lexical_scorer_does() -> None:
    texts = ["Parking costs nothing.", "Rent is due monthly.", "The costs of rent rose."]
    static = StaticScorer(threshold=0.99).score("rent cost", texts)
    assert static == LexicalScorer().score("rent cost", texts)


def test_static_scorer_with_no_strength_is_the_lexical_scorer() -> None:
    query = "How do I make tar delete the files?"
    texts = ["tar --remove-files deletes them.", "make builds targets.", ""]
    assert StaticScorer(strength=0.0).score(query, texts) == LexicalScorer().score(query, texts)


def test_static_scorer_returns_one_score_per_text_in_order() -> None:
    texts = ["A car is EUR 40 a day to hire.", "", "Staff meet on Fridays.", "東京"]
    scores = StaticScorer().score(RENT, texts)
    assert len(scores) == len(texts) and scores[1] == 0.0
    assert StaticScorer().score(RENT, []) == []


def test_static_scorer_gives_the_same_scores_on_every_call_and_instance() -> None:
    first = StaticScorer().score(RENT, OFFICE)
    assert StaticScorer().score(RENT, OFFICE) == first
    assert StaticScorer().score(RENT, list(reversed(OFFICE))) == list(reversed(first))


def test_static_scorer_satisfies_the_scorer_protocol() -> None:
    assert isinstance(StaticScorer(), Scorer)


def test_pack_with_the_static_scorer_keeps_a_paraphrased_answer() -> None:
    passages = [Passage(id="a", text=" ".join(OFFICE))]
    lexical = pack(RENT, passages, Budget(max_tokens=30))
    static = pack(RENT, passages, Budget(max_tokens=30), scorer=StaticScorer())
    assert "EUR 40" not in "".join(lexical.texts)
    assert "EUR 40" in "".join(static.texts) and static.used_tokens <= 30


def test_compress_text_with_the_static_scorer_keeps_a_paraphrased_answer() -> None:
    text = " ".join(OFFICE)
    assert "EUR 40" not in compress_text(text, RENT, 12)
    assert "EUR 40" in compress_text(text, RENT, 12, scorer=StaticScorer())


def test_static_model_splits_words_as_the_models_tokenizer_does() -> None:
    tokenizers = pytest.importorskip("tokenizers")
    model = _load(MODEL_PATH)
    vocab = {piece: n for piece, n in model.ids.items()}
    reference = tokenizers.Tokenizer(tokenizers.models.WordPiece(vocab, unk_token="[UNK]"))
    reference.normalizer = tokenizers.normalizers.BertNormalizer(lowercase=True)
    reference.pre_tokenizer = tokenizers.pre_tokenizers.BertPreTokenizer()
    text = ("Café naïve 東京 résumé — “quotes” x_y foo_bar 3.14 tar(1) --remove-files "
            "unbelievably antidisestablishmentarianism ½ " + "z" * 120)
    assert model.pieces(text) == reference.encode(text).ids


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789éü", min_size=1, max_size=60))
def test_static_model_splits_any_word_as_the_models_tokenizer_does(word: str) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    model = _load(MODEL_PATH)
    reference = tokenizers.Tokenizer(tokenizers.models.WordPiece(dict(model.ids),
                                                                 unk_token="[UNK]"))
    reference.normalizer = tokenizers.normalizers.BertNormalizer(lowercase=True)
    assert model.pieces(word) == reference.encode(word).ids


def test_static_scorer_loads_the_model_once_across_threads(
        fresh_models: dict[Path, object], monkeypatch: pytest.MonkeyPatch) -> None:
    loads: list[Path] = []
    real = static_module._StaticModel

    def counting(path: Path) -> static_module._StaticModel:
        loads.append(path)
        return real(path)

    monkeypatch.setattr(static_module, "_StaticModel", counting)
    expected = StaticScorer().score(RENT, OFFICE)
    fresh_models.clear()
    loads.clear()
    results: list[list[float]] = []
    barrier = threading.Barrier(8)

    def work() -> None:
        barrier.wait()
        results.append(StaticScorer().score(RENT, OFFICE))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert loads == [MODEL_PATH]
    assert results == [expected] * 8


def test_static_scorer_scores_alike_from_many_threads_sharing_new_words() -> None:
    texts = [f"Entry {n}: a vehicle, a sedan and a lorry numbered {n * 7919}." for n in range(60)]
    expected = StaticScorer().score("automobile truck", texts)
    results: list[list[float]] = []

    def work(offset: int) -> None:
        scorer = StaticScorer()
        for n in range(5):  # words unseen by this scorer's model arrive from every thread
            scorer.score(f"word{offset}x{n} automobile", [f"token{offset}y{n} car"])
        results.append(scorer.score("automobile truck", texts))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [expected] * 6


def test_static_scorer_scores_alike_when_its_word_table_starts_afresh(
        fresh_models: dict[Path, object], monkeypatch: pytest.MonkeyPatch) -> None:
    expected = StaticScorer().score(RENT, OFFICE)
    fresh_models.clear()
    monkeypatch.setattr(static_module, "_TABLE_ROWS", 8)  # fewer than one call's words
    scorer = StaticScorer()
    other = ["A car for hire costs little.", "Staff meet on Mondays."]  # old words and new
    scores = [scorer.score(RENT, texts) for texts in (OFFICE, other, OFFICE)]
    assert scores[0] == scores[2] == expected


def test_static_scorer_names_the_extra_when_numpy_is_missing(
        fresh_models: dict[Path, object], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "numpy", None)
    with pytest.raises(ImportError, match=r"pip install 'capsa\[static\]'"):
        StaticScorer().score(RENT, OFFICE)


def test_static_scorer_refuses_a_missing_model_file_when_built(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no static model"):
        StaticScorer(path=tmp_path / "absent.npz")


def test_static_scorer_names_a_file_that_is_not_a_model(
        fresh_models: dict[Path, object], tmp_path: Path) -> None:
    broken = tmp_path / "broken.npz"
    broken.write_bytes(b"not a zip")
    with pytest.raises(ModelUnreadable, match=r"broken\.npz is not a static model") as caught:
        StaticScorer(path=broken).score(RENT, OFFICE)
    assert isinstance(caught.value, CapsaError)
    assert caught.value.path == str(broken)
    assert pickle.loads(pickle.dumps(caught.value)).path == str(broken)


def test_static_scorer_reads_a_model_from_another_path(tmp_path: Path) -> None:
    copy = tmp_path / "copy.npz"
    shutil.copyfile(MODEL_PATH, copy)
    assert StaticScorer(path=copy).score(RENT, OFFICE) == StaticScorer().score(RENT, OFFICE)


def test_static_scorer_does_not_change_the_texts_it_is_given() -> None:
    texts = list(OFFICE)
    StaticScorer().score(RENT, texts)
    assert texts == OFFICE


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=40),
       st.lists(st.text(max_size=120), max_size=12))
def test_static_scores_are_finite_non_negative_and_one_per_text(query: str,
                                                                texts: list[str]) -> None:
    scores = StaticScorer().score(query, texts)
    assert len(scores) == len(texts)
    assert all(math.isfinite(s) and s >= 0.0 for s in scores)


def test_importing_the_budget_package_loads_neither_numpy_nor_the_model() -> None:
    code = ("import sys, capsa.budget, capsa.budget.static as s; "
            "print('numpy' in sys.modules, len(s._MODELS))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.split() == ["False", "0"]


class _PlainStatic(StaticScorer):
    """The static scorer reached through `score` and `score_passages` only: `prepare`
    takes its one-pass shortcut (`StaticScorer.score_prepared`) for the class itself."""


_STATIC_PIECES = st.sampled_from([
    "The hotel cap", " is EUR 165.", " A car costs 40 a day to hire.", " Lodging per night",
    "\n\n", " Taxis need a receipt.", " 文字。", " automobile rental", "Dr. No", " the",
])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_STATIC_PIECES, min_size=1, max_size=12).map("".join), min_size=1,
                max_size=4),
       st.sampled_from([RENT, "nightly hotel limit", "Who is Dr. No?", "", "文字 receipt"]),
       st.booleans())
def test_prepare_with_the_static_scorer_scores_as_score_and_score_passages_do(
        texts: list[str], query: str, titled: bool) -> None:
    from capsa.budget.compress import prepare
    from capsa.budget.tokens import estimate_tokens

    passages = [Passage(id=f"p{n}", text=text, title="Car hire" if titled and n else None)
                for n, text in enumerate(texts)]
    fast = prepare(query, passages[:1], passages[1:], tokenizer=estimate_tokens,
                   scorer=StaticScorer())
    plain = prepare(query, passages[:1], passages[1:], tokenizer=estimate_tokens,
                    scorer=_PlainStatic())
    for quick, slow in zip(fast.attached + fast.retrieved, plain.attached + plain.retrieved,
                           strict=True):
        assert quick.relevance == pytest.approx(slow.relevance, abs=1e-6)
        assert quick.prior == pytest.approx(slow.prior, abs=1e-6)
        assert [u.relevance for u in quick.units] == pytest.approx(
            [u.relevance for u in slow.units], abs=1e-6)
