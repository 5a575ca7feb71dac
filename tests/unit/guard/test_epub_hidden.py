"""EPUB chapters lose the elements they declare hidden before pandoc reads them.

pandoc, which unstructured converts an EPUB with, keeps no attribute of a
``<p>``, ``<li>``, ``<em>`` or ``<blockquote>``, so a hidden one reached the
model. `capsa.guard.extractors._epub_hidden` takes them out of each chapter
first, by the rule HTML uses. These run the real partitioner (and pandoc) in
this process, through `UnstructuredExtractor`; the books are built here.
"""

from __future__ import annotations

import io
import zipfile

import pytest

from capsa.errors import IngestionRejected
from capsa.guard import Attachment, extract_attachment
from capsa.guard.archive import open_inspected
from capsa.guard.extractors import UnstructuredExtractor
from capsa.guard.extractors._epub_hidden import PrunedBook, drop_hidden_chapters
from capsa.guard.limits import ExtractionLimits
from capsa.guard.port import Parsed
from capsa.guard.samples import epub_book, epub_chapters, epub_with

pytest.importorskip("unstructured")

NOTE = ("left out {} element(s) the page marks hidden (the hidden attribute, or display:none "
        "or visibility:hidden in its style): a reader never sees them")


def extract(payload: bytes) -> Parsed:
    return UnstructuredExtractor().extract("epub", None, payload, max_pages=5)


def chapter(body: str, *, head: str = "", prologue: str = '<?xml version="1.0"?>') -> bytes:
    return (f'{prologue}<html xmlns="http://www.w3.org/1999/xhtml"><head><title>t</title>'
            f"{head}</head><body><p>Opening line.</p>{body}<p>Closing line.</p></body></html>"
            ).encode()


def book(body: str, **kwargs: str) -> bytes:
    return epub_with(epub_book(), {"c.xhtml": chapter(body, **kwargs)})


def pruned(payload: bytes, *, max_bytes: int = 10_000_000) -> PrunedBook:
    with open_inspected(payload, ExtractionLimits(), label="b.epub") as archive:
        return drop_hidden_chapters(payload, archive, max_bytes=max_bytes)


@pytest.mark.parametrize(("body", "expected"), [
    ('<p hidden="hidden">hidden1 words</p>', "Opening line.\n\nClosing line."),
    ('<p style="display:none">hidden1 words</p>', "Opening line.\n\nClosing line."),
    ('<p style="visibility:hidden">hidden1 words</p>', "Opening line.\n\nClosing line."),
    ('<p style="di\\73 play: none">hidden1 words</p>', "Opening line.\n\nClosing line."),
    ('<blockquote style="display:none"><p>hidden1 words</p></blockquote>',
     "Opening line.\n\nClosing line."),
    ('<ul><li style="display:none">hidden1 words</li><li>Item.</li></ul>',
     "Opening line.\n\nItem.\n\nClosing line."),
    ('<p>Before <em style="display:none">hidden1</em> after.</p>',
     "Opening line.\n\nBefore after.\n\nClosing line."),
    ('<p>Before <span hidden="">hidden1</span> after.</p>',
     "Opening line.\n\nBefore after.\n\nClosing line."),
])
def test_epub_element_hidden_by_its_attributes_is_left_out_and_its_tail_kept(
        body: str, expected: str) -> None:
    parsed = extract(book(body))

    assert parsed.text == expected
    assert parsed.notes == (NOTE.format(1),)


@pytest.mark.parametrize("shown", [
    'hidden="until-found"', 'style="display:block"', 'class="hidden"', 'aria-hidden="true"',
    'HIDDEN="hidden"',  # XHTML is XML: attribute names are case-sensitive, as a reader reads
])
def test_epub_element_a_reader_can_see_is_kept(shown: str) -> None:
    parsed = extract(book(f"<p {shown}>shown1 words</p>"))

    assert "shown1 words" in parsed.text
    assert parsed.notes == ()


def test_epub_hidden_elements_of_every_chapter_are_counted_in_one_note() -> None:
    two = epub_chapters([["One"], ["Two"]])
    payload = epub_with(two, {"c.xhtml": chapter('<p hidden="">hidden1</p>'),
                              "c2.xhtml": chapter('<div hidden=""><p style="display:none">'
                                                  'hidden2</p></div><p hidden="">hidden3</p>')})

    parsed = extract(payload)

    assert "hidden" not in parsed.text
    assert parsed.notes == (NOTE.format(3),)


def test_epub_with_nothing_hidden_reaches_pandoc_as_the_same_bytes() -> None:
    payload = book("<p>Middle <em>line</em>.</p>")

    assert pruned(payload).payload is payload
    assert extract(payload).text == "Opening line.\n\nMiddle line.\n\nClosing line."


def test_epub_rewritten_book_keeps_mimetype_first_and_stored() -> None:
    payload = pruned(book('<p hidden="">hidden1</p>')).payload

    with zipfile.ZipFile(io.BytesIO(payload)) as rewritten:
        first = rewritten.infolist()[0]
        assert (first.filename, first.compress_type) == ("mimetype", zipfile.ZIP_STORED)
        assert b"hidden1" not in rewritten.read("c.xhtml")


def test_epub_chapter_with_a_doctype_and_named_entities_keeps_them() -> None:
    doctype = ('<?xml version="1.0"?><!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.1//EN" '
               '"http://www.w3.org/TR/xhtml11/DTD/xhtml11.dtd">')
    payload = book('<p>A&nbsp;b</p><p hidden="">hidden1</p>', prologue=doctype)

    rewritten = pruned(payload).payload
    with zipfile.ZipFile(io.BytesIO(rewritten)) as book_zip:
        assert b"A&nbsp;b" in book_zip.read("c.xhtml")
    assert "hidden1" not in extract(payload).text


def test_epub_style_and_script_text_does_not_reach_the_text() -> None:
    parsed = extract(book("<style>p { color: red } style1</style><script>script1</script>",
                          head="<style>style2 {}</style><script>script2</script>"))

    assert parsed.text == "Opening line.\n\nClosing line."


def test_epub_document_outside_the_spine_is_left_alone() -> None:
    """pandoc reads the spine only: a hidden element elsewhere is neither read nor counted."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(epub_book()), "r") as source, \
            zipfile.ZipFile(buffer, "w") as out:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "content.opf":
                data = data.replace(b"</manifest>", b'<item id="n" href="nav.xhtml" '
                                    b'media-type="application/xhtml+xml"/></manifest>')
            out.writestr(info.filename, data, compress_type=info.compress_type)
        out.writestr("nav.xhtml", chapter('<nav hidden="">hidden1</nav>'))
    payload = buffer.getvalue()

    assert pruned(payload).payload is payload
    assert extract(payload).notes == ()


# ------------------------------------------------------------------------------ hostile


def test_epub_chapter_not_well_formed_that_hides_an_element_is_refused_as_corrupt() -> None:
    payload = epub_with(epub_book(), {"c.xhtml": b'<html><body><p>a&nbsp;b<p hidden>hidden1'
                                                 b"</body></html>"})

    with pytest.raises(IngestionRejected) as refused:
        extract(payload)

    assert refused.value.reason == "corrupt"
    assert "'c.xhtml' is not well-formed XML" in refused.value.detail


def test_epub_chapter_not_well_formed_that_hides_nothing_reaches_pandoc_unchanged() -> None:
    payload = epub_with(epub_book(), {"c.xhtml": b"<html><body><p>a&nbsp;b</p></body></html>"})

    assert pruned(payload).payload is payload
    assert extract(payload).text == "a b"


def test_epub_package_document_not_well_formed_is_refused_as_corrupt() -> None:
    payload = epub_with(epub_book(), {"content.opf": b"<package><manifest></package>"})

    with pytest.raises(IngestionRejected) as refused:
        extract(payload)

    assert refused.value.reason == "corrupt"


def test_epub_manifest_pointing_at_a_missing_member_is_refused_as_corrupt() -> None:
    opf = zipfile.ZipFile(io.BytesIO(epub_book())).read("content.opf")
    payload = epub_with(epub_book(), {"content.opf": opf.replace(b'href="c.xhtml"',
                                                                 b'href="gone.xhtml"')})

    assert pruned(payload).payload is payload
    with pytest.raises(IngestionRejected) as refused:
        extract_attachment(Attachment(label="b.epub", media_type="application/epub+zip",
                                      payload=payload), UnstructuredExtractor())

    assert refused.value.reason == "corrupt"
    assert refused.value.label == "b.epub"
    assert "gone.xhtml" in refused.value.detail


def test_epub_without_its_package_document_is_refused_as_corrupt() -> None:
    with zipfile.ZipFile(io.BytesIO(epub_book())) as source:
        members = {info.filename: source.read(info) for info in source.infolist()}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as book_zip:
        for name, data in members.items():
            if name != "content.opf":
                book_zip.writestr(name, data)

    with pytest.raises(IngestionRejected) as refused:
        extract(buffer.getvalue())

    assert refused.value.reason == "corrupt"
    assert "content.opf" in refused.value.detail


def test_epub_rewrite_longer_than_the_uncompressed_limit_is_refused() -> None:
    payload = book('<p hidden="">hidden1</p><p>' + ">" * 10_000 + "</p>")
    declared = sum(i.file_size for i in zipfile.ZipFile(io.BytesIO(payload)).infolist())

    with pytest.raises(IngestionRejected) as refused:
        pruned(payload, max_bytes=declared + 100)  # "&gt;" is four bytes for one

    assert refused.value.reason == "archive_too_large"
