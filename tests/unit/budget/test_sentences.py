from __future__ import annotations

import itertools
import json
import sys
import unicodedata

import pytest

from capsa.budget import split_sentences
from capsa.budget.sentences import _VISIBLE, MAX_UNIT_CHARS


def sentences(text: str) -> list[str]:
    return [text[start:end] for start, end in split_sentences(text)]


def test_split_sentences_splits_prose_at_full_stops() -> None:
    assert sentences("It rained. We stayed in! Did you? Yes.") == [
        "It rained.", "We stayed in!", "Did you?", "Yes."]


@pytest.mark.parametrize("text", [
    "Dr. Ng arrived late.",
    "Bring tools, e.g. a hammer and nails.",
    "He moved to the U.S. in 1990.",
    "John F. Kennedy spoke.",
    "See No. 5 for details.",
    "Mr. and Mrs. Smith met Prof. Lee at St. Mary.",
])
def test_split_sentences_keeps_abbreviations_and_initials_inside_a_sentence(text: str) -> None:
    assert sentences(text) == [text]


@pytest.mark.parametrize("text", [
    "Rear Adm. J. Edward Snyder, USN (Ret.)  (October 23, 1924 – November 4, 2007) was notable.",
    "He served in the Navy (ret.) (1950 to 1972) and then taught.",
    "The line closed (temp.) [see map] in winter.",
])
def test_a_stop_before_a_bracketed_aside_the_sentence_runs_on_after_is_no_end(text: str) -> None:
    assert sentences(text) == [text]


def test_a_bracketed_sentence_of_its_own_is_still_one() -> None:
    assert sentences("It ended (see below). (This is an aside.) Then more.") == [
        "It ended (see below).", "(This is an aside.)", "Then more."]
    assert sentences("It ended. (1950) Then more.") == ["It ended.", "(1950) Then more."]


def test_split_sentences_never_splits_decimals() -> None:
    assert sentences("The rate is EUR 0.32 per km. Pi is 3.14.") == [
        "The rate is EUR 0.32 per km.", "Pi is 3.14."]


def test_split_sentences_treats_list_items_as_units() -> None:
    text = "You need:\n- a passport\n- a visa\n1. apply online\n2. wait"
    assert sentences(text) == [
        "You need:", "- a passport", "- a visa", "1. apply online", "2. wait"]


def test_split_sentences_joins_hard_wrapped_lines() -> None:
    assert sentences("A long sentence that\nwraps onto a second line. Then another.") == [
        "A long sentence that\nwraps onto a second line.", "Then another."]


def test_split_sentences_breaks_at_blank_lines_and_headings() -> None:
    assert sentences("# Hotels\nThe cap is EUR 165\n\nTaxis are fine") == [
        "# Hotels", "The cap is EUR 165", "Taxis are fine"]


def test_split_sentences_keeps_a_fenced_code_block_whole() -> None:
    text = "Run this:\n```python\nx = 1. \ny = 2. Z\n```\nThen stop."
    assert sentences(text) == ["Run this:", "```python\nx = 1. \ny = 2. Z\n```", "Then stop."]


def test_split_sentences_splits_at_cjk_full_stops_without_spaces() -> None:
    assert sentences("東京は首都です。人口は多い！本当？はい") == [
        "東京は首都です。", "人口は多い！", "本当？", "はい"]


def test_split_sentences_keeps_quoted_sentence_ends_with_their_sentence() -> None:
    assert sentences('He said "Stop." Then he left.') == ['He said "Stop."', "Then he left."]


def test_split_sentences_treats_table_rows_as_units() -> None:
    assert sentences("item\tprice\nscanner\t1475") == ["item\tprice", "scanner\t1475"]


LICENCE = ("If You institute patent litigation against any entity alleging that the Work "
           "constitutes direct or contributory patent infringement, then any patent licenses "
           "granted to You under this License for that Work shall terminate as of the date "
           "such litigation is filed; however, a cross-claim or counterclaim in a lawsuit "
           "counts as litigation too; this applies to every Contributor of the Work.")


def test_split_sentences_splits_a_long_sentence_after_its_clauses() -> None:
    # "however," alone is shorter than a clause: it stays with what follows it
    assert len(LICENCE) > 300
    assert sentences(LICENCE) == [
        LICENCE[:LICENCE.index("infringement,") + 13],
        LICENCE[LICENCE.index("then any"):LICENCE.index("filed;") + 6],
        "however, a cross-claim or counterclaim in a lawsuit counts as litigation too;",
        "this applies to every Contributor of the Work."]



def test_split_sentences_keeps_a_short_sentence_with_a_semicolon_whole() -> None:
    text = "Trains are booked in standard class; first class needs approval. Taxis are paid."
    assert sentences(text) == ["Trains are booked in standard class; first class needs approval.",
                               "Taxis are paid."]


def test_split_sentences_keeps_short_clauses_of_a_long_sentence_together() -> None:
    # "Note:" alone is shorter than a clause: it stays with the clause after it
    first = "Note: " + "the allowance covers meals and local transport in every city " * 3 \
        + "on the list,"
    second = "and a receipt is needed for every claim over fifty euros " * 2 + "x."
    text = f"{first} {second}"
    assert len(text) > 300 and sentences(text) == [first, second]


def test_split_sentences_caps_units_without_boundaries() -> None:
    text = "word " * 1000
    spans = split_sentences(text)
    assert len(spans) > 1
    assert all(end - start <= MAX_UNIT_CHARS for start, end in spans)


@pytest.mark.parametrize("text", [
    "so we went over the agenda and then the numbers and who orders the chairs " * 40,
    json.dumps([{"city": f"City{i}", "cap": 100 + i} for i in range(200)]),
    "the committee met and discussed routine matters\n" * 60,
])
def test_a_long_stretch_without_punctuation_is_cut_into_short_pieces(text: str) -> None:
    """A transcript, scraped text or JSON: a packet can then keep the piece that matches,
    where one long unit cut to fit kept only its opening."""
    spans = split_sentences(text)
    assert len(spans) > 5 and all(end - start <= 300 for start, end in spans)
    covered = "".join(text[start:end] for start, end in spans)
    assert "".join(covered.split()) == "".join(text.split())


def test_a_long_code_block_keeps_its_longer_units() -> None:
    """Code is cut at lines, up to `MAX_UNIT_CHARS`: a function stays readable."""
    body = "".join(f"    total = total + value_{i}  # add the next value\n" for i in range(20))
    text = f"```python\ndef add():\n{body}```"
    assert 300 < len(text) < MAX_UNIT_CHARS and sentences(text) == [text]


def test_split_sentences_returns_nothing_for_blank_text() -> None:
    assert split_sentences("  \n\t ") == ()


def test_split_sentences_spans_cover_every_visible_character_in_order() -> None:
    text = "  Hi there.  How are you?\n\n- fine\n```\ncode. More\n```\n東京。はい "
    spans = split_sentences(text)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    covered = "".join(text[start:end] for start, end in spans)
    assert "".join(covered.split()) == "".join(text.split())


def test_invisible_characters_are_the_unicode_whitespace_control_and_format_ones() -> None:
    # The splitter's class is written out as ranges; it must name exactly these.
    invisible = {c for c in map(chr, range(sys.maxunicode + 1))
                 if c.isspace() or unicodedata.category(c) in ("Cc", "Cf")}
    hidden = {c for c in map(chr, range(sys.maxunicode + 1)) if not _VISIBLE.match(c)}
    if unicodedata.unidata_version == "14.0.0":
        assert hidden == invisible
    else:
        assert hidden <= invisible


def test_a_stretch_of_invisible_characters_is_no_sentence() -> None:
    text = "One. \u200b\u200d\ufeff\n\nTwo."
    assert [text[a:b] for a, b in split_sentences(text)] == ["One.", "Two."]
