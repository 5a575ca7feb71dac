"""This session's readers (PowerPoint alternates, Word's embedded HTML, hyphenation,
presentation forms, PDF field appearances) against the hiding rules and the limits.

Every document is built here and extracted with `extract_attachment` on the
production pool. The words ``shown<n>`` must reach the text, ``hidden<n>``
never; a file the readers cannot read must end in a typed capsa error, within
the limits. Tests marked ``xfail(strict=True)`` state the correct behaviour of
a defect left for a file this session could not change.
"""

from __future__ import annotations

import io
import re
import zipfile
import zlib
from collections import Counter
from collections.abc import Callable

import pytest
from pypdf import PdfReader, PdfWriter
from pypdf.generic import (
    ArrayObject,
    BooleanObject,
    DecodedStreamObject,
    DictionaryObject,
    FloatObject,
    NameObject,
    NumberObject,
    StreamObject,
    TextStringObject,
)
from tests.unit.guard.test_docx_chunks import document, mht
from tests.unit.guard.test_docx_chunks import paragraph as docx_paragraph
from tests.unit.guard.test_pdf_forms import form, widget
from tests.unit.guard.test_pptx_alternates import A14, MC, box, deck, equation
from tests.unit.guard.test_pptx_alternates import run as pptx_run

from capsa.errors import IngestionRejected
from capsa.guard import Attachment, Extracted, IsolatedExtractor, extract_attachment
from capsa.guard.extractors._floors import visible_chars
from capsa.guard.extractors._hyphenation import join_hyphenated
from capsa.guard.extractors._pptx_alternates import _plain_letters
from capsa.guard.normalize import _LIGATURES, normalize
from capsa.guard.samples import build_pdf, stream

from .conftest import PARSE_LIMITS
from .test_new_readers_hiding import finishes_typed

pytest.importorskip("unstructured")
pytest.importorskip("pptx")
pytest.importorskip("docx")

MARKER = re.compile(r"\b(?:shown|hidden)\w*\d+\b")


def extracted(pool: IsolatedExtractor, label: str, payload: bytes,
              limits: object = PARSE_LIMITS) -> Extracted:
    return extract_attachment(Attachment(label=label, payload=payload), pool,
                              limits)  # type: ignore[arg-type]


def markers(pool: IsolatedExtractor, label: str, payload: bytes) -> list[str]:
    return MARKER.findall(extracted(pool, label, payload).text)


typed = finishes_typed
"""The file's text, or None when it ended in a typed capsa error other than ``raised``."""


# ------------------------------------------------------------------ PowerPoint alternates


def alternate(choice: str, requires: str = "a14", fallback: str = "",
              declare: str = f'xmlns:a14="{A14}"') -> str:
    return (f'<mc:AlternateContent xmlns:mc="{MC}"><mc:Choice {declare} '
            f'Requires="{requires}">{choice}</mc:Choice><mc:Fallback>{fallback}</mc:Fallback>'
            "</mc:AlternateContent>")


@pytest.mark.parametrize("requires", ["qq", "", "   ", "a14 qq", "mc"])
def test_a_choice_with_an_undeclared_empty_or_unknown_requirement_is_never_read(
        real_pool: IsolatedExtractor, requires: str) -> None:
    deck_bytes = deck(alternate(box(10, pptx_run("hidden1 choice")), requires,
                                box(11, pptx_run("shown1 fallback"))))
    assert markers(real_pool, "deck.pptx", deck_bytes) == ["shown1"]


def test_a_hidden_group_in_the_shown_choice_goes_whole(real_pool: IsolatedExtractor) -> None:
    group = ('<p:grpSp><p:nvGrpSpPr><p:cNvPr id="20" name="G" hidden="1"/><p:cNvGrpSpPr/>'
             "<p:nvPr/></p:nvGrpSpPr><p:grpSpPr/>" + box(21, pptx_run("hidden1 in group"))
             + "</p:grpSp>")
    payload = deck(box(2, pptx_run("shown1 title")),
                   alternate(group, fallback=box(11, pptx_run("hidden2 fallback"))))
    assert markers(real_pool, "deck.pptx", payload) == ["shown1"]


def test_equations_follow_their_shape_and_branch(real_pool: IsolatedExtractor) -> None:
    def math(word: str) -> str:
        return equation(f"<m:r><m:t>{word}</m:t></m:r>")
    payload = deck(box(2, pptx_run("shown1 title")),
                   box(3, math("hidden1"), hidden=True),                      # hidden shape
                   alternate(box(4, pptx_run("shown2 choice")),               # unshown fallback
                             fallback=box(5, math("hidden2"))),
                   alternate(box(6, pptx_run("hidden3 choice")), "zz",        # shown fallback
                             box(7, math("shown3"))))
    assert markers(real_pool, "deck.pptx", payload) == ["shown1", "shown2", "shown3"]


def test_an_alternate_inside_a_paragraph_reads_its_shown_branch(
        real_pool: IsolatedExtractor) -> None:
    # markup compatibility is resolved wherever it stands: PowerPoint shows the choice's
    # runs; python-pptx yields neither branch of an alternate among a paragraph's runs
    inline = alternate(pptx_run("shown2 choice run"),
                       fallback=pptx_run("hidden1 fallback run"))
    payload = deck(box(10, pptx_run("shown1 before ") + inline))
    assert markers(real_pool, "deck.pptx", payload) == ["shown1", "shown2"]


def test_an_alternate_among_a_text_bodys_paragraphs_reads_its_shown_branch(
        real_pool: IsolatedExtractor) -> None:
    paragraphs = alternate("<a:p>" + pptx_run("shown2 choice paragraph") + "</a:p>",
                           fallback="<a:p>" + pptx_run("hidden1 fallback") + "</a:p>")
    shape = box(10, pptx_run("shown1 first")).replace("</p:txBody>",
                                                        paragraphs + "</p:txBody>")
    unknown = alternate("<a:p>" + pptx_run("hidden2 unknown") + "</a:p>", "zz",
                        "<a:p>" + pptx_run("shown3 fallback paragraph") + "</a:p>")
    other = box(11, pptx_run("shown4 other")).replace("</p:txBody>", unknown + "</p:txBody>")
    assert markers(real_pool, "deck.pptx", deck(shape, other)) == [
        "shown1", "shown2", "shown4", "shown3"]


def test_an_alternate_inside_a_graphic_frame_leaks_no_branch(
        real_pool: IsolatedExtractor) -> None:
    table = ('<a:tbl><a:tblGrid><a:gridCol w="914400"/></a:tblGrid><a:tr h="370840"><a:tc>'
             '<a:txBody><a:bodyPr/><a:p>' + pptx_run("shown2 cell") + "</a:p></a:txBody>"
             "</a:tc></a:tr></a:tbl>")
    frame = ('<p:graphicFrame><p:nvGraphicFramePr><p:cNvPr id="30" name="T"/>'
             "<p:cNvGraphicFramePr/><p:nvPr/></p:nvGraphicFramePr><p:xfrm>"
             '<a:off x="0" y="0"/><a:ext cx="914400" cy="370840"/></p:xfrm><a:graphic>'
             '<a:graphicData uri="http://schemas.openxmlformats.org/drawingml/2006/table">'
             + alternate(table, "zz", fallback="")
             + table.replace("shown2 cell", "shown3 cell").replace(
                 "</a:p>", alternate(pptx_run(" hidden1 run"), "zz") + "</a:p>")
             + "</a:graphicData></a:graphic></p:graphicFrame>")
    found = markers(real_pool, "deck.pptx", deck(box(2, pptx_run("shown1 title")), frame))
    assert "hidden1" not in found and "shown2" not in found and "shown1" in found


@pytest.mark.parametrize("depth", [100, 300, 1000])
def test_alternates_nested_deep_resolve_or_refuse_typed(real_pool: IsolatedExtractor,
                                                        depth: int) -> None:
    nested = box(10, pptx_run("shown1 innermost"))
    for level in range(depth):
        nested = alternate(nested, fallback=box(11, pptx_run(f"hidden{level} fallback"))
                           if level < 3 else "")
    result = typed(real_pool, "deck.pptx", deck(nested))
    assert result is None or MARKER.findall(result.text) == ["shown1"]
    if depth == 100:
        assert result is not None


def test_ten_thousand_empty_alternates_then_one_with_text_stay_typed(
        real_pool: IsolatedExtractor) -> None:
    # past `_MAX_ALTERNATES` an alternate stays unread: its text is lost, never its
    # unshown branch
    empty = alternate("", "zz") * 10_000
    payload = deck(box(2, pptx_run("shown1 title")), empty,
                   alternate(box(12, pptx_run("shownlate1 past the cap")), "zz",
                             box(13, pptx_run("shownlate2 past the cap"))),
                   alternate(box(14, pptx_run("hidden1 past the cap")), "zz"))
    result = typed(real_pool, "deck.pptx", payload)
    assert result is None or "hidden1" not in result.text


def test_an_equation_nested_deep_finishes_typed(real_pool: IsolatedExtractor) -> None:
    inner = "<m:r><m:t>x</m:t></m:r>"
    for _ in range(200):
        inner = f"<m:f><m:num>{inner}</m:num><m:den><m:r><m:t>y</m:t></m:r></m:den></m:f>"
    payload = deck(box(2, pptx_run("shown1 title")),
                   alternate(box(10, equation(inner)), fallback=""))
    result = typed(real_pool, "deck.pptx", payload)  # typed, within the parse's own limits
    assert result is None or "shown1" in result.text


def test_math_italic_folding_touches_only_mathematical_symbols() -> None:
    styled = "\U0001d45a\U0001d450\u210e\U0001d7ce\U0001d6fc\U0001d6db\U0001d455"
    assert _plain_letters(styled) == "mch0α∂\U0001d455"  # U+1D455 is unassigned: kept
    assert _plain_letters("ﬁ² ½ ℌ") == "ﬁ² ½ ℌ"  # only the block and U+210E fold


# ------------------------------------------------------------------ Word's embedded HTML


HOSTILE_PAGE = (
    "<html><head><style>p{color:red} hidden1style</style><script>var x='hidden2';</script>"
    "<title>hidden3title</title></head><body><p>shown1 visible</p><!-- hidden4 -->"
    "<p hidden>hidden5 attr</p><div style='display:none'>hidden6</div>"
    "<template><p>hidden7 template</p></template><noscript>hidden8</noscript>"
    "<div style='visibility:hidden'>hidden9</div><input type=hidden value='hidden10'>"
    "<details><summary>shown2 summary</summary>shown3 body</details></body></html>")


@pytest.mark.parametrize("kind", ["text/html", "multipart/related"])
def test_a_hostile_html_chunk_keeps_what_the_html_reader_keeps(
        real_pool: IsolatedExtractor, kind: str) -> None:
    chunk = HOSTILE_PAGE.encode() if kind == "text/html" else mht(HOSTILE_PAGE)
    payload = document({"c1": (kind, chunk)}, docx_paragraph("shown0 body") + "{chunk:c1}")
    as_file = markers(real_pool, "page.html", HOSTILE_PAGE.encode())
    assert markers(real_pool, "merged.docx", payload) == ["shown0", *as_file]
    assert as_file == ["shown1", "shown2", "shown3"]


@pytest.mark.parametrize(("body", "expected"), [
    ('<w:p><w:r><w:rPr><w:vanish/></w:rPr>{chunk:c1}</w:r></w:p>', []),
    ('<w:moveFrom w:id="3" w:author="x">{chunk:c1}</w:moveFrom>', []),
    ('<w:ins w:id="3" w:author="x">{chunk:c1}</w:ins>', ["shown1"]),
    ("<w:sdt><w:sdtContent>{chunk:c1}</w:sdtContent></w:sdt>", ["shown1"]),
    ("<w:sdt><w:sdtPr>{chunk:c1}</w:sdtPr><w:sdtContent><w:p/></w:sdtContent></w:sdt>", []),
    ('<w:p><w:pPr>{chunk:c1}</w:pPr></w:p>', []),
    (f'<mc:AlternateContent xmlns:mc="{MC}"><mc:Choice Requires="w14" xmlns:w14="http://'
     'schemas.microsoft.com/office/word/2010/wordml"><w:p/></mc:Choice><mc:Fallback>'
     "{chunk:c1}</mc:Fallback></mc:AlternateContent>", []),
])
def test_a_chunk_is_read_only_where_word_shows_it(real_pool: IsolatedExtractor, body: str,
                                                  expected: list[str]) -> None:
    word = "shown1" if expected else "hidden1"
    payload = document({"c1": ("text/html", f"<p>{word} chunk</p>".encode())},
                       docx_paragraph("shown0 body") + body)
    assert markers(real_pool, "merged.docx", payload) == ["shown0", *expected]


def archive(parts: list[str], extra: str = "", boundary: str = "B") -> bytes:
    """A multipart/related web archive of `parts` (each its headers, a blank line, a body)."""
    text = (f'MIME-Version: 1.0\r\nContent-Type: multipart/related; boundary="{boundary}"'
            f"{extra}\r\n\r\n")
    text += "".join(f"--{boundary}\r\n{part}\r\n" for part in parts)
    return (text + f"--{boundary}--\r\n").encode("latin-1")


def html_part(body: str, charset: str = "utf-8", cid: str | None = None) -> str:
    ident = f"Content-ID: <{cid}>\r\n" if cid else ""
    return f'Content-Type: text/html; charset="{charset}"\r\n{ident}\r\n{body}'


@pytest.mark.parametrize(("charset", "page"), [
    # a browser knows neither label: the bytes are the page's own, and the comment hides
    ("unicode_escape", r"<p>shown1 page</p><!-- \x2d\x2d\x3e<p>hidden1 out</p><!-- -->"),
    ("raw_unicode_escape", r"<p>shown1 page</p><!-- \u002d\u002d\u003e<p>hidden1</p> -->"),
    ("utf-7", "<p>shown1 page</p><!-- +AC0ALQA+-<p>hidden1 seven</p><!-- -->"),
])
def test_an_archive_charset_no_browser_knows_cannot_rewrite_the_page(
        real_pool: IsolatedExtractor, charset: str, page: str) -> None:
    payload = document({"c1": ("multipart/related", archive([html_part(page, charset)]))},
                       "{chunk:c1}")
    assert markers(real_pool, "merged.docx", payload) == ["shown1"]


def test_an_archive_in_a_replacement_encoding_is_left_out_and_named(
        real_pool: IsolatedExtractor) -> None:
    payload = document({"c1": ("multipart/related",
                               archive([html_part("<p>hidden1 page</p>", "iso-2022-kr")]))},
                       docx_paragraph("shown0 body") + "{chunk:c1}")
    result = extracted(real_pool, "merged.docx", payload)
    assert MARKER.findall(result.text) == ["shown0"]
    assert any("left out 1 embedded part" in note for note in result.notes)


def test_an_archive_in_utf16_is_read_as_its_header_says(real_pool: IsolatedExtractor) -> None:
    page = "<p>shown1 über</p>".encode("utf-16-le")
    raw = (b'MIME-Version: 1.0\r\nContent-Type: multipart/related; boundary="B"\r\n\r\n--B\r\n'
           b'Content-Type: text/html; charset="utf-16"\r\nContent-Transfer-Encoding: base64'
           b"\r\n\r\n" + __import__("base64").b64encode(page) + b"\r\n--B--\r\n")
    payload = document({"c1": ("multipart/related", raw)}, "{chunk:c1}")
    assert "shown1 über" in extracted(real_pool, "merged.docx", payload).text


def test_an_archive_is_read_from_the_root_its_start_names(real_pool: IsolatedExtractor) -> None:
    raw = archive([html_part("<p>hidden1 resource page</p>", cid="frame"),
                   html_part("<p>shown1 root page</p>", cid="root")],
                  extra='; type="text/html"; start="<root>"')
    payload = document({"c1": ("multipart/related", raw)}, "{chunk:c1}")
    assert markers(real_pool, "merged.docx", payload) == ["shown1"]


@pytest.mark.parametrize("raw", [
    archive([html_part("<p>hidden1 page</p>")]).replace(b'boundary="B"', b'boundary="Z"'),
    archive([html_part("<p>hidden1 page</p>")], extra='; start="<nowhere>"'),
    b"MIME-Version: 1.0\r\nContent-Type: multipart/related\r\n\r\n--B\r\n\r\n<p>hidden1</p>",
    b"\x00\xff" * 5000,
])
def test_a_broken_archive_is_left_out_and_named(real_pool: IsolatedExtractor,
                                                raw: bytes) -> None:
    payload = document({"c1": ("multipart/related", raw)},
                       docx_paragraph("shown0 body") + "{chunk:c1}")
    result = extracted(real_pool, "merged.docx", payload)
    assert MARKER.findall(result.text) == ["shown0"]
    assert any("left out 1 embedded part" in note for note in result.notes)


def test_an_archive_of_forty_thousand_parts_is_read(real_pool: IsolatedExtractor) -> None:
    # the default e-mail policy parsed each part's headers into objects: 2.5 MB of tiny
    # parts took 20 s of the 20 s allowed
    raw = archive([html_part("<p>shown1 root</p>")]
                  + [html_part(f"<p>p{n}</p>") for n in range(40_000)])
    payload = document({"c1": ("multipart/related", raw)}, "{chunk:c1}")
    assert markers(real_pool, "merged.docx", payload) == ["shown1"]


def test_multiparts_nested_thousands_deep_end_typed(real_pool: IsolatedExtractor) -> None:
    body = html_part("<p>shown1 nested</p>")
    for level in range(3000):
        body = (f'Content-Type: multipart/related; boundary="b{level}"\r\n\r\n--b{level}\r\n'
                f"{body}\r\n--b{level}--")
    payload = document({"c1": ("multipart/related", ("MIME-Version: 1.0\r\n" + body).encode())},
                       docx_paragraph("shown0 body") + "{chunk:c1}")
    result = typed(real_pool, "merged.docx", payload)
    assert result is None or MARKER.findall(result.text) in (["shown0"], ["shown0", "shown1"])


@pytest.mark.parametrize(("target", "kind"), [
    ("document.xml", None), ("styles.xml", None),
    ("image.png", "image/png"),
])
def test_a_chunk_naming_a_part_that_is_no_page_is_left_out(
        real_pool: IsolatedExtractor, target: str, kind: str | None) -> None:
    chunks = {"c1": (kind, b"\x89PNG\r\n\x1a\n")} if kind else {}
    payload = document(chunks, docx_paragraph("shown0 body") + '<w:altChunk r:id="rX"/>')
    relation = ('<Relationship Id="rX" Type="http://schemas.openxmlformats.org/officeDocument/'
                f'2006/relationships/aFChunk" Target="{target if not kind else "chunk-c1.bin"}"/>')
    payload = _rewrite(payload, "word/_rels/document.xml.rels",
                       lambda data: data.replace(b"</Relationships>",
                                                 relation.encode() + b"</Relationships>"))
    result = extracted(real_pool, "merged.docx", payload)
    assert MARKER.findall(result.text) == ["shown0"]
    assert any("left out 1 embedded part" in note for note in result.notes)


def test_one_page_named_by_many_chunks_is_parsed_once_and_refused_by_its_text(
        real_pool: IsolatedExtractor) -> None:
    page = "".join(f"<p>shown{n} line of the page</p>" for n in range(1000)).encode()
    payload = document({"c1": ("text/html", page)}, "{chunk:c1}" * 400)
    # the page is parsed once, so the file ends at the text limit, not the time limit
    with pytest.raises(IngestionRejected) as refused:
        extracted(real_pool, "merged.docx", payload)
    assert refused.value.reason == "text_too_long"


def _rewrite(payload: bytes, name: str, change: Callable[[bytes], bytes]) -> bytes:
    source = zipfile.ZipFile(io.BytesIO(payload))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            data = source.read(info)
            target.writestr(info, change(data) if info.filename == name else data)
    return out.getvalue()


# ------------------------------------------------------------------------- hyphenation


@pytest.mark.parametrize("page", [
    "a" * 2_000_000 + "-",
    "a-" + " " * 2_000_000 + "\n",
    "a-" * 1_000_000 + "\nb",
    ("a-" + " \t" * 50 + "x ") * 20_000 + "\n",
    "x-\n" * 600_000 + "y",
    "a-" + "\t" * 1_000_000 + "\n" + "\t" * 1_000_000 + "b",
    "-\n" * 1_000_000,
    "ab-\nc" + "!" * 2_000_000,
])
def test_adversarial_pages_join_in_one_linear_pass(page: str) -> None:
    # a pattern that backtracked would not finish on these in any useful time
    mended = join_hyphenated([page])
    assert len(mended.pages[0]) <= len(page)


@pytest.mark.parametrize("page", [
    "كتا-\nب",          # Arabic has no case: never joined
    "עבר-\nית",
    "Schwarz-\nWeiß",
    "pages 12-\n14",
    "ab\u00ad",          # a soft hyphen at a page's end stays (the next page is another)
    "one -\ntwo",         # a dash after a space is no word's
])
def test_joins_never_touch_what_is_not_a_lower_case_continuation(page: str) -> None:
    assert join_hyphenated([page, "next page"]).pages == [page, "next page"]


def test_a_join_adds_no_character_and_only_removes_the_break() -> None:
    pages = ["Do not-\nice the pay-\nload. Send no-\nthing", "well-\nknown and well-known"]
    mended = join_hyphenated(pages)
    for before, after in zip(pages, mended.pages, strict=True):
        kept, had = Counter(after.split()), Counter(before.split())
        assert not Counter("".join(after.split())) - Counter("".join(before.split()))
        assert kept != had
    assert mended.pages == ["Do notice\nthe payload.\nSend nothing",
                            "well-known\nand well-known"]


def _lines_pdf(lines: list[str]) -> bytes:
    shown = " ".join(f"({line}) Tj 0 -14 Td" for line in lines)
    content = f"BT /F1 10 Tf 72 760 Td 12 TL {shown} ET".encode("latin-1")
    return build_pdf([b"<< /Type /Catalog /Pages 2 0 R >>",
                      b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
                      b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
                      b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 99999] /Resources "
                      b"<< /Font << /F1 3 0 R >> >> /Contents 5 0 R >>",
                      stream(content)])


def test_the_pdf_floor_never_refuses_a_page_its_joined_text_fits(
        real_pool: IsolatedExtractor) -> None:
    payload = _lines_pdf(["xx-"] * 2000 + ["xx"])
    reader = PdfReader(io.BytesIO(payload))
    raw = reader.pages[0].extract_text()
    joined = join_hyphenated([raw.strip()]).pages[0]
    assert len(joined) < visible_chars(raw)  # the floor counts more than will remain
    limits = PARSE_LIMITS.model_copy(update={"max_text_chars": len(joined) + 50})
    assert "xxxx" in extracted(real_pool, "column.pdf", payload, limits).text


# ---------------------------------------------------------------- presentation forms


def test_presentation_forms_never_break_the_floor_invariant() -> None:
    contexts = ["", "a", "\n", " ", "\u0627", "\u064b", "e\u0301", "\u200d", "\t"]
    for code in _LIGATURES:
        for before in contexts:
            for after in contexts:
                for times in (1, 3):
                    text = before + chr(code) * times + after
                    assert visible_chars(text) <= len(normalize(text)), hex(code)
    assert max(len(normalize(chr(code) * 1000)) for code in _LIGATURES) <= 3000


# ------------------------------------------------------------------- PDF appearances


def _with(appearance: object, *, resources: DictionaryObject | None = None,
          need: object = None, value: str = "hidden1 instructions") -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(form(widget("Name", value)))))
    field = writer.pages[0]["/Annots"][0].get_object()
    if isinstance(appearance, bytes):
        made = DecodedStreamObject()
        made.set_data(appearance)
        made.update({NameObject("/Type"): NameObject("/XObject"),
                     NameObject("/Subtype"): NameObject("/Form"),
                     NameObject("/BBox"): ArrayObject(FloatObject(n) for n in (0, 0, 200, 20))})
        if resources is not None:
            made[NameObject("/Resources")] = resources
        appearance = made
    field[NameObject("/AP")] = DictionaryObject({NameObject("/N"): writer._add_object(
        appearance)})  # type: ignore[arg-type]
    if need is not None:
        writer._root_object["/AcroForm"].get_object()[NameObject("/NeedAppearances")] = (
            writer._add_object(need) if isinstance(need, NumberObject) else need)
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def test_an_appearance_that_is_no_stream_is_taken_as_drawn(
        real_pool: IsolatedExtractor) -> None:
    payload = _with(NumberObject(7), value="shown1 value")
    assert "shown1 value" in extracted(real_pool, "form.pdf", payload).text


def test_a_compressed_appearance_bomb_ends_typed(real_pool: IsolatedExtractor) -> None:
    bomb = StreamObject()
    bomb._data = zlib.compress(b" " * (60 << 20), 9)
    bomb.update({NameObject("/Filter"): NameObject("/FlateDecode"),
                 NameObject("/Type"): NameObject("/XObject"),
                 NameObject("/Subtype"): NameObject("/Form")})
    result = typed(real_pool, "form.pdf", _with(bomb, value="shown1 value"))
    assert result is None or "Application form" in result.text


@pytest.mark.parametrize(("need", "read"), [(NumberObject(0), False),
                                            (BooleanObject(True), True)])
def test_need_appearances_decides_an_empty_appearance(
        real_pool: IsolatedExtractor, need: object, read: bool) -> None:
    text = extracted(real_pool, "form.pdf", _with(b"", need=need)).text
    assert ("hidden1 instructions" in text) is read


@pytest.mark.parametrize("need", [BooleanObject(False), TextStringObject("false"),
                                  NameObject("/false")])
def test_need_appearances_that_is_not_the_boolean_true_asks_for_nothing(
        real_pool: IsolatedExtractor, need: object) -> None:
    assert "hidden1" not in extracted(real_pool, "form.pdf", _with(b"", need=need)).text


def test_an_appearance_painting_an_empty_xobject_keeps_the_value_hidden(
        real_pool: IsolatedExtractor) -> None:
    empty = DecodedStreamObject()
    empty.set_data(b"")
    empty.update({NameObject("/Type"): NameObject("/XObject"),
                  NameObject("/Subtype"): NameObject("/Form"),
                  NameObject("/BBox"): ArrayObject(FloatObject(n) for n in (0, 0, 1, 1))})
    resources = DictionaryObject({NameObject("/XObject"): DictionaryObject(
        {NameObject("/Fm1"): empty})})
    payload = _with(b"q /Fm1 Do Q", resources=resources)
    assert "hidden1" not in extracted(real_pool, "form.pdf", payload).text


@pytest.mark.xfail(strict=True, reason=(
    "_pdf_forms reads /V whenever the stored appearance shows some string: Acrobat draws "
    "the appearance ('shown1'), while pdf.js shows a text field's value in an input of its "
    "own; capsa reads the value, and the appearance's own text is not read"))
def test_a_value_the_appearance_does_not_draw_stays_out(real_pool: IsolatedExtractor) -> None:
    payload = _with(b"BT /Helv 12 Tf 2 5 Td (shown1) Tj ET")
    assert "hidden1" not in extracted(real_pool, "form.pdf", payload).text


def test_the_pptx_floor_counts_one_branch_of_a_paragraph_alternate(
        real_pool: IsolatedExtractor) -> None:
    words = " ".join(["shown1"] + ["word"] * 6_000)  # about 24,000 visible characters
    branches = alternate("<a:p>" + pptx_run(words) + "</a:p>",
                         fallback="<a:p>" + pptx_run(words.replace("shown1", "hidden1")) + "</a:p>")
    shape = box(10, pptx_run("title")).replace("</p:txBody>", branches + "</p:txBody>")
    limits = PARSE_LIMITS.model_copy(update={"max_text_chars": 40_000})
    result = extracted(real_pool, "deck.pptx", deck(shape), limits)
    assert "shown1" in result.text and "hidden1" not in result.text
