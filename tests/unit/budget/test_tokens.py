from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from capsa.budget import Budget, Passage, as_tokenizer, estimate_tokens, pack
from capsa.budget.tokens import _PIECES, _SCRIPT_RUNS, per_call_tokens


def test_estimate_tokens_is_zero_for_empty_text() -> None:
    assert estimate_tokens("") == 0


def test_estimate_tokens_counts_one_per_short_word_and_symbol() -> None:
    assert estimate_tokens("The cap is high.") == 5


@pytest.mark.parametrize(("text", "expected"), [
    ("reimbursement", 2),  # 13 letters: one token plus one per further seven
    ("1", 1),
    ("2025", 2),           # one token per three digits
    ("123456", 2),
    ("...", 2),            # ASCII symbol runs cost one per pair
    ("東京都", 3),           # one per CJK character
    ("a\nb", 3),           # newlines are paid for
    ("   ", 0),            # other whitespace is free
])
def test_estimate_tokens_prices_each_kind_of_piece(text: str, expected: int) -> None:
    assert estimate_tokens(text) == expected


def test_estimate_tokens_is_additive_over_whitespace_separated_pieces() -> None:
    left, right = "The hotel cap is EUR 165.", "Taxis need a receipt."
    assert estimate_tokens(f"{left} {right}") == estimate_tokens(left) + estimate_tokens(right)


def test_estimate_tokens_charges_for_container_markup() -> None:
    assert estimate_tokens('<document id="p1" source="a.pdf"></document>') >= 12


@pytest.mark.parametrize(("text", "expected"), [
    ("Привет", 3),         # Cyrillic: about a third of a token per letter, one per word
    ("مرحبا", 4),           # Arabic: about two thirds per letter
    ("नमस्ते", 7),            # Devanagari: one per character and one per word
])
def test_estimate_tokens_prices_scripts_by_what_they_cost(text: str, expected: int) -> None:
    assert estimate_tokens(text) == expected


def test_estimate_tokens_stays_additive_for_other_scripts() -> None:
    left, right = "Гостиница стоит дорого.", "الفندق غالي"
    assert estimate_tokens(f"{left} {right}") == estimate_tokens(left) + estimate_tokens(right)


def cl100k() -> Any:
    """OpenAI's cl100k_base, from the copy llama-index-core ships (no network)."""
    tiktoken = pytest.importorskip("tiktoken")
    static = pytest.importorskip("llama_index.core").__file__
    os.environ.setdefault("TIKTOKEN_CACHE_DIR",
                          str(Path(static).parent / "_static" / "tiktoken_cache"))
    return tiktoken.get_encoding("cl100k_base")


def test_as_tokenizer_counts_the_tokens_an_encoder_returns() -> None:
    encoding = cl100k()
    count = as_tokenizer(encoding.encode)
    assert count("The hotel cap is EUR 165.") == len(encoding.encode("The hotel cap is EUR 165."))


def test_as_tokenizer_takes_a_tiktoken_encoding_whole_and_counts_special_tokens_as_text() -> None:
    encoding = cl100k()
    assert as_tokenizer(encoding)("a <|endoftext|> b") == len(
        encoding.encode_ordinary("a <|endoftext|> b"))


def test_pack_accepts_a_tokenizer_returning_a_list_of_tokens() -> None:
    encoding = cl100k()
    passages = [Passage(id="a", text="Trains are slow. The hotel cap is EUR 165. Taxis need "
                                     "receipts. Meals are EUR 55.")]
    packet = pack("hotel cap", passages, Budget(max_tokens=30), tokenizer=encoding.encode)
    assert len(encoding.encode(packet.render())) == packet.used_tokens <= 30


def test_as_tokenizer_uses_get_num_tokens_of_a_chat_model_like_object() -> None:
    class Model:
        def get_num_tokens(self, text: str) -> int:
            return len(text)

    assert as_tokenizer(Model())("abcd") == 4


def test_as_tokenizer_reads_input_ids_from_a_tokenizer_called_directly() -> None:
    assert as_tokenizer(lambda text: {"input_ids": [1, 2, 3], "attention_mask": [1, 1, 1]})(
        "x") == 3


def test_as_tokenizer_rounds_a_float_count_up() -> None:
    assert as_tokenizer(lambda text: len(text) / 4)("hello") == 2


@pytest.mark.parametrize("result", [-1, float("nan"), float("inf"), True, "3", None, {"a": 1}])
def test_as_tokenizer_refuses_a_result_that_is_not_a_count(result: object) -> None:
    with pytest.raises(TypeError, match="not a number of tokens: pass a callable"):
        as_tokenizer(lambda text: result)("x")


def test_as_tokenizer_refuses_what_cannot_count_and_says_what_to_pass() -> None:
    with pytest.raises(TypeError, match=r"tiktoken's enc\.encode"):
        as_tokenizer(42)


def test_as_tokenizer_of_none_is_the_estimate() -> None:
    assert as_tokenizer(None) is estimate_tokens


def test_as_tokenizer_counts_a_hugging_face_tokenizers_encoding() -> None:
    tokenizers = pytest.importorskip("tokenizers", reason="Hugging Face tokenizers not installed")
    vocabulary = {"[UNK]": 0, "the": 1, "hotel": 2, "cap": 3}
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocabulary, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    assert as_tokenizer(tokenizer)("the hotel cap is high") == 5  # an Encoding, by its length
    assert as_tokenizer(tokenizer.encode)("the hotel cap") == 3


_REFERENCE_LONG_RUNS = re.compile(r"[A-Za-z]{8,}|[0-9]{4,}|[!-/:-@\[-`{-~]{3,}")


def _reference_estimate(text: str) -> int:
    """The estimate as first written: a second regular-expression pass for long runs."""
    if not text:
        return 0
    count = len(_PIECES.findall(text))
    for run in _REFERENCE_LONG_RUNS.findall(text):
        if run[0].isalpha():
            count += (len(run) - 1) // 7
        elif run[0].isdigit():
            count += (len(run) + 2) // 3 - 1
        else:
            count += (len(run) + 1) // 2 - 1
    for match in _SCRIPT_RUNS.finditer(text):
        size = match.end() - match.start()
        if match.lastgroup == "cyrillic":
            count += 1 + (size + 1) // 3 - size
        elif match.lastgroup == "arabic":
            count += 1 + (2 * size) // 3 - size
        else:
            count += 1
    return count


_ALPHABET = ("abcdefghXYZ0123456789 \n\t\r\x0b\x0c\x1c\x1f\x7f.,;:<>/=-_!#`\"'()"
             "é文жжاب\u0915\x00\u00a0\u3000")


@given(st.text(alphabet=st.sampled_from(_ALPHABET), max_size=300))
def test_estimate_tokens_by_chunks_is_the_two_pass_estimate(text: str) -> None:
    assert estimate_tokens(text) == _reference_estimate(text)


def _bert_style(vocabulary: dict[str, int]) -> Any:
    """A Hugging Face tokenizer that wraps every text in [CLS] ... [SEP], as BERT's does."""
    tokenizers = pytest.importorskip("tokenizers", reason="Hugging Face tokenizers not installed")
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocabulary, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tokenizer.post_processor = tokenizers.processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 1), ("[SEP]", 2)])
    return tokenizer


def test_per_call_tokens_reads_the_special_tokens_a_tokenizer_adds_to_every_text() -> None:
    tokenizer = _bert_style({"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "hotel": 3, "cap": 4})
    assert as_tokenizer(tokenizer)("") == 2
    assert per_call_tokens(as_tokenizer(tokenizer)) == 2
    assert per_call_tokens(as_tokenizer(tokenizer.encode)) == 2
    assert per_call_tokens(as_tokenizer(lambda text: [0, *text.split()])) == 1  # a BOS token


@pytest.mark.parametrize("counter", [estimate_tokens, lambda text: len(text.split()),
                                     lambda text: max(3, len(text) // 4),  # a minimum
                                     # a charge, but super-additive beside it
                                     lambda text: (len(text) // 15) ** 2 // 8
                                     + len(text) // 15 + 1])
def test_per_call_tokens_is_zero_unless_the_charge_is_a_constant(counter: Any) -> None:
    assert per_call_tokens(counter) == 0


@given(st.lists(st.sampled_from(["The hotel cap is EUR 165.", "Taxis need a receipt.",
                                 "Meals are paid up to EUR 55 a day.", "Rooms are booked."]),
                min_size=1, max_size=12),
       st.integers(min_value=1, max_value=60), st.integers(min_value=1, max_value=3))
def test_a_charge_per_call_is_paid_once_not_per_sentence(
        sentences: list[str], budget: int, charge: int) -> None:
    # The same packet as for the counter without the charge and a budget that much
    # smaller: planning adds up sentences, and the rendered packet pays it once.
    passages = [Passage(id=f"p{n}", text=" ".join(sentences[n::3])) for n in range(3)
                if sentences[n::3]]

    def words(text: str) -> int:
        return len(text.split())

    def charged(text: str) -> int:
        return len(text.split()) + charge

    plain = pack("hotel cap receipt", passages, Budget(max_tokens=budget), tokenizer=words)
    paid = pack("hotel cap receipt", passages, Budget(max_tokens=budget + charge),
                tokenizer=charged)
    assert paid.render() == plain.render()
    assert paid.used_tokens == plain.used_tokens + charge <= budget + charge


class _TransformersLike:
    """What a `transformers` tokenizer shows a counter: ``model_max_length``, ``encode`` with
    ``verbose``, and a warning the first time a text is longer than the model reads."""

    model_max_length = 8

    def __init__(self) -> None:
        self.warnings: list[str] = []

    def encode(self, text: str, add_special_tokens: bool = True, verbose: bool = True,
               **_: Any) -> list[int]:
        ids = [0] * len(text.split()) + ([1, 2] if add_special_tokens else [])
        if verbose and len(ids) > self.model_max_length:
            self.warnings.append(f"Token indices sequence length is longer than the specified "
                                 f"maximum ({len(ids)} > {self.model_max_length})")
        return ids

    def __call__(self, text: str, verbose: bool = True) -> dict[str, list[int]]:
        return {"input_ids": self.encode(text, verbose=verbose)}


def test_a_transformers_tokenizer_counts_long_texts_without_warning_of_indexing_errors() -> None:
    long = "word " * 40
    for form in ("whole", "encode"):
        tokenizer = _TransformersLike()
        count = as_tokenizer(tokenizer if form == "whole" else tokenizer.encode)

        assert count(long) == len(tokenizer(long, verbose=False)["input_ids"]) == 42
        assert per_call_tokens(count) == 2  # special tokens, as calling it gives
        assert tokenizer.warnings == []


def test_a_tokenizer_whose_encode_takes_no_verbose_is_called_as_passed() -> None:
    class Plain:
        model_max_length = 8

        def encode(self, text: str) -> list[str]:
            return text.split()

    assert as_tokenizer(Plain().encode)("three short words") == 3
