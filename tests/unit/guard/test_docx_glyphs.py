"""Word symbols and phonetic guides read as the characters Word draws.

python-docx yields neither a ``w:sym`` nor a ``w:ruby``: "the α coefficient"
read as "the  coefficient" and "これは漢字です" as "これはです"
(`capsa.guard.extractors._docx_glyphs`). Documents are built part by part
and read by the real `unstructured` partitioner.
"""

from __future__ import annotations

import unicodedata

import pytest
from tests.unit.guard.test_docx_notes import cite, notes_part
from tests.unit.guard.test_office_hidden import MARKER, docx, extract, paragraph, run

from capsa.guard.extractors._docx_glyphs import SYMBOL_FONT

pytest.importorskip("unstructured")


def symbol(char: str, font: str = "Symbol") -> str:
    return f'<w:r><w:sym w:font="{font}" w:char="{char}"/></w:r>'


def ruby(base: str, reading: str, *, reading_run: str | None = None) -> str:
    """A phonetic guide as Word writes it: the reading over the base, each in runs."""
    guide = reading_run if reading_run is not None else run(reading)
    return ('<w:r><w:ruby><w:rubyPr><w:rubyAlign w:val="distributeSpace"/><w:hps w:val="10"/>'
            '<w:hpsRaise w:val="18"/><w:hpsBaseText w:val="21"/><w:lid w:val="ja-JP"/>'
            f"</w:rubyPr><w:rt>{guide}</w:rt><w:rubyBase>{run(base)}</w:rubyBase>"
            "</w:ruby></w:r>")


def text_of(*runs: str) -> str:
    return extract("docx", docx(paragraph(*runs))).text


# ----------------------------------------------------------------------------- symbols


@pytest.mark.parametrize(("char", "shown"), [
    ("F061", "α"), ("F057", "Ω"), ("F044", "Δ"), ("F06D", "μ"), ("F0A3", "≤"),
    ("F0B1", "±"), ("F0B4", "×"), ("F0AE", "→"), ("F0E5", "∑"), ("F0F2", "∫"),
    ("0070", "π"),  # written without the private-use offset, as some converters do
])
def test_a_symbol_font_letter_reads_as_the_character_it_draws(char: str, shown: str) -> None:
    assert text_of(run("the "), symbol(char), run(" term")) == f"the {shown} term"


def test_a_symbol_of_another_font_reads_as_its_own_character() -> None:
    assert text_of(run("go "), symbol("2192", font="Segoe UI Symbol"), run(" on")) == "go → on"


@pytest.mark.parametrize(("char", "font"), [
    ("F0FC", "Wingdings"),  # a check mark only Wingdings knows: no character of its own
    ("F0E6", "Symbol"),     # a piece of a tall bracket
    ("zz", "Symbol"), ("", "Symbol"), ("D800", "Arial"), ("110000", "Arial"), ("1F", "Arial"),
])
def test_a_symbol_with_no_character_reads_as_nothing(char: str, font: str) -> None:
    assert MARKER.findall(text_of(run("shown1 "), symbol(char, font), run(" shown2"))) == [
        "shown1", "shown2"]


def test_the_symbol_font_table_holds_letters_only() -> None:
    assert all(len(text) == 1 and unicodedata.category(text) not in ("Co", "Cc", "Cs")
               for text in SYMBOL_FONT.values())
    assert all(unicodedata.name(SYMBOL_FONT[code]).startswith("GREEK")
               for code in [*range(0x41, 0x5B), *range(0x61, 0x7B)])


def test_a_symbol_in_a_hidden_run_stays_out() -> None:
    hidden = '<w:r><w:rPr><w:vanish/></w:rPr><w:sym w:font="Symbol" w:char="F061"/></w:r>'

    assert text_of(run("a "), hidden, run("b")) == "a b"


# --------------------------------------------------------------------- phonetic guides


def test_a_phonetic_guide_reads_as_base_then_reading() -> None:
    assert text_of(run("これは"), ruby("漢字", "かんじ"), run("です")) == "これは漢字(かんじ)です"


def test_a_guide_with_no_reading_reads_as_its_base() -> None:
    assert text_of(run("これは"), ruby("漢字", "", reading_run=""), run("です")) == "これは漢字です"


def test_a_hidden_reading_or_a_hidden_guide_stays_out() -> None:
    hidden_reading = ruby("漢字", "", reading_run=run("hidden1", "<w:vanish/>"))
    hidden_guide = ruby("hidden2", "hidden3").replace(
        "<w:r><w:ruby>", "<w:r><w:rPr><w:vanish/></w:rPr><w:ruby>", 1)

    assert MARKER.findall(text_of(run("shown1 "), hidden_reading, hidden_guide,
                                  run(" shown2"))) == ["shown1", "shown2"]
    assert "漢字" in text_of(hidden_reading)


def test_symbols_and_guides_in_a_footnote_are_read() -> None:
    body = paragraph(run("Body"), cite("footnote", 1))
    note = paragraph(run("Note "), symbol("F062"), ruby("東", "ひがし"))
    parts = notes_part("footnote", {1: note})

    assert extract("docx", docx(body, parts=parts)).text.endswith("[1] Note β東(ひがし)")


# ---------------------------------------------------------------- text in the Symbol font


def symbol_run(text: str, fonts: str = 'w:ascii="Symbol" w:hAnsi="Symbol"') -> str:
    return (f'<w:r><w:rPr><w:rFonts {fonts}/></w:rPr><w:t xml:space="preserve">{text}</w:t>'
            "</w:r>")


@pytest.mark.parametrize(("typed", "shown"), [
    ("a", "α"), ("abg", "αβγ"), ("W = 2p", "Ω = 2π"), ("\uf061\uf062", "αβ"),
    ("\uf0b7", "•"), ("x\u00e9", "ξ\u00e9"),  # a code Symbol draws nothing for stays as typed
])
def test_letters_typed_in_the_symbol_font_read_as_it_draws_them(typed: str, shown: str) -> None:
    assert text_of(run("the "), symbol_run(typed), run(" term")) == f"the {shown} term"


def test_only_a_run_whose_own_fonts_are_symbol_changes() -> None:
    east_asian_only = symbol_run("abc", 'w:eastAsia="Symbol"')

    assert text_of(run("a "), east_asian_only, run(" b")) == "a abc b"
    assert text_of(symbol_run("Symbol", 'w:ascii="Times New Roman"')) == "Symbol"
