"""Generate capsa's sample corpus, byte for byte the same on every run.

The prose comes from `capsa.demo.corpus_source`; this script only renders it into
seven formats and adds two hostile files. Every timestamp a format carries (zip
entry dates, Office core properties, the e-mail's Date header) is fixed, and the
PDF is written by hand with no dates at all, so a rerun reproduces the committed
bytes given the same libraries (python-docx, openpyxl, Pillow with its FreeType,
and the zlib behind `zipfile`).

Usage:
    python scripts/make_corpus.py [OUT_DIR]    # default: src/capsa/demo/corpus
    make corpus
"""

from __future__ import annotations

import html
import io
import re
import sys
import textwrap
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from email.message import EmailMessage
from email.policy import default as email_policy
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "src" / "capsa" / "demo" / "corpus"
FONT_PATH = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
BOLD_FONT_PATH = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf")

if str(ROOT / "src") not in sys.path:  # run from a checkout without an installed capsa
    sys.path.insert(0, str(ROOT / "src"))

from capsa.demo.corpus_source import DOCUMENTS, HOSTILE_FILES, SourceDocument  # noqa: E402

FIXED_TIME = datetime(2025, 3, 3, 9, 0, 0)
"""Every date a file records: zip entries, Office core properties, the e-mail."""
_ZIP_TIME = (2025, 3, 3, 9, 0, 0)
COMPANY = "Northwind Harbor Logistics"


# --------------------------------------------------------------------------- blocks


@dataclass(frozen=True)
class _Block:
    style: str  # "title", "heading" or "paragraph"
    text: str


def _blocks(text: str) -> list[_Block]:
    """Split a document's text into title, headings and paragraphs.

    The first block is the title; a later one-line block of at most eight words
    that does not end in punctuation is a section heading.
    """
    parts = text.split("\n\n")
    blocks = [_Block("title", parts[0])]
    for part in parts[1:]:
        heading = len(part.split()) <= 8 and not part.endswith((".", ",", ":", ";", "?", "!"))
        blocks.append(_Block("heading" if heading else "paragraph", part))
    return blocks


def _doc(name: str) -> SourceDocument:
    return next(d for d in DOCUMENTS if d.name == name)


# ----------------------------------------------------------------------------- zip


def _zip_entry(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.create_system = 3
    info.external_attr = 0o644 << 16
    return info


def _normalized_zip(data: bytes, patch: dict[str, bytes] | None = None) -> bytes:
    """Rewrite a zip with fixed entry dates and attributes, members in their order.

    `patch` replaces the named members' contents (used for timestamps a library
    insists on setting to "now").
    """
    patch = patch or {}
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            payload = patch.get(info.filename, src.read(info.filename))
            dst.writestr(_zip_entry(info.filename), payload, compresslevel=6)
    return out.getvalue()


# ----------------------------------------------------------------------------- PDF


def _pdf_string(text: str) -> bytes:
    escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    return b"(" + escaped.encode("cp1252") + b")"


def _pdf_lines(text: str) -> Iterator[tuple[str, float, float, str]]:
    """Yield (font, size, space before, line) for the laid-out document."""
    for block in _blocks(text):
        if block.style == "title":
            yield "F2", 16.0, 0.0, block.text
        elif block.style == "heading":
            yield "F2", 12.0, 10.0, block.text
        else:
            for i, line in enumerate(textwrap.wrap(block.text, width=86)):
                yield "F1", 10.5, 6.0 if i == 0 else 0.0, line


def make_pdf(doc: SourceDocument) -> bytes:
    """A small hand-written PDF 1.4: Helvetica text drawn with `Tj`, A4 pages.

    Why by hand: no PDF library writes a byte-stable file without dates, and a
    plain content stream keeps the text trivially extractable.
    """
    top, bottom, left = 780.0, 64.0, 64.0
    pages: list[list[bytes]] = [[]]
    y = top
    for font, size, before, line in _pdf_lines(doc.text):
        step = before + size * 1.5
        if y - step < bottom and pages[-1]:
            pages.append([])
            y = top
            step = size * 1.5
        y -= step
        pages[-1].append(
            b"BT /%s %.1f Tf 1 0 0 1 %.1f %.1f Tm %s Tj ET"
            % (font.encode(), size, left, y, _pdf_string(line))
        )

    first_page = 6
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>"
        % (
            b" ".join(b"%d 0 R" % (first_page + 2 * i) for i in range(len(pages))),
            len(pages),
        ),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding >>",
        b"<< /Title %s /Author %s /Producer (capsa scripts/make_corpus.py) >>"
        % (_pdf_string(doc.title), _pdf_string(COMPANY)),
    ]
    for i, lines in enumerate(pages):
        stream = b"\n".join(lines) + b"\n"
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] "
            b"/Resources << /Font << /F1 3 0 R /F2 4 0 R >> >> /Contents %d 0 R >>"
            % (first_page + 2 * i + 1)
        )
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))

    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R /Info 5 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


# ---------------------------------------------------------------------- DOCX, XLSX


def make_docx(doc: SourceDocument) -> bytes:
    """A python-docx document: the title as Title, headings as Heading 1."""
    import docx

    document = docx.Document()
    props = document.core_properties
    props.title = doc.title
    props.subject = "Records management"
    props.author = "Owen Castellanos"
    props.last_modified_by = "Owen Castellanos"
    props.comments = f"{COMPANY} policy"
    props.keywords = "retention, records, deletion"
    props.revision = 3
    props.created = FIXED_TIME
    props.modified = FIXED_TIME
    props.last_printed = FIXED_TIME
    for block in _blocks(doc.text):
        if block.style == "title":
            document.add_heading(block.text, level=0)
        elif block.style == "heading":
            document.add_heading(block.text, level=1)
        else:
            document.add_paragraph(block.text)
    buffer = io.BytesIO()
    document.save(buffer)
    return _normalized_zip(buffer.getvalue())


def make_xlsx(doc: SourceDocument) -> bytes:
    """An openpyxl workbook: one sheet holding the price list as an Excel table."""
    import openpyxl
    from openpyxl.styles import Font
    from openpyxl.worksheet.table import Table, TableStyleInfo

    rows = [line.split("\t") for line in doc.text.split("\n")]
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    assert sheet is not None
    sheet.title = "Price list 2025"
    for row in rows:
        sheet.append([int(cell) if cell.isdigit() else cell for cell in row])
    for cell in sheet[1]:
        cell.font = Font(bold=True)
    for column, width in zip("ABCDEFG", (11, 28, 13, 22, 16, 26, 16), strict=True):
        sheet.column_dimensions[column].width = width
    sheet.freeze_panes = "A2"
    ref = f"A1:G{len(rows)}"
    table = Table(displayName="PriceList2025", ref=ref)
    table.tableStyleInfo = TableStyleInfo(name="TableStyleMedium2", showRowStripes=True)
    sheet.add_table(table)
    workbook.properties.title = doc.title
    workbook.properties.creator = "Hana Whitfield"
    workbook.properties.lastModifiedBy = "Hana Whitfield"
    workbook.properties.created = FIXED_TIME
    buffer = io.BytesIO()
    workbook.save(buffer)
    # openpyxl stamps dcterms:modified with the current time on every save.
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as archive:
        core = archive.read("docProps/core.xml")
    stamp = FIXED_TIME.strftime("%Y-%m-%dT%H:%M:%SZ").encode()
    core = re.sub(rb"(<dcterms:modified[^>]*>)[^<]*(<)", rb"\g<1>" + stamp + rb"\g<2>", core)
    return _normalized_zip(buffer.getvalue(), {"docProps/core.xml": core})


# ---------------------------------------------------------------------- HTML, e-mail


def make_html(doc: SourceDocument) -> bytes:
    """An intranet handbook page: the prose in `<h1>`, `<h2>` and `<p>` elements."""
    tags = {"title": "h1", "heading": "h2", "paragraph": "p"}
    body = "\n".join(
        f"<{tags[b.style]}>{html.escape(b.text, quote=False)}</{tags[b.style]}>"
        for b in _blocks(doc.text)
    )
    page = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{html.escape(doc.title, quote=False)}</title>
<style>body {{ font-family: sans-serif; max-width: 44em; margin: 2em auto; }}</style>
</head>
<body>
<article>
{body}
</article>
</body>
</html>
"""
    return page.encode("utf-8")


def make_eml(doc: SourceDocument) -> bytes:
    """A multipart/alternative e-mail: the prose as text/plain plus an HTML copy.

    Both parts are quoted-printable, so the decoded plain part equals `doc.text`
    (plus a final newline) exactly, long lines and all.
    """
    message = EmailMessage(policy=email_policy)
    message["From"] = "Ingrid Salvesen <ingrid.salvesen@northwindharbor.example>"
    message["To"] = "All staff <all-staff@northwindharbor.example>"
    message["Subject"] = doc.title
    message["Date"] = "Mon, 03 Mar 2025 09:00:00 +0000"
    message["Message-ID"] = "<board-2025-03-03.policy-change@northwindharbor.example>"
    message.set_content(doc.text + "\n", cte="quoted-printable")
    paragraphs = "\n".join(f"<p>{html.escape(p, quote=False)}</p>" for p in doc.text.split("\n\n"))
    message.add_alternative(
        f"<html><body>\n{paragraphs}\n</body></html>\n", subtype="html", cte="quoted-printable"
    )
    message.set_boundary("==capsa-corpus-policy-change==")
    return message.as_bytes()


# ----------------------------------------------------------------------------- PNG


def _font(size: int, *, bold: bool = False) -> object:
    from PIL import ImageFont

    path = BOLD_FONT_PATH if bold else FONT_PATH
    if path.exists():
        return ImageFont.truetype(str(path), size)
    return ImageFont.load_default(size=size)


def _wrap_to_width(text: str, font: object, width: float) -> list[str]:
    lines: list[str] = []
    for word in text.split():
        candidate = f"{lines[-1]} {word}" if lines else word
        if lines and font.getlength(candidate) <= width:  # type: ignore[attr-defined]
            lines[-1] = candidate
        else:
            lines.append(word)
    return lines


def make_png(doc: SourceDocument) -> bytes:
    """A printed notice for OCR: black text on white, 30 px DejaVu Sans, 1 bit per pixel."""
    from PIL import Image, ImageDraw

    width, margin = 1400, 80
    heading_font, body_font = _font(38, bold=True), _font(30)
    laid_out: list[tuple[object, str, int]] = []  # font, line, space before
    for i, item in enumerate(doc.text.split("\n")):
        font = heading_font if i < 2 else body_font
        for j, line in enumerate(_wrap_to_width(item, font, width - 2 * margin)):
            laid_out.append((font, line, 22 if j == 0 and i > 0 else 0))
    line_height = 48
    height = 2 * margin + sum(line_height + before for _, _, before in laid_out)
    image = Image.new("L", (width, height), color=255)
    draw = ImageDraw.Draw(image)
    y = margin
    for font, line, before in laid_out:
        y += before
        draw.text((margin, y), line, fill=0, font=font)  # type: ignore[arg-type]
        y += line_height
    # One bit per pixel keeps the file small; at this size Tesseract reads it verbatim.
    bilevel = image.point(lambda value: 255 if value >= 128 else 0).convert("1")
    buffer = io.BytesIO()
    bilevel.save(buffer, format="PNG", optimize=False, compress_level=9)
    return buffer.getvalue()


# ------------------------------------------------------------------------- hostile


def make_zip_bomb_docx() -> bytes:
    """`quarterly-report.docx`: a valid OOXML zip whose document inflates 1000-fold.

    The members are real; `word/document.xml` is one paragraph whose text run holds
    24 MiB of the digit 9, which DEFLATE squeezes to about 25 KB (a run of one byte
    is DEFLATE's best case, near 1030:1). The central directory states both numbers,
    so a guard can refuse the file without inflating a byte.
    """
    content_types = (
        b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        b'<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        b'<Default Extension="rels" '
        b'ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        b'<Default Extension="xml" ContentType="application/xml"/>'
        b'<Override PartName="/word/document.xml" ContentType="application/'
        b'vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>'
        b"</Types>"
    )
    rels = (
        b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        b'<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        b'<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/'
        b'2006/relationships/officeDocument" Target="word/document.xml"/>'
        b"</Relationships>"
    )
    head = (
        b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        b'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
        b"<w:body><w:p><w:r><w:t>Quarterly revenue: "
    )
    tail = b"</w:t></w:r></w:p></w:body></w:document>"
    document = head + b"9" * (24 * 1024 * 1024 - len(head) - len(tail)) + tail
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr(_zip_entry("[Content_Types].xml"), content_types)
        archive.writestr(_zip_entry("_rels/.rels"), rels)
        archive.writestr(_zip_entry("word/document.xml"), document, compresslevel=9)
    return out.getvalue()


def make_fake_pdf() -> bytes:
    """`invoice.pdf`: a PNG image (an invoice stamp) wearing a PDF name."""
    from PIL import Image, ImageDraw

    image = Image.new("L", (420, 90), color=255)
    ImageDraw.Draw(image).text(
        (16, 24),
        "INVOICE NH-2025-0193",
        fill=0,
        font=_font(30),  # type: ignore[arg-type]
    )
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=False, compress_level=9)
    return buffer.getvalue()


# ---------------------------------------------------------------------------- main

_RENDERERS = {
    "pdf": make_pdf,
    "docx": make_docx,
    "xlsx": make_xlsx,
    "html": make_html,
    "eml": make_eml,
    "png": make_png,
}


def build_corpus() -> dict[str, bytes]:
    """Render every corpus file in memory: good documents first, then hostile ones."""
    files: dict[str, bytes] = {}
    for doc in DOCUMENTS:
        render = _RENDERERS.get(doc.kind)
        files[doc.name] = render(doc) if render else (doc.text.rstrip("\n") + "\n").encode()
    hostile = {"quarterly-report.docx": make_zip_bomb_docx, "invoice.pdf": make_fake_pdf}
    for entry in HOSTILE_FILES:
        files[entry.name] = hostile[entry.name]()
    return files


def write_corpus(out_dir: Path) -> list[Path]:
    """Write the corpus files into `out_dir` (created if missing); return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, data in build_corpus().items():
        path = out_dir / name
        path.write_bytes(data)
        paths.append(path)
    return paths


def _table(paths: Sequence[Path]) -> str:
    hostile = {h.name for h in HOSTILE_FILES}
    rows = [("file", "bytes", "role")]
    rows += [
        (p.name, str(p.stat().st_size), "hostile" if p.name in hostile else "good") for p in paths
    ]
    rows.append(("total", str(sum(p.stat().st_size for p in paths)), ""))
    return "\n".join(f"{a:<24} {b:>8}  {c}" for a, b, c in rows)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    out_dir = Path(args[0]) if args else DEFAULT_OUT
    print(_table(write_corpus(out_dir)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
