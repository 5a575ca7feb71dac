"""Files embedded in Word documents and PowerPoint decks are read on their own, as attachments.

A worksheet pasted into a report is an OLE object: the page shows its
picture, the package holds the file, and unstructured read none of it
(`capsa.guard.extractors._office_objects`). Each object's file comes back
through the whole guard as a child of its document, labelled
``report.docx/Microsoft_Excel_Worksheet.xlsx``, or as an omission with its
reason; objects a reader does not see are not handed back. Documents are
built part by part and read by the production pool.
"""

from __future__ import annotations

import io
import struct
import zipfile

import pytest
from openpyxl import Workbook
from tests.hostile._cfb import compound_file
from tests.unit.guard.test_office_hidden import docx, paragraph, run

from capsa.guard import Attachment, Extracted, ExtractionLimits, Omission, extract_attachment
from capsa.guard.samples import pdf_with_text

pytest.importorskip("unstructured")
pytest.importorskip("pptx")

XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
OLE = "application/vnd.openxmlformats-officedocument.oleObject"
MISSING_NOTE = ("left out {} embedded object(s) whose file is missing from the package: the "
                "page shows only their picture")


def workbook(*rows: tuple[object, ...]) -> bytes:
    book = Workbook()
    for row in rows:
        book.active.append(row)
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


def ole_object(ident: str = "rIdpackage", *, kind: str = "Embed", hidden: bool = False) -> str:
    """A run holding an OLE object as Word writes it: a picture, and the object naming its part."""
    properties = "<w:rPr><w:vanish/></w:rPr>" if hidden else ""
    return (f'<w:r>{properties}<w:object><v:shape xmlns:v="urn:schemas-microsoft-com:vml" '
            'style="width:300pt;height:80pt"/><o:OLEObject xmlns:o="urn:schemas-microsoft-'
            f'com:office:office" Type="{kind}" ProgID="Excel.Sheet.12" ShapeID="_x0000_i1025" '
            f'r:id="{ident}"/></w:object></w:r>')


def report(*body: str, name: str = "embeddings/Microsoft_Excel_Worksheet.xlsx",
           media_type: str = XLSX, payload: bytes | None = None) -> bytes:
    embedded = payload if payload is not None else workbook(("Berth", "Tonnage"),
                                                            ("North", 142))
    return docx("".join(body), parts={"package": (name, media_type, embedded)})


def extracted(label: str, payload: bytes) -> Extracted:
    return extract_attachment(Attachment(label=label, payload=payload))


# ------------------------------------------------------------------------------- Word


def test_a_worksheet_embedded_in_a_report_is_read_as_its_child() -> None:
    got = extracted("report.docx", report(paragraph(run("Tonnage by berth:")),
                                          f"<w:p>{ole_object()}</w:p>"))

    (child,) = got.attachments
    assert isinstance(child, Extracted)
    assert child.label == "report.docx/Microsoft_Excel_Worksheet.xlsx"
    assert child.parent == "report.docx" and child.kind == "xlsx"
    assert child.text == "Berth\tTonnage\nNorth\t142"
    assert got.text.startswith("Tonnage by berth:\n\nAttached:\n- Microsoft_Excel_Worksheet.xlsx (")
    assert got.text.endswith("extracted separately)")


@pytest.mark.parametrize("where", [
    "hidden run", "tracked deletion", "linked", "undrawn branch",
])
def test_an_object_no_reader_sees_is_not_handed_back(where: str) -> None:
    if where == "hidden run":
        body = f"<w:p>{ole_object(hidden=True)}</w:p>"
    elif where == "tracked deletion":
        body = f'<w:p><w:del w:id="1" w:author="a">{ole_object()}</w:del></w:p>'
    elif where == "linked":
        body = f'<w:p>{ole_object(kind="Link")}</w:p>'
    else:
        body = ('<w:p><mc:AlternateContent xmlns:mc="http://schemas.openxmlformats.org/markup-'
                'compatibility/2006" xmlns:zz="urn:nobody"><mc:Choice Requires="zz">'
                f"{ole_object()}</mc:Choice><mc:Fallback>{run('shown1')}</mc:Fallback>"
                "</mc:AlternateContent></w:p>")
    got = extracted("report.docx", report(paragraph(run("Tonnage by berth.")), body))

    assert got.attachments == ()
    assert "Attached" not in got.text and "North" not in got.text


def test_one_file_named_by_many_objects_is_handed_back_once() -> None:
    got = extracted("report.docx", report(*(f"<w:p>{ole_object()}</w:p>" for _ in range(50))))

    assert [child.label for child in got.attachments] == [
        "report.docx/Microsoft_Excel_Worksheet.xlsx"]


def test_an_object_whose_file_is_missing_is_named_in_a_note() -> None:
    got = extracted("report.docx", report(paragraph(run("Tonnage by berth.")),
                                          f"<w:p>{ole_object('rId404')}</w:p>"))

    assert got.attachments == ()
    assert MISSING_NOTE.format(1) in got.notes


def test_an_object_capsa_cannot_read_is_an_omission_with_its_reason() -> None:
    # Word wraps a file of any other kind (a packager object) in an OLE container
    package = compound_file({("\x01Ole10Native",): b"\x10\x00\x00\x00" + b"\x00" * 600})
    got = extracted("report.docx", report(paragraph(run("See the object.")),
                                          f"<w:p>{ole_object()}</w:p>",
                                          name="embeddings/oleObject1.bin", media_type=OLE,
                                          payload=package))

    (child,) = got.attachments
    assert isinstance(child, Omission)
    assert child.label == "report.docx/oleObject1.bin" and child.reason == "unsupported_type"
    assert "oleObject1.bin (" in got.text and "not extracted: unsupported_type)" in got.text


def packager(label: str, inner: bytes, *, flags: int = 2, size: int | None = None) -> bytes:
    """An embedded OLE object as Office's packager writes a file it has no server for: the
    file's label, path and bytes in a ``\x01Ole10Native`` stream."""
    temp = f"C:\\Users\\x\\AppData\\Local\\Temp\\{label}\x00".encode("cp1252")
    body = (struct.pack("<H", flags) + label.encode("cp1252") + b"\x00"
            + f"C:\\reports\\{label}".encode("cp1252") + b"\x00" + b"\x00\x00\x03\x00"
            + struct.pack("<I", len(temp)) + temp
            + struct.pack("<I", len(inner) if size is None else size) + inner)
    return compound_file({("\x01Ole10Native",): struct.pack("<I", len(body)) + body})


def test_a_file_office_wraps_in_a_packager_object_is_read_as_itself() -> None:
    inner = b"Berth rota: North opens at dawn, South at noon.\n"
    got = extracted("report.docx", report(paragraph(run("See the rota.")),
                                          f"<w:p>{ole_object()}</w:p>",
                                          name="embeddings/oleObject1.bin", media_type=OLE,
                                          payload=packager("rota.txt", inner)))

    (child,) = got.attachments
    assert isinstance(child, Extracted)
    assert child.label == "report.docx/rota.txt" and child.kind == "text"
    assert child.text == inner.decode().strip()


def test_a_pdf_in_an_acrobat_object_is_read_as_a_pdf() -> None:
    pdf = pdf_with_text(["Tariff sheet 2026"])
    got = extracted("report.docx", report(f"<w:p>{ole_object()}</w:p>",
                                          name="embeddings/oleObject1.bin", media_type=OLE,
                                          payload=compound_file({("CONTENTS",): pdf})))

    (child,) = got.attachments
    assert isinstance(child, Extracted) and child.kind == "pdf"
    assert child.label == "report.docx/oleObject1.pdf" and child.text == "Tariff sheet 2026"


@pytest.mark.parametrize("broken", [
    {"flags": 3}, {"size": 10**6}, {"size": 2**32 - 1},
])
def test_a_packager_stream_laid_out_otherwise_is_handed_back_as_it_is(
        broken: dict[str, int]) -> None:
    payload = packager("rota.txt", b"Berth rota.", **broken)
    got = extracted("report.docx", report(f"<w:p>{ole_object()}</w:p>",
                                          name="embeddings/oleObject1.bin", media_type=OLE,
                                          payload=payload))

    (child,) = got.attachments
    assert isinstance(child, Omission) and child.label == "report.docx/oleObject1.bin"
    assert child.reason == "unsupported_type"


def test_a_document_embedded_in_a_document_is_read_as_deep_as_the_limit_allows() -> None:
    inner = report(paragraph(run("Inner memo.")), f"<w:p>{ole_object()}</w:p>")
    outer = report(paragraph(run("Outer report.")), f"<w:p>{ole_object()}</w:p>",
                   name="embeddings/Microsoft_Word_Document.docx", media_type=DOCX,
                   payload=inner)
    label = "outer.docx/Microsoft_Word_Document.docx/Microsoft_Excel_Worksheet.xlsx"

    got = extracted("outer.docx", outer)  # the attachment preset: one level down
    (child,) = got.attachments
    assert isinstance(child, Extracted) and child.text.startswith("Inner memo.")
    (grandchild,) = child.attachments
    assert isinstance(grandchild, Omission) and grandchild.label == label
    assert grandchild.reason == "nested_too_deep"
    assert "2 levels deep, over the limit of 1 (max_nesting_depth)" in grandchild.detail

    deeper = ExtractionLimits.for_attachments().model_copy(update={"max_nesting_depth": 2})
    got = extract_attachment(Attachment(label="outer.docx", payload=outer), limits=deeper)
    (child,) = got.attachments
    assert isinstance(child, Extracted)
    (grandchild,) = child.attachments
    assert isinstance(grandchild, Extracted) and grandchild.text == "Berth\tTonnage\nNorth\t142"


# -------------------------------------------------------------------------- PowerPoint


def deck(*, hidden: bool = False) -> bytes:
    from pptx import Presentation
    from pptx.util import Inches

    presentation = Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[5])
    slide.shapes.title.text = "Tonnage by berth"
    frame = slide.shapes.add_ole_object(io.BytesIO(workbook(("Berth", "Tonnage"),
                                                             ("South", 97))),
                                        "Excel.Sheet.12", Inches(1), Inches(2))
    if hidden:
        frame._element.xpath("./p:nvGraphicFramePr/p:cNvPr")[0].set("hidden", "1")
    buffer = io.BytesIO()
    presentation.save(buffer)
    return buffer.getvalue()


def test_a_worksheet_on_a_slide_is_read_as_its_child() -> None:
    got = extracted("deck.pptx", deck())

    (child,) = got.attachments
    assert isinstance(child, Extracted) and child.kind == "xlsx"
    assert child.label.startswith("deck.pptx/") and child.text == "Berth\tTonnage\nSouth\t97"
    assert got.text.startswith("Tonnage by berth")


def test_a_hidden_object_on_a_slide_is_not_handed_back() -> None:
    got = extracted("deck.pptx", deck(hidden=True))

    assert got.attachments == ()


def test_the_embedded_file_is_the_packages_own_bytes() -> None:
    payload = deck()
    with zipfile.ZipFile(io.BytesIO(payload)) as archive:
        (inside,) = [archive.read(name) for name in archive.namelist()
                     if name.startswith("ppt/embeddings/")]

    (child,) = extracted("deck.pptx", payload).attachments
    assert isinstance(child, Extracted) and child.byte_size == len(inside)


# ------------------------------------------------------------------------------- Excel

X14 = "http://schemas.microsoft.com/office/spreadsheetml/2009/9/main"


def book_with_object(objects: str, *, embedded: bytes | None = None) -> bytes:
    """A workbook whose first sheet lists `objects` (``oleObject`` elements naming
    ``rIdole``) after its cells, and relates an embedded report as ``rIdole``."""
    source = zipfile.ZipFile(io.BytesIO(workbook(("Berth", "Tonnage"), ("East", 61))))
    buffer = io.BytesIO()
    inner = embedded if embedded is not None else docx(paragraph(run("Embedded memo.")))
    with source, zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "xl/worksheets/sheet1.xml":
                data = data.replace(b"</sheetData>", b"</sheetData><oleObjects>"
                                    + objects.encode() + b"</oleObjects>")
            target.writestr(info, data)
        target.writestr("xl/worksheets/_rels/sheet1.xml.rels", (
            '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/'
            'relationships"><Relationship Id="rIdole" Type="http://schemas.openxmlformats.org/'
            'officeDocument/2006/relationships/package" '
            'Target="../embeddings/Microsoft_Word_Document.docx"/></Relationships>'))
        target.writestr("xl/embeddings/Microsoft_Word_Document.docx", inner)
    return buffer.getvalue()


def excel_object(ident: str = "rIdole") -> str:
    return (f'<oleObject xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/'
            f'relationships" progId="Word.Document.12" shapeId="1025" r:id="{ident}"/>')


def test_a_document_embedded_in_a_worksheet_is_read_as_its_child() -> None:
    # Excel writes the object twice: a choice for Excel 2010 and later, a fallback
    written_twice = (f'<mc:AlternateContent xmlns:mc="http://schemas.openxmlformats.org/markup-'
                     f'compatibility/2006" xmlns:x14="{X14}"><mc:Choice Requires="x14">'
                     f"{excel_object()}</mc:Choice><mc:Fallback>{excel_object()}</mc:Fallback>"
                     "</mc:AlternateContent>")
    got = extracted("berths.xlsx", book_with_object(written_twice))

    (child,) = got.attachments
    assert isinstance(child, Extracted)
    assert child.label == "berths.xlsx/Microsoft_Word_Document.docx"
    assert child.kind == "docx" and child.text == "Embedded memo."
    assert got.text.startswith("Berth\tTonnage\nEast\t61")
    assert "Microsoft_Word_Document.docx (" in got.text


def test_a_worksheet_object_naming_nothing_is_named_in_a_note() -> None:
    got = extracted("berths.xlsx", book_with_object(excel_object("rId404")))

    assert got.attachments == ()
    assert MISSING_NOTE.format(1) in got.notes


def test_a_worksheet_without_objects_hands_nothing_back() -> None:
    got = extracted("berths.xlsx", workbook(("Berth", "Tonnage"), ("East", 61)))

    assert got.attachments == () and got.text == "Berth\tTonnage\nEast\t61"


def test_objects_past_what_the_limit_leaves_are_counted_and_the_report_is_still_read() -> None:
    two = report(paragraph(run("Two tables.")), f"<w:p>{ole_object()}</w:p>",
                 f"<w:p>{ole_object('rIdsecond')}</w:p>")
    with zipfile.ZipFile(io.BytesIO(two)) as source:  # relate a second workbook as rIdsecond
        members = {info.filename: source.read(info) for info in source.infolist()}
    members["word/_rels/document.xml.rels"] = members["word/_rels/document.xml.rels"].replace(
        b"</Relationships>", b'<Relationship Id="rIdsecond" Type="http://schemas.openxmlformats'
        b'.org/officeDocument/2006/relationships/package" Target="embeddings/Second.xlsx"/>'
        b"</Relationships>")
    members["word/embeddings/Second.xlsx"] = workbook(("Berth", "Tonnage"), ("West", 7))
    members["[Content_Types].xml"] = members["[Content_Types].xml"].replace(
        b"</Types>", f'<Default Extension="xlsx" ContentType="{XLSX}"/></Types>'.encode())
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as target:
        for name, data in members.items():
            target.writestr(name, data)
    payload = buffer.getvalue()
    first = len(members["word/embeddings/Microsoft_Excel_Worksheet.xlsx"])
    declared = sum(len(data) for data in members.values())
    # room for the document and its first workbook, not the second
    limits = ExtractionLimits.for_attachments().model_copy(update={
        "max_uncompressed_bytes": declared + len(payload) + first + 100})

    got = extract_attachment(Attachment(label="report.docx", payload=payload), limits=limits)

    assert got.text.startswith("Two tables.")
    assert [child.label for child in got.attachments] == [
        "report.docx/Microsoft_Excel_Worksheet.xlsx"]
    (note,) = [note for note in got.notes if "embedded object" in note]
    second = len(members["word/embeddings/Second.xlsx"])
    assert note == (f"left out 1 embedded object(s) of {second} bytes: the files inside one "
                    f"file share the {first + 100} bytes it leaves of max_uncompressed_bytes")
