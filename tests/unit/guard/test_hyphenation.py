"""Words a layout hyphenated at a line end read as one word, and ligatures as letters.

pdflatex's text layer splits ``Funda-`` / ``mentalgruppe`` over two lines and
writes ``Deﬁnition`` with a ligature; pypdf returns both as they are, so a
search for "fundamentalgruppe" or "definition" found nothing. The real PDFs
here are py-pdf's sample files (CC-BY-SA), copied in ``tests/realdocs``.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from capsa.guard import Attachment, extract_attachment
from capsa.guard.extractors._hyphenation import hyphenation_notes, join_hyphenated
from capsa.guard.normalize import normalize
from capsa.guard.samples import build_pdf, stream

SAMPLES = Path(__file__).parents[2] / "realdocs" / "sample-files" / "pdf"
NOTE = re.compile(r"joined (\d+) word\(s\) the layout hyphenated at a line end \((\d+) keeping")


def joined(text: str) -> str:
    return join_hyphenated([text]).pages[0]


# --- the rule, page text in and out -------------------------------------------------------


def test_a_word_broken_at_a_line_end_is_one_word_and_the_line_break_follows_it() -> None:
    mended = join_hyphenated(["keeps the funda-\nmental records of every berth"])
    assert mended.pages == ["keeps the fundamental\nrecords of every berth"]
    assert (mended.joined, mended.kept) == (1, 0)


def test_punctuation_after_the_second_piece_stays_on_the_word() -> None:
    assert joined("see the Abbil-\ndung. Then more") == "see the Abbildung.\nThen more"
    assert joined("the last word is berth-\nage.") == "the last word is berthage."


def test_a_compound_the_document_spells_with_its_hyphen_keeps_it() -> None:
    text = "a well-known harbour.\nEvery well-\nknown ship"
    assert joined(text) == "a well-known harbour.\nEvery well-known\nship"
    assert join_hyphenated([text]).kept == 1


def test_the_documents_own_spelling_is_read_on_every_page() -> None:
    mended = join_hyphenated(["a well-\nknown ship", "page two: a well-known harbour"])
    assert mended.pages[0] == "a well-known\nship"


def test_the_more_frequent_spelling_wins_when_the_document_has_both() -> None:
    text = "email, email and e-mail.\nSend the e-\nmail now"
    assert joined(text) == "email, email and e-mail.\nSend the email\nnow"


def test_a_piece_that_is_a_compound_already_keeps_its_hyphen() -> None:
    assert joined("the state-of-the-\nart method") == "the state-of-the-art\nmethod"


def test_a_soft_hyphen_at_a_line_end_always_joins() -> None:
    assert joined("a well-known ship, well\u00ad\nknown") == "a well-known ship, wellknown"
    assert joined("the funda\u00ad\nmental one") == "the fundamental\none"


def test_a_unicode_hyphen_is_a_break_like_a_hyphen_minus() -> None:
    assert joined("the funda\u2010\nmental one") == "the fundamental\none"


@pytest.mark.parametrize("text", [
    "Schwarz-\nWeiß",              # a capital after the break: a compound of names
    "pages 12-\n14",               # digits
    "version 3-\nbeta",            # a digit before the hyphen
    "the funda-\n\nmental",        # a blank line: a new paragraph
    "a list:\n- one\n- two",       # hyphens opening lines
    "a dash -\nthen words",        # a dash after a space is no broken word
    "x-\n",                        # nothing after the break
    "end-\n(note)",                # the next line opens with punctuation
    "日本-\n語",                    # a script without case
])
def test_breaks_that_are_not_a_hyphenated_word_are_left_as_they_are(text: str) -> None:
    assert join_hyphenated([text]) == ([text], 0, 0)


def test_a_word_broken_over_three_lines_is_joined_whole() -> None:
    assert joined("an ex-\ntraordi-\nnary berth") == "an extraordinary\nberth"


def test_white_space_around_the_line_end_is_taken_with_it() -> None:
    assert joined("the funda- \n   mental one") == "the fundamental\none"


def test_nothing_to_join_returns_the_pages_unchanged_and_says_nothing() -> None:
    pages = ["no breaks here", "nor-here", "nor\nhere"]
    mended = join_hyphenated(pages)
    assert mended == (pages, 0, 0)
    assert hyphenation_notes(mended) == ()


def test_the_note_counts_every_join_and_every_kept_hyphen() -> None:
    mended = join_hyphenated(["a well-known\nwell-\nknown funda-\nmental ex-\nample"])
    assert hyphenation_notes(mended) == (
        "joined 3 word(s) the layout hyphenated at a line end (1 keeping a hyphen the "
        "document spells them with)",)


_PIECES = st.sampled_from(["a", "B", "é", "1", "-", "\u00ad", "\u2010", " ", "\t", "\n", "\n\n",
                           ".", "(", "ab", "well", "known", "日"])


@given(st.lists(st.lists(_PIECES, max_size=40).map("".join), min_size=1, max_size=3))
def test_only_hyphens_and_white_space_ever_change(pages: list[str]) -> None:
    def letters(text: str) -> str:
        return re.sub(r"[\s\-\u00ad\u2010]", "", text)

    mended = join_hyphenated(pages)
    assert [letters(page) for page in mended.pages] == [letters(page) for page in pages]
    assert len(mended.pages) == len(pages)
    assert sum(page.count("\n\n") for page in mended.pages) == sum(
        page.count("\n\n") for page in pages)  # paragraphs stay paragraphs


def test_a_long_hostile_page_is_read_in_one_linear_pass() -> None:
    # every shape the pattern could backtrack over, repeated: a quadratic pass would
    # take minutes here, a linear one milliseconds
    page = ("a-" * 50_000 + "\n" + "b" * 100_000 + "\f" + "c-\n" * 30_000 + "x" * 100_000
            + "-\n" + "y" * 100_000 + "\x0b")
    mended = join_hyphenated([page])
    assert mended.joined > 0
    assert len(mended.pages[0]) <= len(page)


# --- ligatures: every format, through normalisation ---------------------------------------


@pytest.mark.parametrize(("ligature", "letters"), [
    ("\ufb00", "ff"), ("\ufb01", "fi"), ("\ufb02", "fl"), ("\ufb03", "ffi"), ("\ufb04", "ffl"),
    ("\ufb05", "st"), ("\ufb06", "st"), ("\ufb13", "\u0574\u0576"),
    ("\ufefb", "\u0644\u0627"), ("\ufedf", "\u0644"), ("\ufb2a", "\u05e9\u05c1")])
def test_a_typographic_ligature_is_normalised_to_its_letters(ligature: str, letters: str) -> None:
    assert normalize(f"de{ligature}ne") == f"de{letters}ne"


def test_other_compatibility_characters_are_left_to_nfc() -> None:
    # NFKC would fold these too, and change what they mean: only presentation forms are
    # glyphs; a form that spells a whole phrase would multiply the text, and stays
    text = "x² ½ ＡＢ ℃ ﬞ \ufdfa \ufdfd"
    assert normalize(text) == text


def test_an_arabic_word_written_in_its_shapes_reads_as_its_letters() -> None:
    shaped = "\ufe8d\ufedf\ufee0\ufeea"  # "الله" as an older PDF producer writes it
    assert normalize(shaped) == "\u0627\u0644\u0644\u0647"


# --- through the guard: PDF text layers and OCR -------------------------------------------


def _pdf_lines(lines: list[str]) -> bytes:
    shown = " ".join(f"({line}) Tj 0 -14 Td" for line in lines)
    content = f"BT /F1 12 Tf 72 720 Td 14 TL {shown} ET".encode("latin-1")
    return build_pdf([b"<< /Type /Catalog /Pages 2 0 R >>",
                      b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
                      b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
                      b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources "
                      b"<< /Font << /F1 3 0 R >> >> /Contents 5 0 R >>",
                      stream(content)])


def test_a_pdf_text_layer_with_a_hyphenated_line_end_reads_as_one_word() -> None:
    pdf = _pdf_lines(["The harbour master keeps the funda-", "mental records of every",
                      "well-known vessel and every well-", "known berth."])
    result = extract_attachment(Attachment(label="minutes.pdf", payload=pdf))
    assert "keeps the fundamental\nrecords of" in result.text
    assert "every well-known\nberth." in result.text
    assert any(NOTE.match(note) for note in result.notes)


def test_a_latex_paper_reads_its_hyphenated_words_whole() -> None:
    paper = (SAMPLES / "026-latex-multicolumn" / "multicolumn.pdf").read_bytes()
    result = extract_attachment(Attachment(label="multicolumn.pdf", payload=paper))
    assert "adipiscing" in result.text and "consectetuer" in result.text
    assert "adip-\n" not in result.text and "con-\n" not in result.text
    (note,) = [note for note in result.notes if NOTE.match(note)]
    assert NOTE.match(note).groups() == ("30", "0")  # type: ignore[union-attr]


def test_a_latex_book_reads_its_ligatures_as_letters() -> None:
    book = SAMPLES / "009-pdflatex-geotopo" / "GeoTopo-komprimiert.pdf"
    from capsa.guard import extract_many

    (result,) = list(extract_many([book]))
    text = result.text  # type: ignore[union-attr]
    assert not re.search("[\ufb00-\ufb06]", text)
    assert "Definition" in text and "Oberfläche" in text
    assert "Fundamentalgruppe" in text and "Funda-\n" not in text


def test_an_ocr_page_with_a_hyphenated_line_end_reads_as_one_word() -> None:
    pytest.importorskip("pytesseract")
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.truetype("DejaVuSans.ttf", 36)
    image = Image.new("L", (1100, 260), 255)
    draw = ImageDraw.Draw(image)
    for row, line in enumerate(["The harbour master keeps the funda-",
                                "mental records of every berth and",
                                "every well-known vessel in port."]):
        draw.text((40, 30 + row * 70), line, font=font, fill=0)
    png = io.BytesIO()
    image.save(png, "PNG")
    result = extract_attachment(Attachment(label="scan.png", payload=png.getvalue()))
    assert "fundamental\nrecords" in result.text
    assert any(NOTE.match(note) for note in result.notes)
