"""The format extractors and the router between them.

`PlainTextExtractor`, the `Router` and the pre-flight checks that run before
any third-party parser are tested in process. The real parsers (unstructured,
pypdf, Tesseract) run only through the isolated default pool, on the trusted
samples from `capsa.guard.samples`.
"""

from __future__ import annotations

import codecs
import io
import re
import shutil
import struct
import zipfile
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from capsa.errors import ExtractionFailed, IngestionRejected
from capsa.guard import (
    Attachment,
    ExtractionLimits,
    IsolatedExtractor,
    Parsed,
    default_extractor,
    extract_attachment,
)
from capsa.guard.extractors import (
    PlainTextExtractor,
    Router,
    TesseractExtractor,
    UnstructuredExtractor,
)
from capsa.guard.samples import SAMPLES, pdf_with_text, zip_of

UNSTRUCTURED_KINDS = ["pdf", "docx", "pptx", "xlsx", "epub", "html", "eml", "rtf"]
needs_tesseract = pytest.mark.skipif(shutil.which("tesseract") is None,
                                     reason="needs the tesseract binary")


# plain text


@pytest.mark.parametrize(
    ("bom", "encoding"),
    [(codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"),
     (codecs.BOM_UTF16_BE, "utf-16-be"), (codecs.BOM_UTF32_LE, "utf-32-le"),
     (codecs.BOM_UTF32_BE, "utf-32-be")],
)
def test_plain_text_extractor_decodes_by_byte_order_mark(bom: bytes, encoding: str) -> None:
    payload = bom + "naïve café".encode(encoding)

    result = PlainTextExtractor().extract("text", None, payload, max_pages=1)

    assert _text(result) == "naïve café"
    assert isinstance(result, str) == (encoding == "utf-8")


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_plain_text_extractor_decodes_utf16_without_a_bom(encoding: str) -> None:
    payload = "naïve café, crème brûlée".encode(encoding)

    result = PlainTextExtractor().extract("text", None, payload, max_pages=1)

    assert isinstance(result, Parsed)
    assert (result.text, result.encoding) == ("naïve café, crème brûlée", encoding)


def test_plain_text_extractor_refuses_mostly_invalid_utf8_as_undecodable() -> None:
    with pytest.raises(IngestionRejected) as caught:
        PlainTextExtractor().extract("text", "text/plain", b"abc" + bytes(range(0x80, 0x100)),
                                     max_pages=1)

    assert (caught.value.stage, caught.value.reason) == ("preflight", "undecodable")
    assert "128 of 131 characters" in caught.value.detail


def test_plain_text_extractor_replaces_a_few_invalid_bytes() -> None:
    text = PlainTextExtractor().extract("text", None, "é".encode() * 40 + b"\xff", max_pages=1)

    assert text == "é" * 40 + "\ufffd"


@pytest.mark.parametrize(
    ("kind", "payload"),
    [("markdown", b"# Title\n\n- item"), ("csv", b"a,b\n1,2\n"), ("json", b'{"k": [1]}')],
)
def test_plain_text_extractor_passes_markdown_csv_and_json_through(kind: str,
                                                                   payload: bytes) -> None:
    assert PlainTextExtractor().extract(kind, None, payload, max_pages=1) == payload.decode()


def test_plain_text_extractor_self_test_reports_every_kind_ok() -> None:
    assert PlainTextExtractor().self_test() == {"csv": "ok", "json": "ok", "markdown": "ok",
                                                "text": "ok"}


@pytest.mark.parametrize(("kind", "payload", "fits"), [
    ("text", b"<!-- a comment is text here -->", True),
    ("csv", b"a,<b>\n", True),
    ("markdown", b"# Notes\n\n1 < 2, a -> b", True),
    ("markdown", b"# Notes <!-- hidden -->", False),
    ("markdown", "<b>bold</b>".encode("utf-16"), False),  # decoded before it is read
    ("markdown", None, False),  # any Markdown: it may need the parser
    ("text", None, True),
])
def test_plain_text_extractor_fits_in_process_unless_markdown_may_hold_html(
        kind: str, payload: bytes | None, fits: bool) -> None:
    assert PlainTextExtractor().fits_in_process(kind, payload) is fits


def test_router_in_process_route_asks_the_extractor_about_the_payload() -> None:
    plain = PlainTextExtractor()
    router = Router([plain])

    assert router.in_process_route("markdown", b"plain words") is plain
    assert router.in_process_route("markdown", b"<!-- hidden -->") is None
    assert router.in_process_route("markdown") is None
    assert router.in_process_route("text") is plain


# router


class Named:
    """A trusted fake extractor that says which one answered."""

    def __init__(self, name: str, kinds: set[str], report: dict[str, str] | None = None) -> None:
        self.name = name
        self.kinds = frozenset(kinds)
        self.calls: list[tuple[str, str | None, bytes, int]] = []
        if report is not None:
            self.self_test = lambda: report

    def extract(self, kind: str, media_type: str | None, payload: bytes, *, max_pages: int) -> str:
        self.calls.append((kind, media_type, payload, max_pages))
        return self.name


def test_router_sends_each_kind_to_the_first_extractor_that_names_it() -> None:
    first, second = Named("first", {"text"}), Named("second", {"text", "pdf"})
    router = Router([first, second])

    answers = [router.extract(kind, None, b"x", max_pages=1) for kind in ("text", "pdf")]

    assert answers == ["first", "second"]


def test_router_passes_media_type_payload_and_page_limit_through() -> None:
    inner = Named("only", {"pdf"})

    Router([inner]).extract("pdf", "application/pdf", b"%PDF", max_pages=9)

    assert inner.calls == [("pdf", "application/pdf", b"%PDF", 9)]


def test_router_refuses_a_kind_no_extractor_handles() -> None:
    with pytest.raises(IngestionRejected) as caught:
        Router([PlainTextExtractor()]).extract("pdf", None, b"%PDF", max_pages=1)

    assert (caught.value.stage, caught.value.reason) == ("sniff", "unsupported_type")
    assert "no extractor handles pdf" in caught.value.detail


def test_router_kinds_are_the_union_of_its_extractors() -> None:
    router = Router([Named("a", {"text"}), Named("b", {"pdf", "png"})])

    assert router.kinds == {"text", "pdf", "png"}


def test_router_merges_self_tests_and_skips_extractors_without_one() -> None:
    router = Router([Named("a", {"text"}, {"text": "ok"}), Named("b", {"csv"}),
                     Named("c", {"pdf"}, {"pdf": "ImportError: pypdf"})])

    assert router.self_test() == {"text": "ok", "pdf": "ImportError: pypdf"}


class Limited(Named):
    """A `Named` extractor that takes per-call limits, remembering the last ones."""

    def __init__(self, name: str, kinds: set[str],
                 limits: ExtractionLimits | None = None) -> None:
        super().__init__(name, kinds)
        self.limits = limits

    def with_limits(self, limits: ExtractionLimits) -> Limited:
        return Limited(self.name, set(self.kinds), limits)


def test_router_with_limits_reconfigures_only_the_extractors_that_take_limits() -> None:
    plain, limited = Named("plain", {"text"}), Limited("limited", {"png"})
    router = Router([plain, limited])
    limits = ExtractionLimits(max_pixels=5)

    configured = router.with_limits(limits)

    assert configured.routes["text"] is plain
    assert isinstance(configured.routes["png"], Limited)
    assert configured.routes["png"].limits == limits
    assert (router.routes["png"] is limited, limited.limits) == (True, None)  # unchanged


def test_tesseract_with_limits_takes_the_pixel_ceiling_and_keeps_its_own_settings() -> None:
    original = TesseractExtractor(max_pixels=40_000_000, timeout_s=7, lang="deu")

    configured = original.with_limits(ExtractionLimits(max_pixels=99))

    assert (configured.max_pixels, configured.timeout_s, configured.lang) == (99, 7, "deu")
    assert original.max_pixels == 40_000_000


def test_default_router_covers_each_kind_with_the_intended_extractor() -> None:
    router = default_extractor().inner
    assert isinstance(router, Router)

    owners = {kind: type(extractor).__name__ for kind, extractor in router.routes.items()}

    assert {owners[k] for k in ("text", "markdown", "csv", "json")} == {"PlainTextExtractor"}
    assert {owners[k] for k in UNSTRUCTURED_KINDS} == {"UnstructuredExtractor"}
    assert {owners[k] for k in ("png", "jpeg", "tiff", "webp")} == {"TesseractExtractor"}


# pre-flight checks that run before any third-party parser


def preflight_refusal(kind: str, payload: bytes, max_pages: int = 20) -> IngestionRejected:
    with pytest.raises(IngestionRejected) as caught:
        UnstructuredExtractor().extract(kind, None, payload, max_pages=max_pages)
    assert caught.value.stage == "preflight"
    return caught.value


@pytest.mark.parametrize("part", ["word/document.xml", "word/_rels/document.xml.rels",
                                  "docProps/core.xml"])
def test_unstructured_refuses_an_ooxml_part_with_a_doctype(part: str) -> None:
    payload = zip_of({"[Content_Types].xml": b"<Types/>", "word/document.xml": b"<d/>",
                        part: b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "b">]><d>&a;</d>'})

    error = preflight_refusal("docx", payload)

    assert error.reason == "forbidden_xml"
    assert repr(part) in error.detail


def test_unstructured_reads_a_whole_part_to_find_a_doctype_behind_a_long_prolog() -> None:
    document = (b'<?xml version="1.0"?><!--' + b"p" * 70_000 + b'-->'
                b'<!DOCTYPE d [<!ENTITY a "b">]><d>&a;</d>')
    payload = zip_of({"[Content_Types].xml": b"<Types/>", "word/document.xml": document})

    assert preflight_refusal("docx", payload).reason == "forbidden_xml"


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le"])
def test_unstructured_decodes_a_utf16_part_to_find_its_doctype(codec: str) -> None:
    document = '<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE d [<!ENTITY a "b">]><d/>'
    payload = zip_of({"[Content_Types].xml": b"<Types/>",
                        "word/document.xml": document.encode(codec)})

    error = preflight_refusal("docx", payload)

    assert error.reason == "forbidden_xml"
    assert "declares a DTD" in error.detail


@pytest.mark.parametrize(
    ("document", "said"),
    [
        (codecs.BOM_UTF32_BE + '<?xml version="1.0"?><d/>'.encode("utf-32-be"), "UTF-32"),
        ('<?xml version="1.0"?><d/>'.encode("utf-32-be"), "UTF-32"),
        (b'<?xml version="1.0" encoding="UTF-7"?><d/>', "'UTF-7'"),
        (b"<?xml version='1.0' encoding='ibm037'?><d/>", "'ibm037'"),
    ],
)
def test_unstructured_refuses_an_ooxml_part_in_an_encoding_it_does_not_scan(
    document: bytes, said: str,
) -> None:
    payload = zip_of({"[Content_Types].xml": b"<Types/>", "word/document.xml": document})

    error = preflight_refusal("docx", payload)

    assert error.reason == "forbidden_xml"
    assert said in error.detail


def test_unstructured_refuses_an_epub_part_that_declares_entities() -> None:
    payload = zip_of({"mimetype": b"application/epub+zip",
                        "c.xhtml": b'<!DOCTYPE html [<!ENTITY lol "lol">]><html>&lol;</html>'})

    assert preflight_refusal("epub", payload).reason == "forbidden_xml"


def test_unstructured_refuses_a_deck_with_more_slides_than_pages_allowed() -> None:
    deck = SAMPLES["pptx"]()
    with zipfile.ZipFile(io.BytesIO(deck)) as source:
        presentation = source.read("ppt/presentation.xml")
    one_id = re.search(rb"<p:sldId [^>]*/>", presentation)
    assert one_id is not None
    many = presentation.replace(one_id.group(0), one_id.group(0) * 25)
    payload = rezip(deck, {"ppt/presentation.xml": many})

    error = preflight_refusal("pptx", payload)

    assert error.reason == "too_many_pages"
    assert error.detail == "25 slides, over the limit of 20"


def test_unstructured_counts_slides_by_their_ids_not_by_part_names() -> None:
    # 25 more slide parts that no sldId names: python-pptx never reads them.
    slides = {f"ppt/slides/slide{i}.xml": b"<p:sld/>" for i in range(2, 27)}
    payload = rezip(SAMPLES["pptx"](), slides)

    assert "capsa self-test" in UnstructuredExtractor().extract("pptx", None, payload,
                                                                max_pages=20).text


def test_unstructured_refuses_a_pdf_with_more_pages_than_allowed() -> None:
    error = preflight_refusal("pdf", pdf_with_text([f"page {i}" for i in range(25)]))

    assert error.reason == "too_many_pages"
    assert error.detail == "25 pages, over the limit of 20"


def test_unstructured_extracts_a_pdf_at_the_page_limit() -> None:
    payload = pdf_with_text(["alpha", "beta"])
    parsed = UnstructuredExtractor().extract("pdf", None, payload, max_pages=2)

    assert parsed.text == "alpha\n\nbeta"


def test_unstructured_refuses_an_encrypted_pdf_without_trying_passwords() -> None:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf_with_text(["secret"]))))
    writer.encrypt("password", algorithm="RC4-128")
    buffer = io.BytesIO()
    writer.write(buffer)

    assert preflight_refusal("pdf", buffer.getvalue()).reason == "encrypted"


def test_unstructured_refuses_a_truncated_pdf_as_corrupt() -> None:
    error = preflight_refusal("pdf", pdf_with_text(["alpha"])[:200])

    assert error.reason == "corrupt"
    assert "PdfStreamError" in error.detail


def test_unstructured_refuses_malformed_ooxml_as_corrupt() -> None:
    with zipfile.ZipFile(io.BytesIO(SAMPLES["docx"]())) as sample:
        members = {name: sample.read(name) for name in sample.namelist()}
    members["word/document.xml"] = b'<?xml version="1.0"?><w:document xmlns:w="x"><w:body>'

    error = preflight_refusal("docx", zip_of(members))

    assert error.reason == "corrupt"
    assert "XMLSyntaxError" in error.detail


def test_unstructured_refuses_a_part_without_an_element_its_format_requires_as_corrupt(
        ) -> None:
    pptx = pytest.importorskip("pptx")
    from pptx.chart.data import CategoryChartData
    from pptx.enum.chart import XL_CHART_TYPE
    from pptx.util import Inches

    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[6])
    data = CategoryChartData()
    data.categories = ["North", "South"]
    data.add_series("Sales", (12, 7))
    slide.shapes.add_chart(XL_CHART_TYPE.COLUMN_CLUSTERED, Inches(1), Inches(1), Inches(4),
                           Inches(2), data)
    saved = io.BytesIO()
    deck.save(saved)
    with zipfile.ZipFile(saved) as package:
        members = {name: package.read(name) for name in package.namelist()}
    members["ppt/slides/slide1.xml"] = re.sub(  # a graphic frame must say where it stands
        rb"<p:xfrm>.*?</p:xfrm>", b"", members["ppt/slides/slide1.xml"])

    error = preflight_refusal("pptx", zip_of(members))

    assert error.reason == "corrupt"
    assert "InvalidXmlError" in error.detail and "p:xfrm" in error.detail


@pytest.mark.parametrize(("kind", "missing", "named"), [
    ("docx", "word/document.xml", "word/document.xml"),
    ("docx", "word/styles.xml", "word/styles.xml"),
    ("pptx", "ppt/presentation.xml", "no relationship"),
    ("xlsx", "xl/workbook.xml", "xl/workbook.xml"),
    ("xlsx", "[Content_Types].xml", "Not a valid XLSX"),
])
def test_unstructured_refuses_a_package_missing_a_part_it_names_as_corrupt(
        kind: str, missing: str, named: str) -> None:
    with zipfile.ZipFile(io.BytesIO(SAMPLES[kind]())) as sample:
        members = {name: sample.read(name) for name in sample.namelist() if name != missing}
    assert len(members) < len(zipfile.ZipFile(io.BytesIO(SAMPLES[kind]())).namelist())

    error = preflight_refusal(kind, zip_of(members))

    assert error.reason == "corrupt"
    assert named in error.detail


def _nested_multipart(depth: int, *, newline: str = "\n") -> bytes:
    head = "From: a@x\nTo: b@x\nMIME-Version: 1.0\n"
    body = "Content-Type: text/plain\n\ninnermost"
    for level in reversed(range(depth)):
        body = (f'Content-Type: multipart/mixed; boundary="b{level}"\n\n--b{level}\n{body}\n'
                f"--b{level}--")
    return (head + body).replace("\n", newline).encode()


@pytest.mark.parametrize("depth", [21, 300])
def test_unstructured_refuses_deeply_nested_mime(depth: int) -> None:
    error = preflight_refusal("eml", _nested_multipart(depth))

    assert error.reason == "nested_too_deep"
    assert "over the limit of 20" in error.detail


def test_unstructured_counts_nesting_with_bare_cr_line_ends() -> None:
    error = preflight_refusal("eml", _nested_multipart(25, newline="\r"))

    assert error.reason == "nested_too_deep"


def test_unstructured_counts_nesting_with_rfc2231_continued_boundaries() -> None:
    body = "Content-Type: text/plain\n\ninnermost"
    for level in reversed(range(22)):
        body = (f"Content-Type: multipart/mixed; boundary*0=\"b{level}\"; boundary*1=\"x\"\n\n"
                f"--b{level}x\n{body}\n--b{level}x--")
    error = preflight_refusal("eml", f"From: a@x\nTo: b@x\nMIME-Version: 1.0\n{body}".encode())

    assert error.reason == "nested_too_deep"


@pytest.mark.parametrize("count", [1001, 20_000])
def test_unstructured_refuses_an_email_with_too_many_parts(count: int) -> None:
    parts = "".join("--b\nContent-Type: text/plain\n\npart\n" for _ in range(count))
    payload = f'From: a@x\nTo: b@x\nContent-Type: multipart/mixed; boundary="b"\n\n{parts}--b--'

    error = preflight_refusal("eml", payload.encode())

    assert error.reason == "too_many_members"
    assert "over the limit of 1000" in error.detail


def test_unstructured_counts_parts_without_a_content_type() -> None:
    parts = "".join("--b\n\npart\n" for _ in range(1001))
    payload = f'From: a@x\nTo: b@x\nContent-Type: multipart/mixed; boundary="b"\n\n{parts}--b--'

    assert preflight_refusal("eml", payload.encode()).reason == "too_many_members"


@pytest.mark.parametrize(
    "kwargs", [{"max_pixels": 0}, {"timeout_s": 0}, {"max_pixels": -5}]
)
def test_tesseract_extractor_refuses_non_positive_settings(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="positive"):
        TesseractExtractor(**kwargs)


# real parsers, isolated: the trusted samples


@pytest.fixture(scope="module")
def full_pool() -> IsolatedExtractor:
    """The process-wide default pool (shared, never closed here)."""
    return default_extractor()


@pytest.mark.slow
def test_default_pool_self_test_passes_for_every_unstructured_kind(
    full_pool: IsolatedExtractor,
) -> None:
    report = full_pool.health["self_test"]

    assert {kind: report[kind] for kind in UNSTRUCTURED_KINDS} == dict.fromkeys(
        UNSTRUCTURED_KINDS, "ok")


@pytest.mark.slow
@pytest.mark.parametrize("kind", UNSTRUCTURED_KINDS)
def test_unstructured_extracts_each_trusted_sample_in_the_isolated_pool(
    full_pool: IsolatedExtractor, kind: str,
) -> None:
    doc = extract_attachment(Attachment(label=f"sample.{kind}", payload=SAMPLES[kind]()),
                             full_pool)

    assert doc.kind == kind
    assert "capsa self-test" in doc.text


@pytest.mark.slow
def test_unstructured_reads_spreadsheet_cells_in_the_isolated_pool(
    full_pool: IsolatedExtractor,
) -> None:
    doc = extract_attachment(Attachment(label="s.xlsx", payload=SAMPLES["xlsx"]()), full_pool)

    assert doc.text.split() == ["name", "value", "capsa", "self-test", "1"]


# real OCR, isolated


def image_sample(fmt: str) -> bytes:
    from PIL import Image

    image = Image.open(io.BytesIO(SAMPLES["png"]()))
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return buffer.getvalue()


def png_header(width: int, height: int) -> bytes:
    """A PNG that declares `width` x `height` grey pixels but carries one row."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    idat = zlib.compress(b"\x00" * (width + 1))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(
        b"IEND", b"")


def ocr(pool: IsolatedExtractor, kind: str, payload: bytes,
        limits: ExtractionLimits | None = None) -> str:
    return pool.run(kind, None, payload, limits or ExtractionLimits(), label=f"scan.{kind}")


@pytest.mark.slow
@pytest.mark.ocr
@needs_tesseract
@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "TIFF", "WEBP"])
def test_tesseract_reads_the_sample_line_in_every_image_format(
    full_pool: IsolatedExtractor, fmt: str,
) -> None:
    doc = extract_attachment(Attachment(label=f"scan.{fmt.lower()}", payload=image_sample(fmt)),
                             full_pool)

    assert doc.kind == {"PNG": "png", "JPEG": "jpeg", "TIFF": "tiff", "WEBP": "webp"}[fmt]
    assert "capsa" in doc.text.lower()


@pytest.mark.slow
@pytest.mark.ocr
@needs_tesseract
@pytest.mark.parametrize(("width", "height"), [(100_000, 100_000), (8_000, 6_000)])
def test_tesseract_refuses_too_many_pixels_before_decoding(
    full_pool: IsolatedExtractor, width: int, height: int,
) -> None:
    with pytest.raises(IngestionRejected) as caught:
        ocr(full_pool, "png", png_header(width, height))

    assert (caught.value.stage, caught.value.reason) == ("preflight", "image_too_large")
    assert str(width * height) in caught.value.detail


@pytest.mark.slow
@pytest.mark.ocr
@needs_tesseract
def test_tesseract_refuses_a_side_longer_than_tesseract_accepts(
    full_pool: IsolatedExtractor,
) -> None:
    with pytest.raises(IngestionRejected) as caught:
        ocr(full_pool, "png", png_header(40_000, 8))

    assert caught.value.reason == "image_too_large"
    assert "40000x8" in caught.value.detail


@pytest.mark.slow
@pytest.mark.ocr
@needs_tesseract
def test_tesseract_refuses_more_frames_than_pages_allowed(full_pool: IsolatedExtractor) -> None:
    from PIL import Image

    frames = [Image.new("L", (16, 16), shade) for shade in (0, 128, 255)]
    buffer = io.BytesIO()
    frames[0].save(buffer, format="TIFF", save_all=True, append_images=frames[1:])

    with pytest.raises(IngestionRejected) as caught:
        ocr(full_pool, "tiff", buffer.getvalue(), ExtractionLimits(max_pages=2))

    assert caught.value.reason == "too_many_frames"
    assert caught.value.detail == "3 frames, over the limit of 2"


@pytest.mark.slow
@pytest.mark.ocr
@needs_tesseract
def test_tesseract_opens_only_the_format_it_was_told(full_pool: IsolatedExtractor) -> None:
    with pytest.raises(IngestionRejected) as caught:
        ocr(full_pool, "png", image_sample("JPEG"))

    assert (caught.value.stage, caught.value.reason) == ("preflight", "corrupt")
    assert "UnidentifiedImageError" in caught.value.detail


def test_samples_cover_every_unstructured_kind_and_png() -> None:
    assert set(SAMPLES) == {*UNSTRUCTURED_KINDS, "png"}


def test_pdf_with_text_writes_one_page_per_line() -> None:
    payload = pdf_with_text(["one", "two (2)", "three"])

    assert payload.startswith(b"%PDF-1.4")
    assert b"/Count 3" in payload
    assert b"two \\(2\\)" in payload


def test_epub_sample_stores_its_mimetype_first() -> None:
    with zipfile.ZipFile(io.BytesIO(SAMPLES["epub"]())) as book:
        first = book.infolist()[0]

    assert (first.filename, first.compress_type) == ("mimetype", zipfile.ZIP_STORED)


def _text(result: str | Parsed) -> str:
    return result if isinstance(result, str) else result.text


# work before a refusal is proportional to the limit


def _long_docx(paragraphs: int) -> bytes:
    import docx

    document = docx.Document()
    for number in range(paragraphs):
        document.add_paragraph(f"Paragraph {number}: berth occupancy stayed under plan. " * 4)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def test_unstructured_refuses_a_docx_over_the_text_limit_before_parsing() -> None:
    extractor = UnstructuredExtractor().with_limits(ExtractionLimits(max_text_chars=5_000))

    with pytest.raises(IngestionRejected) as caught:
        extractor.extract("docx", None, _long_docx(400), max_pages=20)

    assert (caught.value.stage, caught.value.reason) == ("text", "text_too_long")
    assert "refused before it was all parsed" in caught.value.detail
    assert "over the limit of 5000 (max_text_chars)" in caught.value.detail


def test_unstructured_docx_text_floor_never_refuses_what_the_parser_would_accept() -> None:
    payload = _long_docx(40)
    text = UnstructuredExtractor().extract("docx", None, payload, max_pages=20).text
    exact = ExtractionLimits(max_text_chars=len(text))

    parsed = UnstructuredExtractor().with_limits(exact).extract("docx", None, payload,
                                                                max_pages=20)

    assert parsed.text == text


def _scanned_pdf() -> bytes:
    from PIL import Image, ImageDraw

    page = Image.new("L", (1200, 400), 255)
    ImageDraw.Draw(page).text((40, 150), "NORTHWIND SCANNED NOTICE", fill=0,
                              font_size=64)
    out = io.BytesIO()
    page.save(out, format="PDF", resolution=150)
    return out.getvalue()


def test_unstructured_refuses_a_scanned_pdf_saying_ocr_is_off() -> None:
    with pytest.raises(IngestionRejected) as caught:
        UnstructuredExtractor(ocr_pdf=False).extract("pdf", None, _scanned_pdf(), max_pages=5)

    assert (caught.value.stage, caught.value.reason) == ("text", "no_text")
    assert "no text layer" in caught.value.detail
    assert "OCR is turned off (ocr_pdf=False)" in caught.value.detail


@pytest.mark.ocr
@pytest.mark.skipif(shutil.which("tesseract") is None, reason="needs the tesseract binary")
def test_unstructured_reads_a_scanned_pdf_by_ocr_and_notes_it() -> None:
    parsed = UnstructuredExtractor().extract("pdf", None, _scanned_pdf(), max_pages=5)

    assert isinstance(parsed, Parsed)
    assert "NORTHWIND" in parsed.text
    assert parsed.notes == ("OCR (Tesseract) ran on 1 of 1 pages that have no text layer "
                            "and found text on 1",)


def test_unstructured_opens_a_pdf_that_has_only_an_owner_password() -> None:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf_with_text(["capsa owner lock"]))))
    writer.encrypt(user_password="", owner_password="owner", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)

    assert "capsa owner lock" in UnstructuredExtractor().extract(
        "pdf", None, out.getvalue(), max_pages=5).text


def test_unstructured_refuses_a_pdf_that_needs_a_user_password() -> None:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf_with_text(["secret"]))))
    writer.encrypt(user_password="user", owner_password="owner", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)

    error = preflight_refusal("pdf", out.getvalue())

    assert error.reason == "encrypted"
    assert "needs a user password" in error.detail


def test_unstructured_keeps_a_line_break_inside_a_table_cell_as_a_space() -> None:
    page = (b"<html><body><table><tr><td>answer<br/>questions</td><td>file\nreports</td>"
            b"</tr></table></body></html>")

    parsed = UnstructuredExtractor().extract("html", None, page, max_pages=5)

    assert parsed.text == "answer questions\tfile reports"


def rezip(archive: bytes, replacements: dict[str, bytes]) -> bytes:
    """A copy of `archive` with some members replaced and others added."""
    with zipfile.ZipFile(io.BytesIO(archive)) as source:
        members = {name: source.read(name) for name in source.namelist()}
    return zip_of({**members, **replacements})


def test_every_partial_output_warning_capsa_trusts_is_still_in_pypdf() -> None:
    # The templates are matched exactly: one that pypdf renamed would never match again.
    import pypdf

    from capsa.guard.extractors.unstructured import _PARTIAL_WARNINGS

    root = Path(pypdf.__file__).parent
    for logger, template in _PARTIAL_WARNINGS:
        source = (root / (logger.removeprefix("pypdf.").replace(".", "/") + ".py")).read_text()
        flattened = re.sub(r'"\s*\n\s*"', "", source)  # join implicitly concatenated literals
        assert template in flattened, (logger, template)


@needs_tesseract
@pytest.mark.slow
def test_tesseract_past_its_own_timeout_is_a_timeout_with_the_limit() -> None:
    image = Attachment(label="scan.png", payload=SAMPLES["png"]())
    with pytest.raises(ExtractionFailed) as failed:
        extract_attachment(image, TesseractExtractor(timeout_s=0.001))
    assert failed.value.cause == "timeout"
    assert "past its limit of 0.001 s" in failed.value.detail
    assert failed.value.detail.startswith("Tesseract ran ")


_ENCODINGS = ("utf-8", "utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be")


@given(before=st.binary(max_size=64), after=st.binary(max_size=64),
       word=st.sampled_from(["DOCTYPE", "ENTITY", "doctype", "EnTiTy"]),
       encoding=st.sampled_from(_ENCODINGS))
def test_the_declaration_prefilter_never_hides_what_the_scan_would_refuse(
        before: bytes, after: bytes, word: str, encoding: str) -> None:
    from capsa.guard.extractors.unstructured import _declaration_pattern, _may_declare

    data = before + f"<!{word}".encode(encoding) + after
    assert _declaration_pattern(word.upper()).search(data)
    assert _may_declare(data)


_PIECES = st.sampled_from([b"<", b"!", b"\x00", b"\x00\x00\x00", b"DOCTYPE", b"ENTITY",
                           b"D\x00O\x00C\x00", b"d", b" ", b"\xff\xfe"])


@given(data=st.lists(_PIECES, max_size=40).map(b"".join))
def test_whatever_the_scan_refuses_passes_the_prefilter(data: bytes) -> None:
    from capsa.guard.extractors.unstructured import _declaration_pattern, _may_declare

    refused = any(_declaration_pattern(word).search(data) for word in ("DOCTYPE", "ENTITY"))
    assert _may_declare(data) or not refused
