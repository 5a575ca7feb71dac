"""The new readers of visible text (equations, charts, SmartArt, workbook drawings, PDF form
fields, HTML containers and MathML) against the hiding rules, through the production pool.

Two classes of attack: a new reader bringing back text a hiding rule keeps out
(a chart in a hidden run, a drawing's fallback, an equation whose paragraph
style hides it, a password field, a text box on a drawing no sheet names), and
a new reader crashing or running on and on over a valid but unusual file (a
page of references to one large chart, a sheet relating one drawing a
thousand times, a page listing one annotation 200,000 times). Every document
is built here, part by part, and extracted with `extract_attachment` on the
real pool. The words ``shown<n>`` must reach the text, ``hidden<n>`` never.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Callable

import pytest
from pypdf import PdfReader, PdfWriter
from pypdf.generic import (
    ArrayObject,
    DecodedStreamObject,
    DictionaryObject,
    FloatObject,
    NameObject,
    NumberObject,
    TextStringObject,
)
from tests.unit.guard.test_office_charts import CHART_TYPE, add_chart, chart_run, chart_xml, saved
from tests.unit.guard.test_office_diagrams import diagram_run, rewritten, with_diagram
from tests.unit.guard.test_office_hidden import docx, paragraph, run
from tests.unit.guard.test_pdf_forms import free_text, widget
from tests.unit.guard.test_xlsx_drawings import anchor, text_box, with_drawing, workbook

from capsa.errors import ExtractionFailed, IngestionRejected
from capsa.guard import Attachment, Extracted, IsolatedExtractor, extract_attachment
from capsa.guard.samples import pdf_with_text

from .conftest import PARSE_LIMITS

pytest.importorskip("unstructured")
pytest.importorskip("pptx")

MARKER = re.compile(r"\b(?:shown|hidden)\d+\b")
W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
M = "http://schemas.openxmlformats.org/officeDocument/2006/math"
MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"
WPS = "http://schemas.microsoft.com/office/word/2010/wordprocessingShape"
R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
PACKAGE_RELS = "http://schemas.openxmlformats.org/package/2006/relationships"
HIDING_STYLES = ('<w:style w:type="paragraph" w:styleId="Secret"><w:rPr><w:vanish/></w:rPr>'
                 '</w:style><w:style w:type="character" w:styleId="SecretChar"><w:rPr>'
                 "<w:vanish/></w:rPr></w:style>")


def extracted(pool: IsolatedExtractor, label: str, payload: bytes) -> Extracted:
    return extract_attachment(Attachment(label=label, payload=payload), pool, PARSE_LIMITS)


def markers(pool: IsolatedExtractor, label: str, payload: bytes) -> list[str]:
    return MARKER.findall(extracted(pool, label, payload).text)


def finishes_typed(pool: IsolatedExtractor, label: str, payload: bytes) -> Extracted | None:
    """The file's text, or None when it was refused with a typed reason; a parser that
    raised (``raised``) fails the test."""
    try:
        return extracted(pool, label, payload)
    except IngestionRejected:
        return None
    except ExtractionFailed as failure:
        cause, detail = failure.cause, failure.detail
    assert cause != "raised", detail
    return None


# ------------------------------------------------------------------------- DOCX charts


def chart_docx(body: str, xml: str | None = None, *, styles: str | None = None) -> bytes:
    return docx(body, styles=styles, parts={"chart": (
        "charts/chart1.xml", CHART_TYPE, xml if xml is not None else chart_xml(
            title="hidden1 chart", axes=None))})


def alternate(choice: str, fallback: str) -> str:
    return (f'<mc:AlternateContent xmlns:mc="{MC}" xmlns:wps="{WPS}"><mc:Choice Requires="wps">'
            f"{choice}"
            f"</mc:Choice><mc:Fallback>{fallback}</mc:Fallback></mc:AlternateContent>")


@pytest.mark.parametrize("wrap", [
    lambda r: r.replace("<w:r>", "<w:r><w:rPr><w:vanish/></w:rPr>", 1),
    lambda r: r.replace("<w:r>", '<w:r><w:rPr><w:specVanish w:val="on"/></w:rPr>', 1),
    lambda r: f'<w:del w:id="1" w:author="a">{r}</w:del>',
    lambda r: f'<w:moveFrom w:id="1" w:author="a">{r}</w:moveFrom>',
    lambda r: f'<w:ins w:id="1" w:author="a"><w:del w:id="2" w:author="a">{r}</w:del></w:ins>',
], ids=["vanish", "specVanish", "deletion", "move-from", "deletion-in-insertion"])
def test_a_docx_chart_where_word_shows_nothing_stays_out(
        real_pool: IsolatedExtractor, wrap: Callable[[str], str]) -> None:
    body = paragraph(run("shown1")) + f"<w:p>{wrap(chart_run())}</w:p>"

    assert markers(real_pool, "chart.docx", chart_docx(body)) == ["shown1"]


def test_a_docx_chart_in_a_paragraph_its_style_hides_stays_out(
        real_pool: IsolatedExtractor) -> None:
    body = (paragraph(run("shown1")) + '<w:p><w:pPr><w:pStyle w:val="Secret"/></w:pPr>'
            f"{run('hidden2')}{chart_run()}</w:p>")

    assert markers(real_pool, "chart.docx", chart_docx(body, styles=HIDING_STYLES)) == [
        "shown1"]


def test_a_chart_or_diagram_in_a_drawings_fallback_stays_out(
        real_pool: IsolatedExtractor) -> None:
    # Word 2010 and later, and LibreOffice, draw the choice (here a sentence); the
    # fallback is for Word 2007. It was read (_drawn._not_drawn looked only for the same
    # kind of object in an earlier branch). The choice's sentence was lost until alternates
    # were resolved as Word draws them.
    chart = paragraph(run("shown1")) + f"<w:p>{alternate(run('shown2'), chart_run())}</w:p>"
    diagram = paragraph(run("shown1")) + f"<w:p>{alternate(run('shown2'), diagram_run())}</w:p>"

    assert markers(real_pool, "chart.docx", chart_docx(chart)) == ["shown1", "shown2"]
    # the diagram's words are its own: Plan, Build, Ship
    text = extracted(real_pool, "diagram.docx", with_diagram(diagram)).text
    assert "Plan" not in text and "shown1" in text


def test_a_text_box_in_a_drawings_fallback_stays_out(real_pool: IsolatedExtractor) -> None:
    box = (f'<w:r><w:pict><v:shape xmlns:v="urn:schemas-microsoft-com:vml"><v:textbox>'
           f"<w:txbxContent>{paragraph(run('hidden1'))}</w:txbxContent></v:textbox></v:shape>"
           "</w:pict></w:r>")
    body = paragraph(run("shown1 "), alternate(run("shown2"), box))

    assert markers(real_pool, "box.docx", docx(body)) == ["shown1", "shown2"]


@pytest.mark.parametrize("target", ["/word/charts/chart1.xml", "document.xml",
                                    "../../../etc/passwd", "charts/missing.xml",
                                    "http://example.invalid/chart.xml"],
                         ids=["absolute", "cyclic", "outside", "missing", "external-url"])
def test_a_docx_chart_naming_an_odd_target_ends_typed(real_pool: IsolatedExtractor,
                                                     target: str) -> None:
    payload = rewritten(chart_docx(paragraph(run("shown1")) + f"<w:p>{chart_run()}</w:p>"),
                        "word/_rels/document.xml.rels",
                        lambda data: data.replace(b'Target="charts/chart1.xml"',
                                                  f'Target="{target}"'.encode()))

    done = finishes_typed(real_pool, "chart.docx", payload)

    assert done is None or "shown1" in done.text


def big_chart(points: int) -> str:
    """A chart part of one series of `points` values, written by hand (megabytes)."""
    c = "http://schemas.openxmlformats.org/drawingml/2006/chart"
    values = "".join(f'<c:pt idx="{n}"><c:v>{n}</c:v></c:pt>' for n in range(points))
    return (f'<c:chartSpace xmlns:c="{c}"><c:chart><c:plotArea><c:lineChart><c:ser>'
            "<c:tx><c:v>shown2</c:v></c:tx><c:val><c:numRef><c:numCache>"
            f'<c:ptCount val="{points}"/>{values}</c:numCache></c:numRef></c:val></c:ser>'
            "</c:lineChart></c:plotArea></c:chart></c:chartSpace>")


def test_many_references_to_one_large_chart_read_it_once(real_pool: IsolatedExtractor) -> None:
    # 40 references to one 100,000-point chart (a 0.6 MB file): each reference parsed the
    # part and walked every point again, about a minute, past the 20 s timeout.
    body = paragraph(run("shown1")) + "".join(f"<w:p>{chart_run()}</w:p>" for _ in range(40))

    done = extracted(real_pool, "charts.docx", chart_docx(body, big_chart(100_000)))

    assert done.text.count("Series: shown2 (0, 1, 2") == 40


# ----------------------------------------------------------------------- DOCX equations


def omath(*runs: str) -> str:
    return f'<m:oMath xmlns:m="{M}">{"".join(runs)}</m:oMath>'


def math_run(text: str, properties: str = "") -> str:
    return f"<m:r>{properties}<m:t>{text}</m:t></m:r>"


@pytest.mark.parametrize(("body", "styles"), [
    ('<w:p><w:pPr><w:pStyle w:val="Secret"/></w:pPr>' + run("hidden2") + omath(
        math_run("hidden1")) + "</w:p>", HIDING_STYLES),
    ("<w:p>" + omath(math_run("hidden1", '<w:rPr><w:rStyle w:val="SecretChar"/></w:rPr>'))
     + "</w:p>", HIDING_STYLES),
    ("<w:p>" + omath(math_run("hidden1")) + "</w:p>",
     "<w:docDefaults><w:rPrDefault><w:rPr><w:vanish/></w:rPr></w:rPrDefault></w:docDefaults>"),
], ids=["paragraph-style", "character-style", "document-defaults"])
def test_an_equation_its_style_hides_stays_out(real_pool: IsolatedExtractor, body: str,
                                               styles: str) -> None:
    # The body's hidden runs were left out by their styles, the equation's only by direct
    # formatting (_docx_math._hidden_run), so the paragraph's equation outlived its words.
    shown = paragraph(run("shown1", '<w:vanish w:val="0"/>'))  # direct formatting: shown

    assert markers(real_pool, "math.docx", docx(shown + body, styles=styles)) == ["shown1"]


@pytest.mark.parametrize("equation", [
    omath(math_run("x"), math_run("hidden1", "<w:rPr><w:vanish/></w:rPr>")),
    omath(math_run("x"), f'<w:del w:id="1" w:author="a">{math_run("hidden1")}</w:del>'),
    omath(math_run("x"), '<m:phant><m:phantPr><m:show m:val="off"/></m:phantPr><m:e>'
          + math_run("hidden1") + "</m:e></m:phant>"),
    omath(math_run("x"), "<w:r><w:rPr><w:vanish/></w:rPr><w:t>hidden1</w:t></w:r>"),
    f'<w:del w:id="1" w:author="a">{omath(math_run("hidden1"))}</w:del>',
], ids=["vanish", "deleted-run", "phantom-off", "word-run-hidden", "whole-deleted"])
def test_what_word_hides_in_an_equation_stays_out(real_pool: IsolatedExtractor,
                                                  equation: str) -> None:
    payload = docx(f"<w:p>{run('shown1 ')}{equation}</w:p>")

    assert markers(real_pool, "math.docx", payload) == ["shown1"]


def test_an_equation_in_a_fallback_stays_out(real_pool: IsolatedExtractor) -> None:
    payload = docx(paragraph(run("shown1 "), alternate(run("shown2"), omath(
        math_run("hidden1")))))

    assert markers(real_pool, "math.docx", payload) == ["shown1", "shown2"]


# ------------------------------------------------------------------------------- PPTX


def chart_deck(edit: Callable[[bytes], bytes] | None = None, *, hidden_slide: bool = False,
               grouped: bool = False) -> bytes:
    from pptx import Presentation
    from pptx.util import Inches

    presentation = Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[6])
    slide.shapes.add_textbox(Inches(1), Inches(1), Inches(6), Inches(1)).text_frame.text = (
        "shown1")
    add_chart(slide.shapes.add_group_shape().shapes if grouped else slide.shapes,
              title="hidden1 chart", axes=None)
    if hidden_slide:
        slide.element.set("show", "0")
    payload = saved(presentation)
    return rewritten(payload, "ppt/slides/slide1.xml", edit) if edit else payload


def test_a_chart_hidden_on_its_slide_or_in_a_hidden_group_stays_out(
        real_pool: IsolatedExtractor) -> None:
    frame = chart_deck(lambda data: re.sub(rb'(<p:cNvPr id="\d+" name="Chart[^"]*")',
                                           rb'\1 hidden="1"', data))
    group = chart_deck(lambda data: re.sub(rb'(<p:cNvPr id="\d+" name="Group[^"]*")',
                                           rb'\1 hidden="true"', data), grouped=True)

    assert markers(real_pool, "frame.pptx", frame) == ["shown1"]
    assert markers(real_pool, "group.pptx", group) == ["shown1"]


def test_a_chart_on_a_hidden_slide_is_kept_and_the_slide_named(
        real_pool: IsolatedExtractor) -> None:
    done = extracted(real_pool, "slide.pptx", chart_deck(hidden_slide=True))

    assert "hidden1 chart" in done.text
    assert any("hidden slide(s) (slide 1)" in note for note in done.notes)


@pytest.mark.parametrize("change", [
    lambda data: data.replace(b"http://schemas.openxmlformats.org/drawingml/2006/chart",
                              b"http://purl.oclc.org/ooxml/drawingml/chart"),
    lambda data: re.sub(rb"<c:v>12</c:v>", b"<c:v>NaN</c:v>", data),
    lambda data: re.sub(rb"<c:v>12</c:v>", b"<c:v>1e999999</c:v>", data),
    lambda data: re.sub(rb'<c:pt idx="0">', b'<c:pt idx="' + b"9" * 5000 + b'">', data),
    lambda data: re.sub(rb"<c:formatCode>General</c:formatCode>",
                        b"<c:formatCode>yyyy-mm-dd</c:formatCode>", data),
    lambda data: re.sub(rb"<c:plotArea>.*</c:plotArea>", b"", data, flags=re.DOTALL),
], ids=["strict-namespace", "nan", "overflow", "huge-index", "date-format", "no-plot-area"])
def test_an_unusual_chart_part_never_crashes_the_deck(real_pool: IsolatedExtractor,
                                                      change: Callable[[bytes], bytes]) -> None:
    payload = rewritten(chart_deck(), "ppt/charts/chart1.xml", change)

    done = finishes_typed(real_pool, "chart.pptx", payload)

    assert done is not None and "shown1" in done.text


@pytest.mark.parametrize("target", ["slide1.xml", "../../../../etc/passwd",
                                    "/ppt/charts/chart1.xml"],
                         ids=["cyclic", "outside", "absolute"])
def test_a_slide_chart_naming_an_odd_target_ends_typed(real_pool: IsolatedExtractor,
                                                      target: str) -> None:
    payload = rewritten(chart_deck(), "ppt/slides/_rels/slide1.xml.rels",
                        lambda data: re.sub(rb'Target="../charts/chart\d+.xml"',
                                            f'Target="{target}"'.encode(), data))

    done = finishes_typed(real_pool, "chart.pptx", payload)

    assert done is None or "shown1" in done.text


# ------------------------------------------------------------------------------- XLSX


def edited(payload: bytes, changes: dict[str, Callable[[bytes], bytes]],
           added: dict[str, bytes] | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(payload)) as source, zipfile.ZipFile(
            buffer, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            data = source.read(info)
            target.writestr(info.filename, changes.get(info.filename, lambda d: d)(data))
        for name, data in (added or {}).items():
            target.writestr(name, data)
    return buffer.getvalue()


def boxed_workbook(box: str = "shown2") -> bytes:
    return with_drawing(workbook(), anchor(8, text_box(box)))


def test_a_drawing_no_sheet_names_stays_out(real_pool: IsolatedExtractor) -> None:
    # The sheet relates the drawing but its <drawing r:id> is gone: LibreOffice draws
    # neither its chart nor its text box (converted to PDF, its page holds the cells
    # alone). _xlsx_drawings read every drawing relationship.
    payload = edited(boxed_workbook("hidden1"), {"xl/worksheets/sheet1.xml": lambda data: re.sub(
        rb"<drawing [^>]*/>", b"", data)})

    text = extracted(real_pool, "book.xlsx", payload).text

    assert "hidden1" not in text and "Chart:" not in text and "Region" in text


def test_a_drawing_related_a_thousand_times_is_read_once(real_pool: IsolatedExtractor) -> None:
    rels = (f'<Relationships xmlns="{PACKAGE_RELS}">' + "".join(
        f'<Relationship Type="{R}/drawing" Target="/xl/drawings/drawing1.xml" Id="rId{n}"/>'
        for n in range(1, 1001)) + "</Relationships>").encode()
    payload = edited(boxed_workbook(), {"xl/worksheets/_rels/sheet1.xml.rels": lambda _: rels})

    text = extracted(real_pool, "book.xlsx", payload).text

    assert text.count("shown2") == 1


def test_hidden_shapes_and_groups_on_a_sheet_stay_out(real_pool: IsolatedExtractor) -> None:
    group = ('<xdr:grpSp><xdr:nvGrpSpPr><xdr:cNvPr id="20" name="G" hidden="true"/>'
             "<xdr:cNvGrpSpPr/></xdr:nvGrpSpPr><xdr:grpSpPr/>" + text_box("hidden2")
             + "</xdr:grpSp>")
    payload = with_drawing(workbook(), anchor(8, text_box("hidden1", hidden=True))
                           + anchor(12, group) + anchor(16, text_box("shown1")))

    done = extracted(real_pool, "book.xlsx", payload)

    assert MARKER.findall(done.text) == ["shown1"]
    assert any("left out 2 shape(s)" in note for note in done.notes)


def test_a_chart_on_a_hidden_sheet_is_kept_and_the_sheet_named(
        real_pool: IsolatedExtractor) -> None:
    payload = edited(workbook(), {"xl/workbook.xml": lambda data: data.replace(
        b'name="Sales" sheetId="1" state="visible"', b'name="Sales" sheetId="1" state="hidden"')})

    done = extracted(real_pool, "book.xlsx", payload)

    assert "Chart: Sales by region" in done.text
    assert any("hidden sheet(s): 'Sales' (hidden)" in note for note in done.notes)


def chart_sheet_workbook(state: str) -> bytes:
    xdr = "http://schemas.openxmlformats.org/drawingml/2006/spreadsheetDrawing"
    a = "http://schemas.openxmlformats.org/drawingml/2006/main"
    c = "http://schemas.openxmlformats.org/drawingml/2006/chart"
    sheet = (f'<chartsheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" '
             f'xmlns:r="{R}"><sheetViews><sheetView workbookViewId="0"/></sheetViews>'
             '<drawing r:id="rId1"/></chartsheet>')
    drawing = (f'<xdr:wsDr xmlns:xdr="{xdr}" xmlns:a="{a}"><xdr:absoluteAnchor>'
               '<xdr:pos x="0" y="0"/><xdr:ext cx="9000000" cy="6000000"/><xdr:graphicFrame '
               'macro=""><xdr:nvGraphicFramePr><xdr:cNvPr id="2" name="Chart 1"/>'
               "<xdr:cNvGraphicFramePr/></xdr:nvGraphicFramePr><xdr:xfrm/><a:graphic>"
               f'<a:graphicData uri="{c}"><c:chart xmlns:c="{c}" xmlns:r="{R}" r:id="rId1"/>'
               "</a:graphicData></a:graphic></xdr:graphicFrame><xdr:clientData/>"
               "</xdr:absoluteAnchor></xdr:wsDr>")
    kinds = "application/vnd.openxmlformats-officedocument."
    return edited(workbook(), {
        "xl/workbook.xml": lambda data: data.replace(b"</sheets>", (
            f'<sheet xmlns:r="{R}" name="Overview" sheetId="3" state="{state}" r:id="rId99"/>'
            "</sheets>").encode()),
        "xl/_rels/workbook.xml.rels": lambda data: data.replace(b"</Relationships>", (
            f'<Relationship Id="rId99" Type="{R}/chartsheet" Target="chartsheets/sheet1.xml"/>'
            "</Relationships>").encode()),
        "[Content_Types].xml": lambda data: data.replace(b"</Types>", (
            '<Override PartName="/xl/chartsheets/sheet1.xml" '
            f'ContentType="{kinds}spreadsheetml.chartsheet+xml"/><Override '
            f'PartName="/xl/drawings/drawing9.xml" ContentType="{kinds}drawing+xml"/>'
            "</Types>").encode())},
        {"xl/chartsheets/sheet1.xml": sheet.encode(),
         "xl/chartsheets/_rels/sheet1.xml.rels": (
             f'<Relationships xmlns="{PACKAGE_RELS}"><Relationship Id="rId1" '
             f'Type="{R}/drawing" Target="../drawings/drawing9.xml"/></Relationships>').encode(),
         "xl/drawings/drawing9.xml": drawing.encode(),
         "xl/drawings/_rels/drawing9.xml.rels": (
             f'<Relationships xmlns="{PACKAGE_RELS}"><Relationship Id="rId1" '
             f'Type="{R}/chart" Target="/xl/charts/chart1.xml"/></Relationships>').encode()})


def test_a_visible_chart_sheet_is_read_by_its_tab(real_pool: IsolatedExtractor) -> None:
    done = extracted(real_pool, "book.xlsx", chart_sheet_workbook("visible"))

    assert "Chart sheet Overview: Chart: Sales by region" in done.text


@pytest.mark.parametrize("state", ["hidden", "veryHidden"])
def test_a_hidden_chart_sheet_is_named_in_a_note(real_pool: IsolatedExtractor,
                                                 state: str) -> None:
    done = extracted(real_pool, "book.xlsx", chart_sheet_workbook(state))

    assert any("'Overview'" in note for note in done.notes)


# -------------------------------------------------------------------------------- PDF


def form_pdf(*annotations: DictionaryObject,
             edit: Callable[[PdfWriter, DictionaryObject], None] | None = None) -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf_with_text(["Application form"]))))
    page = writer.pages[0]
    page[NameObject("/Annots")] = ArrayObject(writer._add_object(a) for a in annotations)
    if edit is not None:
        edit(writer, page)
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def box(*numbers: float) -> ArrayObject:
    return ArrayObject(FloatObject(n) for n in numbers)


def set_first(key: str, value: object) -> Callable[[PdfWriter, DictionaryObject], None]:
    def edit(writer: PdfWriter, page: DictionaryObject) -> None:
        page["/Annots"][0].get_object()[NameObject(key)] = value
    return edit


def pdf_text(pool: IsolatedExtractor, payload: bytes) -> str:
    return extracted(pool, "form.pdf", payload).text


@pytest.mark.parametrize("flags", [2, 32, 1, -1, 2 ** 32 + 2, 2 | 4, 32 | 4 | 64])
def test_a_field_flagged_hidden_in_any_integer_form_stays_out(real_pool: IsolatedExtractor,
                                                              flags: int) -> None:
    text = pdf_text(real_pool, form_pdf(widget("Name", "shown1", rect=(100, 500, 300, 520)),
                                        widget("Secret", "hidden1", flags=flags)))

    assert MARKER.findall(text) == ["shown1"]


def test_a_hidden_flag_given_as_a_real_or_a_reference_still_hides(
        real_pool: IsolatedExtractor) -> None:
    real = form_pdf(widget("Secret", "hidden1"), edit=set_first("/F", FloatObject(2.0)))

    def referenced(writer: PdfWriter, page: DictionaryObject) -> None:
        page["/Annots"][0].get_object()[NameObject("/F")] = writer._add_object(NumberObject(2))

    assert "hidden1" not in pdf_text(real_pool, real)
    assert "hidden1" not in pdf_text(real_pool, form_pdf(widget("Secret", "hidden1"),
                                                         edit=referenced))


@pytest.mark.parametrize("rect", [(100, 600, 100, 620), (100, 600, 300, 600.5),
                                  (700, 600, 900, 620), (100, -50, 300, -10)],
                         ids=["no-width", "no-height", "right-of-page", "below-page"])
def test_a_field_drawn_in_no_area_of_the_page_stays_out(real_pool: IsolatedExtractor,
                                                        rect: tuple[float, ...]) -> None:
    text = pdf_text(real_pool, form_pdf(widget("Name", "shown1", rect=(100, 500, 300, 520)),
                                        widget("Secret", "hidden1", rect=rect)))

    assert MARKER.findall(text) == ["shown1"]


def test_a_field_outside_the_crop_box_stays_out(real_pool: IsolatedExtractor) -> None:
    # A viewer shows the crop box; the field sat inside the media box and was read.
    def crop(writer: PdfWriter, page: DictionaryObject) -> None:
        page[NameObject("/CropBox")] = box(0, 0, 612, 400)

    text = pdf_text(real_pool, form_pdf(widget("Name", "shown1", rect=(100, 100, 300, 120)),
                                        widget("Secret", "hidden1", rect=(100, 600, 300, 620)),
                                        edit=crop))

    assert MARKER.findall(text) == ["shown1"]


def test_a_field_outside_an_inherited_crop_box_stays_out(real_pool: IsolatedExtractor) -> None:
    def crop(writer: PdfWriter, page: DictionaryObject) -> None:
        page["/Parent"].get_object()[NameObject("/CropBox")] = box(0, 0, 612, 400)

    text = pdf_text(real_pool, form_pdf(widget("Name", "shown1", rect=(100, 100, 300, 120)),
                                        widget("Secret", "hidden1", rect=(100, 600, 300, 620)),
                                        edit=crop))

    assert MARKER.findall(text) == ["shown1"]


def test_a_password_fields_value_stays_out(real_pool: IsolatedExtractor) -> None:
    # A viewer draws a password field's value as dots; it was read in full.
    text = pdf_text(real_pool, form_pdf(widget("Name", "shown1", rect=(100, 500, 300, 520)),
                                        widget("Pin", "hidden1", field_flags=1 << 13)))

    assert MARKER.findall(text) == ["shown1"]


def layered(state: str, *, membership: str | None = None
            ) -> Callable[[PdfWriter, DictionaryObject], None]:
    """Put the last annotation in an optional content group that the document's default
    configuration turns `state` (``/ON`` or ``/OFF``), directly or through a membership
    dictionary of policy `membership`."""
    def edit(writer: PdfWriter, page: DictionaryObject) -> None:
        group = writer._add_object(DictionaryObject({
            NameObject("/Type"): NameObject("/OCG"), NameObject("/Name"): TextStringObject("L")}))
        writer._root_object[NameObject("/OCProperties")] = DictionaryObject({
            NameObject("/OCGs"): ArrayObject([group]),
            NameObject("/D"): DictionaryObject({NameObject(state): ArrayObject([group])})})
        content = group if membership is None else writer._add_object(DictionaryObject({
            NameObject("/Type"): NameObject("/OCMD"), NameObject("/OCGs"): ArrayObject([group]),
            NameObject("/P"): NameObject(membership)}))
        page["/Annots"][-1].get_object()[NameObject("/OC")] = content
    return edit


@pytest.mark.parametrize(("state", "membership", "shown"), [
    ("/OFF", None, False), ("/ON", None, True), ("/OFF", "/AnyOn", False),
    ("/OFF", "/AllOff", True), ("/ON", "/AnyOff", False)])
def test_a_field_in_a_layer_the_document_turns_off_stays_out(
        real_pool: IsolatedExtractor, state: str, membership: str | None, shown: bool) -> None:
    text = pdf_text(real_pool, form_pdf(widget("Name", "shown1", rect=(100, 500, 300, 520)),
                                        widget("Layer", "layered"),
                                        edit=layered(state, membership=membership)))

    assert ("layered" in text) is shown


def test_a_hidden_free_text_box_stays_out(real_pool: IsolatedExtractor) -> None:
    hidden = free_text("hidden1")
    hidden[NameObject("/F")] = NumberObject(2)

    text = pdf_text(real_pool, form_pdf(free_text("shown1", rect=(100, 300, 300, 340)), hidden))

    assert MARKER.findall(text) == ["shown1"]


def test_a_hidden_parent_field_does_not_hide_its_visible_widget(
        real_pool: IsolatedExtractor) -> None:
    # Annotation flags belong to the widget; a /F on the field above it is no flag at all.
    def parented(writer: PdfWriter, page: DictionaryObject) -> None:
        kid = page["/Annots"][0].get_object()
        parent = writer._add_object(DictionaryObject({
            NameObject("/FT"): NameObject("/Tx"), NameObject("/T"): TextStringObject("P"),
            NameObject("/V"): TextStringObject("shown1"), NameObject("/F"): NumberObject(2),
            NameObject("/Kids"): ArrayObject([page["/Annots"][0]])}))
        for key in ("/FT", "/T"):
            del kid[key]
        kid[NameObject("/Parent")] = parent

    assert "P: shown1" in pdf_text(real_pool, form_pdf(widget("x", None), edit=parented))


def test_one_annotation_listed_90000_times_is_read_once(real_pool: IsolatedExtractor) -> None:
    # A 0.5 MB page that named one field 90,000 times (pypdf reads arrays of up to 100,000)
    # read it 90,000 times: 1.8 million characters, refused as too long after the work
    # (with a deep parent chain, seconds a page, on each of 20 pages sharing the list).
    def repeated(writer: PdfWriter, page: DictionaryObject) -> None:
        page[NameObject("/Annots")] = ArrayObject([page["/Annots"][0]] * 90_000)

    text = pdf_text(real_pool, form_pdf(widget("Name", "shown1"), edit=repeated))

    assert text.count("shown1") == 1


def test_a_field_whose_appearance_draws_nothing_stays_out(real_pool: IsolatedExtractor) -> None:
    def blank(writer: PdfWriter, page: DictionaryObject) -> None:
        stream = DecodedStreamObject()
        stream.set_data(b"")
        stream.update({NameObject("/Type"): NameObject("/XObject"),
                       NameObject("/Subtype"): NameObject("/Form"),
                       NameObject("/BBox"): box(0, 0, 200, 20)})
        page["/Annots"][0].get_object()[NameObject("/AP")] = DictionaryObject({
            NameObject("/N"): writer._add_object(stream)})

    text = pdf_text(real_pool, form_pdf(widget("Secret", "hidden1"),
                                        free_text("shown1", rect=(100, 300, 300, 340)),
                                        edit=blank))

    assert MARKER.findall(text) == ["shown1"]


# ------------------------------------------------------------------------------- HTML


def page_text(pool: IsolatedExtractor, body: str) -> Extracted:
    page = f"<html><body><p>shown1 first.</p>{body}<p>shown3 last.</p></body></html>"
    return extracted(pool, "page.html", page.encode())


@pytest.mark.parametrize("body", [
    "<dialog><p>hidden1 dialog</p></dialog>",
    "<form hidden><p>hidden1 form</p></form>",
    '<figure style="display:none"><figcaption>hidden1 caption</figcaption></figure>',
    '<details style="display: none" open><summary>hidden1</summary>hidden2</details>',
    "<div hidden><details open><summary>hidden1</summary><p>hidden2</p></details></div>",
    '<div hidden><p>x <math><mi>hidden1</mi></math></p></div>',
    '<div style="display:none"><math alttext="hidden1"><mi>x</mi></math></div>',
    '<p>area <math><mi>r</mi><mi style="display:none">hidden1</mi></math></p>',
    '<p>area <math style="visibility:hidden"><mi>hidden1</mi></math></p>',
], ids=["closed-dialog", "hidden-form", "hidden-figure", "hidden-details", "details-in-hidden",
        "math-in-hidden", "alttext-in-hidden", "hidden-token", "invisible-math"])
def test_what_a_browser_hides_in_opened_containers_and_math_stays_out(
        real_pool: IsolatedExtractor, body: str) -> None:
    assert MARKER.findall(page_text(real_pool, body).text) == ["shown1", "shown3"]


@pytest.mark.parametrize("token", [
    "<mtext>r<script>hidden1()</script></mtext>",
    "<mi>r<style>.hidden1 { color: red }</style></mi>",
    "<mtext>r<template>hidden1</template></mtext>",
    "<mtext>r<noscript>hidden1</noscript></mtext>",
    '<maction actiontype="toggle"><mi>r</mi><mtext>hidden1</mtext></maction>',
    '<maction actiontype="tooltip"><mi>r</mi><mtext>hidden1</mtext></maction>',
], ids=["script", "style", "template", "noscript", "maction-toggle", "maction-tooltip"])
def test_math_text_a_browser_does_not_draw_stays_out(real_pool: IsolatedExtractor,
                                                     token: str) -> None:
    # The linear alttext read a token's text with itertext() (a script's code included,
    # written before unstructured strips scripts) and every child of an maction.
    text = page_text(real_pool, f"<p>Area <math>{token}<mo>=</mo><mn>2</mn></math> m.</p>").text

    assert "hidden1" not in text and "r=2" in text


def test_an_maction_shows_its_selected_child(real_pool: IsolatedExtractor) -> None:
    token = '<maction actiontype="toggle" selection="2"><mi>hidden1</mi><mi>y</mi></maction>'

    text = page_text(real_pool, f"<p>Area <math>{token}</math> m.</p>").text

    assert "hidden1" not in text and "Area y m." in text


def test_a_closed_details_body_is_named_in_a_note(real_pool: IsolatedExtractor) -> None:
    done = page_text(real_pool, "<details><summary>shown2</summary><p>collapsed</p></details>")

    assert "collapsed" in done.text
    assert any("details" in note for note in done.notes)
