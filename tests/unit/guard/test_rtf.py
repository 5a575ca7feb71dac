"""RTF's escapes written out as characters before pandoc reads the file (`_rtf`)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capsa.guard.extractors._rtf import decode_escapes


def decoded(rtf: bytes) -> str:
    return decode_escapes(rtf).decode("utf-8")


@pytest.mark.parametrize(("rtf", "text"), [
    # the document's code page
    (rb"{\rtf1\ansi\ansicpg1251 \'cf\'f0\'e8\'e2\'e5\'f2}", "Привет"),
    (rb"{\rtf1\ansi\ansicpg1250 Za\'bf\'f3\'b3\'e6}", "Zażółć"),
    # the font's charset wins over \ansicpg (WordPad writes Czech this way)
    (rb"{\rtf1\ansi\ansicpg1252{\fonttbl{\f0\fswiss\fcharset238 Arial;}}\f0 \'c8l\'e1nek}",
     "Článek"),
    # double-byte pairs (Word's Japanese)
    (rb"{\rtf1\ansi\ansicpg932 \'82\'b1\'82\'f1\'82\'c9\'82\'bf\'82\'cd}", "こんにちは"),
    # \uN and its fallback characters: one by default, \ucN of them, a \'hh counting as one
    (rb"{\rtf1 p\'f8\u8201?n}", "pø\u2009n"),
    (rb"{\rtf1\uc2\u24180\'94\'4eabc}", "年abc"),
    (rb"{\rtf1\uc0\u8364 5}", "€5"),
    (rb"{\rtf1\u-4064?}", "\uf020"),  # a signed 16-bit number
    (rb"{\rtf1\u-10179?\u-8704?!}", "\U0001f600!"),  # a pair of surrogates: one emoji
    (rb"{\rtf1\u-8704?x}", "\ufffdx"),  # half a pair is no character
])
def test_escapes_become_the_characters_they_stand_for(rtf: bytes, text: str) -> None:
    assert text in decoded(rtf)


def test_a_group_restores_its_font_and_fallback_count() -> None:
    rtf = (rb"{\rtf1\ansicpg1252{\fonttbl{\f0 A;}{\f1\fcharset204 B;}}"
           rb"\f0 {\f1 \'e4\'e0}\'e4{\uc2\u1040??}\u1041?x}")
    out = decoded(rtf)
    assert "да" in out and "ä" in out and "А" in out and "Бx" in out and "?" not in out


def test_a_decoded_brace_or_backslash_stays_text() -> None:
    assert decoded(rb"{\rtf1 \'7b\'5c\'7d}") == "{\\rtf1 \\{\\\\\\}}"


def test_a_control_word_before_a_decoded_character_gets_its_delimiter() -> None:
    # pandoc dropped the character written straight after "\uc1"
    assert decoded(rb"{\rtf1 10\uc1\u8216\'91000}") == "{\\rtf1 10\\uc1 \u2018000}"


def test_binary_data_is_copied_untouched() -> None:
    rtf = b"{\\rtf1{\\*\\blipuid \\bin4 \\'41\xff\\u}\\'41}"
    assert decode_escapes(rtf) == b"{\\rtf1{\\*\\blipuid \\bin4 \\'41\xff\\u}A}"


def test_a_file_without_escapes_is_returned_as_it_is() -> None:
    rtf = rb"{\rtf1\ansi Plain {\b bold} text.\par}"
    assert decode_escapes(rtf) is rtf


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([
    b"{", b"}", b"\\'", b"\\'e9", b"\\'8", b"\\u", b"\\u-3", b"\\u8216", b"\\uc", b"\\uc2",
    b"\\ansicpg", b"\\ansicpg932", b"\\ansicpg99999", b"\\f", b"\\f1", b"\\fcharset128",
    b"\\fonttbl", b"\\bin", b"\\bin3", b"\\bin-5", b"\\", b"?", b" ", b"text", b"\xff\x00",
]), max_size=40))
def test_any_bytes_decode_without_raising(parts: list[bytes]) -> None:
    rtf = b"".join(parts)
    out = decode_escapes(rtf)
    assert isinstance(out, bytes)
    if b"\\'" not in rtf and b"\\u" not in rtf:
        assert out == rtf
