"""Trusted one-line samples of every kind, built in code, for a worker's self-test.

Each sample says "capsa self-test". Parsing them when a worker starts proves
the parser works offline in that worker and pays its lazy imports before the
first real file arrives.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable

__all__ = ["SAMPLES", "make_pdf"]

_TEXT = "capsa self-test"


def make_pdf(pages: list[str]) -> bytes:
    """A minimal valid PDF with one line of Helvetica text per page."""
    objects: list[bytes] = []
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(len(pages)))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for i, line in enumerate(pages):
        escaped = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET".encode("latin-1", "replace")
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            f"/Resources << /Font << /F1 3 0 R >> >> /Contents {5 + 2 * i} 0 R >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1, xref)
    return bytes(out)


def _docx() -> bytes:
    import docx

    document = docx.Document()
    document.add_paragraph(_TEXT)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def _pptx() -> bytes:
    import pptx

    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = _TEXT
    buffer = io.BytesIO()
    deck.save(buffer)
    return buffer.getvalue()


def _xlsx() -> bytes:
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.append(["name", "value"])
    sheet.append([_TEXT, 1])
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


def _epub() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as book:
        book.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        book.writestr("META-INF/container.xml",
                      '<?xml version="1.0"?><container version="1.0" '
                      'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
                      '<rootfile full-path="content.opf" '
                      'media-type="application/oebps-package+xml"/></rootfiles></container>')
        book.writestr("content.opf",
                      '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" '
                      'version="3.0" unique-identifier="id"><metadata '
                      'xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:identifier id="id">x'
                      '</dc:identifier><dc:title>t</dc:title><dc:language>en</dc:language>'
                      '</metadata><manifest><item id="c" href="c.xhtml" '
                      'media-type="application/xhtml+xml"/></manifest><spine>'
                      '<itemref idref="c"/></spine></package>')
        book.writestr("c.xhtml",
                      '<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml">'
                      f"<head><title>t</title></head><body><p>{_TEXT}</p></body></html>")
    return buffer.getvalue()


def _png() -> bytes:
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("L", (520, 90), 255)
    ImageDraw.Draw(image).text((20, 20), _TEXT, fill=0, font=ImageFont.load_default(size=40))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


SAMPLES: dict[str, Callable[[], bytes]] = {
    "pdf": lambda: make_pdf([_TEXT]),
    "docx": _docx,
    "pptx": _pptx,
    "xlsx": _xlsx,
    "epub": _epub,
    "html": lambda: f"<html><body><p>{_TEXT}</p></body></html>".encode(),
    "eml": lambda: (
        "From: a@example.com\nTo: b@example.com\nSubject: test\n"
        f"MIME-Version: 1.0\nContent-Type: text/plain\n\n{_TEXT}\n"
    ).encode(),
    "rtf": lambda: ("{\\rtf1\\ansi " + _TEXT + "}").encode(),
    "png": _png,
}
