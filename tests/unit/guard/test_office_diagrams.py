"""SmartArt diagrams in a DOCX or a PPTX reach the text as one paragraph where they stand.

unstructured 0.27 read nothing of a SmartArt diagram: its text lives in a
data part no partitioner opens (`capsa.guard.extractors._office_diagrams`).
Neither python-docx nor python-pptx writes SmartArt, so the diagrams are
written here part by part: the drawing's ``dgm:relIds``, the data, layout,
quick style and colours parts with their relationship and content types,
and in a deck the cached drawing Office adds.
"""

from __future__ import annotations

import io
import subprocess
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from tests.unit.guard.test_docx_containers import cell_table, text_box
from tests.unit.guard.test_office_charts import READ as CHART_READ
from tests.unit.guard.test_office_charts import chart_run, chart_xml, saved
from tests.unit.guard.test_office_hidden import (
    MARKER,
    REALDOCS,
    RUNS_NOTE,
    docx,
    extract,
    needs_soffice,
    paragraph,
    run,
)

import capsa.guard.extractors._office_hidden as office_hidden
from capsa.guard import Attachment, extract_attachment
from capsa.guard.extractors._office_diagrams import Diagrams, diagram_text

pytest.importorskip("unstructured")
pytest.importorskip("pptx")

DGM = "http://schemas.openxmlformats.org/drawingml/2006/diagram"
DSP = "http://schemas.microsoft.com/office/drawing/2008/diagram"
A = "http://schemas.openxmlformats.org/drawingml/2006/main"
P = "http://schemas.openxmlformats.org/presentationml/2006/main"
R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
DRAWING_TYPE = "http://schemas.microsoft.com/office/2007/relationships/diagramDrawing"
DML = "application/vnd.openxmlformats-officedocument.drawingml."
READ = ("read {} SmartArt diagram(s) from their data parts, each as one paragraph where it "
        "stands: items in the diagram's order, separated by semicolons, each item's sub-items "
        "in parentheses")
UNREAD = ("left out {} SmartArt diagram(s) whose data part is missing or unreadable: their "
          "text could not be read")

Tree = Sequence[tuple[str, "Tree"]]
PLAN: Tree = [("Plan", []), ("Build", [("code", []), ("review", [])]), ("Ship", [])]
PLANNED = "Diagram: Plan; Build (code; review); Ship."

LAYOUT = (f'<dgm:layoutDef xmlns:dgm="{DGM}" xmlns:a="{A}" uniqueId="urn:microsoft.com/office/'
          'officeart/2005/8/layout/default"><dgm:title val=""/><dgm:desc val=""/><dgm:catLst>'
          '<dgm:cat type="list" pri="400"/></dgm:catLst><dgm:layoutNode name="diagram"/>'
          "</dgm:layoutDef>")
QUICK_STYLE = (f'<dgm:styleDef xmlns:dgm="{DGM}" xmlns:a="{A}" uniqueId="urn:microsoft.com/'
               'office/officeart/2005/8/quickstyle/simple1"><dgm:title val=""/><dgm:desc val=""/>'
               '<dgm:catLst><dgm:cat type="simple" pri="10100"/></dgm:catLst>'
               '<dgm:styleLbl name="node1"/></dgm:styleDef>')
COLORS = (f'<dgm:colorsDef xmlns:dgm="{DGM}" xmlns:a="{A}" uniqueId="urn:microsoft.com/office/'
          'officeart/2005/8/colors/accent1_2"><dgm:title val=""/><dgm:desc val=""/><dgm:catLst>'
          '<dgm:cat type="accent1" pri="11200"/></dgm:catLst></dgm:colorsDef>')


# ----------------------------------------------------------------------- the data part


def text_body(*paragraphs: str) -> str:
    """A point's text body (``dgm:t``), one ``a:p`` a paragraph (an empty one when none)."""
    shown = "".join(f'<a:p><a:r><a:rPr lang="en-US"/><a:t>{text}</a:t></a:r></a:p>'
                    for text in paragraphs) or '<a:p><a:endParaRPr lang="en-US"/></a:p>'
    return f"<dgm:t><a:bodyPr/><a:lstStyle/>{shown}</dgm:t>"


def point(ident: str, *paragraphs: str, kind: str | None = None, extra: str = "") -> str:
    typed = f' type="{kind}"' if kind else ""
    return (f'<dgm:pt modelId="{ident}"{typed}{extra}><dgm:prSet/><dgm:spPr/>'
            f"{text_body(*paragraphs)}</dgm:pt>")


def link(source: str, target: str, order: int, *, kind: str | None = None) -> str:
    typed = f' type="{kind}"' if kind else ""
    return (f'<dgm:cxn modelId="c{source}-{target}"{typed} srcId="{source}" destId="{target}" '
            f'srcOrd="{order}" destOrd="0"/>')


def data_model_xml(points: str, links: str | None, *, drawing: str | None = None) -> str:
    """A data part of `points` and `links` (no ``dgm:cxnLst`` when None), naming the cached
    drawing by the host part's relationship `drawing`, as Office 2010 and later write it."""
    connections = f"<dgm:cxnLst>{links}</dgm:cxnLst>" if links is not None else ""
    extension = "" if drawing is None else (
        f'<dgm:extLst><a:ext uri="http://schemas.microsoft.com/office/drawing/2008/diagram">'
        f'<dsp:dataModelExt xmlns:dsp="{DSP}" relId="{drawing}" minVer="{DGM}"/></a:ext>'
        "</dgm:extLst>")
    return (f'<dgm:dataModel xmlns:dgm="{DGM}" xmlns:a="{A}"><dgm:ptLst>{points}</dgm:ptLst>'
            f"{connections}<dgm:bg/><dgm:whole/>{extension}</dgm:dataModel>")


def data_model(tree: Tree, *, drawing: str | None = None) -> str:
    """The data part PowerPoint writes for `tree`: the ``doc`` point, each item with its
    connector points and the presentation point that draws it, and each parent's ``parOf``
    connection to each child, ``srcOrd`` its place."""
    points = ['<dgm:pt modelId="0" type="doc"><dgm:prSet loTypeId="urn:microsoft.com/office/'
              'officeart/2005/8/layout/default"/><dgm:spPr/>' + text_body() + "</dgm:pt>"]
    links: list[str] = []
    pending: list[tuple[str, Tree]] = [("0", tree)]
    number = 0
    while pending:
        parent, children = pending.pop(0)
        for order, (text, below) in enumerate(children):
            number += 1
            ident = str(number)
            points += [point(ident, text),
                       point(f"p{ident}", kind="parTrans", extra=f' cxnId="c{parent}-{ident}"'),
                       point(f"s{ident}", kind="sibTrans", extra=f' cxnId="c{parent}-{ident}"'),
                       point(f"v{ident}", kind="pres", extra=f' presAssocID="{ident}"')]
            links += [link(parent, ident, order), link(ident, f"v{ident}", 0, kind="presOf")]
            pending.append((ident, below))
    return data_model_xml("".join(points), "".join(links), drawing=drawing)


def cached_drawing(*texts: str) -> str:
    """The drawing Office caches beside the data (``dsp:drawing``), one shape a text."""
    shapes = "".join(
        f'<dsp:sp modelId="v{n}"><dsp:nvSpPr><dsp:cNvPr id="0" name=""/><dsp:cNvSpPr/>'
        f"</dsp:nvSpPr><dsp:spPr/><dsp:txBody><a:bodyPr/><a:lstStyle/><a:p><a:r><a:t>{text}"
        "</a:t></a:r></a:p></dsp:txBody></dsp:sp>" for n, text in enumerate(texts))
    return (f'<dsp:drawing xmlns:dsp="{DSP}" xmlns:a="{A}"><dsp:spTree><dsp:nvGrpSpPr>'
            '<dsp:cNvPr id="0" name=""/><dsp:cNvGrpSpPr/></dsp:nvGrpSpPr><dsp:grpSpPr/>'
            f"{shapes}</dsp:spTree></dsp:drawing>")


def flattened(tree: Tree) -> list[str]:
    """`tree`'s texts, each item before its sub-items (as Office draws a shape for each)."""
    return [said for text, below in tree for said in (text, *flattened(below))]


def read(xml: str) -> str:
    from lxml import etree

    return diagram_text(etree.fromstring(xml.encode()))


# ---------------------------------------------------------------------------------- PPTX


def relation_ids(data: str, layout: str, style: str, colors: str) -> str:
    return (f'<a:graphic xmlns:a="{A}"><a:graphicData uri="{DGM}"><dgm:relIds xmlns:dgm="{DGM}" '
            f'xmlns:r="{R}" r:dm="{data}" r:lo="{layout}" r:qs="{style}" r:cs="{colors}"/>'
            "</a:graphicData></a:graphic>")


def add_diagram(shapes: Any, tree: Tree = PLAN, *, top: float = 2, xml: str | None = None,
                number: int = 1) -> Any:
    """A SmartArt frame added to `shapes` (a slide's or a group's), `top` inches down, with
    its four parts and its cached drawing related from the slide; `xml` replaces the data."""
    from pptx.opc.constants import CONTENT_TYPE, RELATIONSHIP_TYPE
    from pptx.opc.package import Part
    from pptx.opc.packuri import PackURI
    from pptx.oxml import parse_xml
    from pptx.util import Inches

    slide = shapes.part
    drawing = slide.relate_to(Part(PackURI(f"/ppt/diagrams/drawing{number}.xml"),
                                   CONTENT_TYPE.DML_DIAGRAM_DRAWING, slide.package,
                                   cached_drawing(*flattened(tree)).encode()),
                              DRAWING_TYPE)
    ids = [slide.relate_to(Part(PackURI(f"/ppt/diagrams/{name}{number}.xml"), kind,
                                slide.package, content.encode()), relationship)
           for name, kind, relationship, content in (
               ("data", CONTENT_TYPE.DML_DIAGRAM_DATA, RELATIONSHIP_TYPE.DIAGRAM_DATA,
                xml if xml is not None else data_model(tree, drawing=drawing)),
               ("layout", CONTENT_TYPE.DML_DIAGRAM_LAYOUT, RELATIONSHIP_TYPE.DIAGRAM_LAYOUT,
                LAYOUT),
               ("quickStyle", CONTENT_TYPE.DML_DIAGRAM_STYLE,
                RELATIONSHIP_TYPE.DIAGRAM_QUICK_STYLE, QUICK_STYLE),
               ("colors", CONTENT_TYPE.DML_DIAGRAM_COLORS, RELATIONSHIP_TYPE.DIAGRAM_COLORS,
                COLORS))]
    frame = parse_xml(
        f'<p:graphicFrame xmlns:p="{P}" xmlns:a="{A}"><p:nvGraphicFramePr>'
        f'<p:cNvPr id="{90 + number}" name="Diagram {number}"/><p:cNvGraphicFramePr/><p:nvPr/>'
        "</p:nvGraphicFramePr><p:xfrm>"
        f'<a:off x="{Inches(1)}" y="{Inches(top)}"/><a:ext cx="{Inches(6)}" cy="{Inches(3)}"/>'
        f"</p:xfrm>{relation_ids(*ids)}</p:graphicFrame>")
    shapes._spTree.append(frame)
    return frame


def diagram_deck(tree: Tree = PLAN, *, title: str | None = "Quarter", below: str | None = None,
                 xml: str | None = None) -> Any:
    from pptx import Presentation
    from pptx.util import Inches

    presentation = Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[5 if title else 6])
    if title:
        slide.shapes.title.text = title
    if below:
        slide.shapes.add_textbox(Inches(1), Inches(6), Inches(6), Inches(1)).text_frame.text = below
    add_diagram(slide.shapes, tree, xml=xml)
    return presentation


def test_python_pptx_opens_the_deck_and_finds_the_diagram_frame() -> None:
    from pptx import Presentation
    from pptx.shapes.graphfrm import GraphicFrame

    deck = Presentation(io.BytesIO(saved(diagram_deck())))

    assert [shape.name for shape in deck.slides[0].shapes if isinstance(shape, GraphicFrame)] == [
        "Diagram 1"]


def test_a_slide_diagram_is_read_where_it_stands_and_named_in_a_note() -> None:
    parsed = extract("pptx", saved(diagram_deck(below="Below the diagram.")))

    # once: the cached drawing holds the same words and is not read
    assert parsed.text == f"Quarter\n\n{PLANNED}\n\nBelow the diagram."
    assert parsed.notes == (READ.format(1),)


def test_a_diagram_in_a_group_is_read_in_the_group() -> None:
    from pptx import Presentation
    from pptx.util import Inches

    presentation = Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[6])
    slide.shapes.add_textbox(Inches(1), Inches(1), Inches(6), Inches(1)).text_frame.text = "shown1"
    group = slide.shapes.add_group_shape()
    add_diagram(group.shapes, [("shown2 step", [])])
    slide.shapes.add_textbox(Inches(1), Inches(6), Inches(6), Inches(1)).text_frame.text = "shown3"

    parsed = extract("pptx", saved(presentation))

    assert MARKER.findall(parsed.text) == ["shown1", "shown2", "shown3"]


def test_two_diagrams_on_a_slide_each_get_their_own_text_box() -> None:
    from pptx import Presentation

    presentation = Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[6])
    add_diagram(slide.shapes, [("shown1", [])], top=1)
    add_diagram(slide.shapes, [("shown2", [])], top=4, number=2)

    parsed = extract("pptx", saved(presentation))

    assert parsed.text == "Diagram: shown1.\n\nDiagram: shown2."
    assert parsed.notes == (READ.format(2),)


def test_a_diagram_hidden_on_its_slide_goes_unread() -> None:
    from pptx import Presentation

    presentation = Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[6])
    frame = add_diagram(slide.shapes, [("hidden1 step", [])])
    frame.nvGraphicFramePr.cNvPr.set("hidden", "1")

    parsed = extract("pptx", saved(presentation))

    assert parsed.text == ""
    assert not [note for note in parsed.notes if "diagram" in note]


def test_a_slide_diagram_whose_data_part_is_missing_is_left_out_and_said() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(saved(diagram_deck()))) as source, \
            zipfile.ZipFile(buffer, "w") as target:
        for member in source.infolist():
            if member.filename != "ppt/diagrams/data1.xml":
                target.writestr(member, source.read(member))

    parsed = extract("pptx", buffer.getvalue())

    assert parsed.text == "Quarter"
    assert parsed.notes == (UNREAD.format(1),)


def test_a_chart_and_a_diagram_on_one_slide_are_both_read_and_said() -> None:
    from tests.unit.guard.test_office_charts import add_chart

    presentation = diagram_deck(title=None)
    add_chart(presentation.slides[0].shapes, top=5, title="Sales", axes=None)

    parsed = extract("pptx", saved(presentation))

    assert parsed.text.startswith(f"{PLANNED}\n\nChart: Sales.")
    assert parsed.notes == (CHART_READ.format(1), READ.format(1))


# ---------------------------------------------------------------------------------- DOCX


def diagram_run(data: str = "rIddiagramData") -> str:
    """A run holding a SmartArt drawn inline, as Word writes one."""
    return ('<w:r><w:drawing><wp:inline xmlns:wp="http://schemas.openxmlformats.org/drawingml/'
            '2006/wordprocessingDrawing"><wp:extent cx="5486400" cy="3200400"/><wp:docPr id="1" '
            'name="Diagram 1"/>' + relation_ids(data, "rIddiagramLayout", "rIddiagramQuickStyle",
                                                "rIddiagramColors")
            + "</wp:inline></w:drawing></w:r>")


def diagram_parts(xml: str) -> dict[str, tuple[str, str, str]]:
    """The four parts of a diagram, by the relationship type naming each (``rId`` + type)."""
    return {"diagramData": ("diagrams/data1.xml", DML + "diagramData+xml", xml),
            "diagramLayout": ("diagrams/layout1.xml", DML + "diagramLayout+xml", LAYOUT),
            "diagramQuickStyle": ("diagrams/quickStyle1.xml", DML + "diagramStyle+xml",
                                  QUICK_STYLE),
            "diagramColors": ("diagrams/colors1.xml", DML + "diagramColors+xml", COLORS)}


def with_diagram(body: str, xml: str | None = None, *, tree: Tree = PLAN) -> bytes:
    """A DOCX of `body` whose relationships ``rIddiagramData`` (and the three others) name
    a diagram's parts, the data holding `xml` (or `tree`'s data model)."""
    return docx(body, parts=diagram_parts(xml if xml is not None else data_model(tree)))


def rewritten(payload: bytes, name: str, change: Any) -> bytes:
    """`payload` with the part `name` replaced by `change` applied to its bytes."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(payload)) as source, zipfile.ZipFile(buffer, "w") as target:
        for member in source.infolist():
            data = source.read(member)
            target.writestr(member, change(data) if member.filename == name else data)
    return buffer.getvalue()


def test_python_docx_opens_the_document_with_its_diagram_parts() -> None:
    import docx as python_docx

    document = python_docx.Document(io.BytesIO(with_diagram(paragraph(diagram_run()))))

    assert sorted(rel.reltype.rsplit("/", 1)[1] for rel in document.part.rels.values()) == [
        "diagramColors", "diagramData", "diagramLayout", "diagramQuickStyle"]


def test_a_docx_diagram_follows_the_paragraph_it_is_anchored_in() -> None:
    parsed = extract("docx", with_diagram(paragraph(run("Our plan."), diagram_run())
                                          + paragraph(run("After the diagram."))))

    assert parsed.text == f"Our plan.\n\n{PLANNED}\n\nAfter the diagram."
    assert parsed.notes == (READ.format(1),)


def test_diagrams_in_a_cell_and_a_text_box_are_read_once() -> None:
    parsed = extract("docx", with_diagram(
        cell_table(paragraph(run("shown1"), diagram_run()))
        + paragraph(run("shown2"), text_box(paragraph(run("shown3"), diagram_run())))))

    assert parsed.text.count(PLANNED) == 2
    assert parsed.notes == (READ.format(2),)


def test_a_diagram_in_a_header_is_read_from_the_header_part() -> None:
    # the header's r:dm names the header's own relationship, not the body's
    payload = docx(paragraph(run("Body.")),
                   header=paragraph(run("Letterhead"), diagram_run("rIdheaderdata")))
    payload = rewritten(payload, "[Content_Types].xml", lambda data: data.replace(
        b"</Types>", f'<Override PartName="/word/diagrams/data9.xml" ContentType="{DML}'
        'diagramData+xml"/></Types>'.encode()))
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(payload)) as source, zipfile.ZipFile(buffer, "w") as target:
        for member in source.infolist():
            target.writestr(member, source.read(member))
        target.writestr("word/_rels/header1.xml.rels", (
            '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            f'<Relationship Id="rIdheaderdata" Type="{R}/diagramData" '
            'Target="diagrams/data9.xml"/></Relationships>'))
        target.writestr("word/diagrams/data9.xml", data_model([("shown1 letterhead", [])]))

    parsed = extract("docx", buffer.getvalue())

    assert "Letterhead\nDiagram: shown1 letterhead." in parsed.text  # one header element


def test_a_diagram_in_a_hidden_run_goes_with_it() -> None:
    hidden = diagram_run().replace("<w:r>", "<w:r><w:rPr><w:vanish/></w:rPr>", 1)

    parsed = extract("docx", with_diagram(paragraph(run("shown1 "), hidden),
                                          tree=[("hidden2", [])]))

    assert parsed.text == "shown1"
    assert parsed.notes == ()  # the run held no text: nothing counted, no diagram read


def test_a_diagram_in_a_tracked_deletion_is_left_out() -> None:
    parsed = extract("docx", with_diagram(paragraph(
        run("shown1"), f'<w:del w:id="9" w:author="Reviewer">{diagram_run()}</w:del>')))

    assert parsed.text == "shown1"


@pytest.mark.parametrize("xml", [
    f"<dgm:dataModel xmlns:dgm='{DGM}'><oops", "<other/>",
    '<c:chartSpace xmlns:c="http://schemas.openxmlformats.org/drawingml/2006/chart"/>'])
def test_a_data_part_that_is_malformed_or_no_data_model_is_left_out_and_said(xml: str) -> None:
    parsed = extract("docx", with_diagram(paragraph(run("shown1"), diagram_run()), xml))

    assert parsed.text == "shown1"
    assert parsed.notes == (UNREAD.format(1),)


def test_a_diagram_naming_no_part_is_left_out_and_said() -> None:
    parsed = extract("docx", with_diagram(paragraph(run("shown1"), diagram_run("rIdnowhere"))))

    assert parsed.text == "shown1"
    assert parsed.notes == (UNREAD.format(1),)


def test_a_diagram_whose_data_is_an_external_target_is_left_out_and_said() -> None:
    payload = rewritten(
        with_diagram(paragraph(run("shown1"), diagram_run())), "word/_rels/document.xml.rels",
        lambda data: data.replace(b'Target="diagrams/data1.xml"',
                                  b'Target="http://example.invalid/data1.xml" '
                                  b'TargetMode="External"'))

    parsed = extract("docx", payload)

    assert parsed.text == "shown1"
    assert parsed.notes == (UNREAD.format(1),)


def test_a_diagram_without_text_adds_nothing_and_says_nothing() -> None:
    parsed = extract("docx", with_diagram(paragraph(run("shown1"), diagram_run()),
                                          tree=[("", [])]))

    assert (parsed.text, parsed.notes) == ("shown1", ())


def test_hidden_runs_beside_a_diagram_are_still_counted() -> None:
    parsed = extract("docx", with_diagram(paragraph(run("hidden1", "<w:vanish/>"),
                                                    diagram_run())))

    assert parsed.notes == (RUNS_NOTE.format(1), READ.format(1))


def test_a_chart_and_a_diagram_in_one_document_are_both_said() -> None:
    payload = docx(paragraph(run("Sales."), chart_run()) + paragraph(diagram_run()),
                   parts={"chart": ("charts/chart1.xml", "application/vnd.openxmlformats-"
                                    "officedocument.drawingml.chart+xml", chart_xml(axes=None)),
                          **diagram_parts(data_model(PLAN))})

    parsed = extract("docx", payload)

    assert parsed.text.endswith(f"Chart: Sales by region. Categories: North, South. Series: "
                                f"2025 (12, 7); 2026 (15, 9.5).\n\n{PLANNED}")
    assert parsed.notes == (CHART_READ.format(1), READ.format(1))


# ------------------------------------------------------------------- the data model's order


def test_items_follow_the_connections_not_the_order_the_part_lists_them() -> None:
    points = (point("0", kind="doc") + point("3", "third") + point("1", "first")
              + point("2", "second") + point("4", "under first", kind="asst"))
    links = link("0", "3", 2) + link("0", "2", 1) + link("0", "1", 0) + link("1", "4", 0)

    assert read(data_model_xml(points, links)) == "Diagram: first (under first); second; third."


def test_connector_and_presentation_points_never_reach_the_text() -> None:
    points = (point("0", kind="doc") + point("1", "shown1")
              + point("p1", "hidden1", kind="parTrans") + point("s1", "hidden2", kind="sibTrans")
              + point("v1", "hidden3", kind="pres"))
    links = (link("0", "1", 0) + link("1", "v1", 0, kind="presOf")
             + link("1", "s1", 0, kind="presParOf"))

    assert read(data_model_xml(points, links)) == "Diagram: shown1."


def test_an_item_without_text_gives_its_place_to_its_sub_items() -> None:
    tree: Tree = [("Plan", []), ("", [("code", []), ("review", [])]), ("Ship", [])]

    assert read(data_model(tree)) == "Diagram: Plan; code; review; Ship."


def test_nesting_closes_back_to_the_level_of_the_next_item() -> None:
    tree: Tree = [("CEO", [("CFO", [("Audit", [("Internal", [])])]), ("CTO", [])]),
                  ("Board", [])]

    assert read(data_model(tree)) == "Diagram: CEO (CFO (Audit (Internal)); CTO); Board."


def test_an_items_paragraphs_are_read_on_one_line() -> None:
    points = point("0", kind="doc") + point("1", "Ship  it", "to   users")

    assert read(data_model_xml(points, link("0", "1", 0))) == "Diagram: Ship it to users."


def test_a_long_item_is_cut_with_an_ellipsis() -> None:
    points = point("0", kind="doc") + point("1", "word " * 200)

    said = read(data_model_xml(points, link("0", "1", 0)))

    assert len(said) == len("Diagram: .") + 300
    assert said.endswith("\u2026.")


def test_items_no_connection_reaches_follow_the_tree() -> None:
    points = point("0", kind="doc") + point("1", "orphan") + point("2", "tree")

    assert read(data_model_xml(points, link("0", "2", 0))) == "Diagram: tree; orphan."


def test_a_data_model_without_connections_is_read_in_the_parts_order() -> None:
    points = point("0", kind="doc") + point("1", "first") + point("2", "second")

    assert read(data_model_xml(points, None)) == "Diagram: first; second."


def test_a_point_with_two_parents_reads_the_items_in_the_parts_order() -> None:
    points = (point("0", kind="doc") + point("1", "first") + point("2", "second")
              + point("3", "shared"))
    links = link("0", "2", 0) + link("0", "1", 1) + link("1", "3", 0) + link("2", "3", 0)

    assert read(data_model_xml(points, links)) == "Diagram: first; second; shared."


# --------------------------------------------------------------------------------- hostile


def test_a_cyclic_connection_list_reads_the_items_in_the_parts_order() -> None:
    points = "".join(point(str(n), f"p{n}") for n in range(1, 4)) + point("0", kind="doc")
    links = link("0", "1", 0) + link("1", "2", 0) + link("2", "3", 0) + link("3", "1", 0)

    assert read(data_model_xml(points, links)) == "Diagram: p1; p2; p3."


def test_a_diagram_of_100000_points_says_its_first_hundred_and_counts_the_rest() -> None:
    count = 100_000
    points = point("0", kind="doc") + "".join(
        f'<dgm:pt modelId="{n}"><dgm:t><a:p><a:r><a:t>p{n}</a:t></a:r></a:p></dgm:t></dgm:pt>'
        for n in range(1, count + 1))
    links = "".join(f'<dgm:cxn modelId="c{n}" srcId="0" destId="{n}" srcOrd="{n}"/>'
                    for n in range(1, count + 1))

    said = read(data_model_xml(points, links))

    assert said.startswith("Diagram: p1; p2; p3;")
    assert said.endswith("; p100; and 99,900 more.")


def test_a_10000_deep_chain_nests_eight_levels_and_counts_the_rest() -> None:
    depth = 10_000
    points = point("0", kind="doc") + "".join(
        f'<dgm:pt modelId="{n}"><dgm:t><a:p><a:r><a:t>p{n}</a:t></a:r></a:p></dgm:t></dgm:pt>'
        for n in range(1, depth + 1))
    links = "".join(f'<dgm:cxn modelId="c{n}" srcId="{n - 1}" destId="{n}" srcOrd="0"/>'
                    for n in range(1, depth + 1))

    said = read(data_model_xml(points, links))

    assert said.startswith("Diagram: p1 (p2 (p3 (p4 (p5 (p6 (p7 (p8 (p9; p10; p11;")
    assert said.endswith("; p100)))))))); and 9,900 more.")


def test_a_huge_diagram_stays_small_in_the_text() -> None:
    tree: Tree = [(f"step{n} " + "x" * 400, []) for n in range(2_000)]

    parsed = extract("docx", with_diagram(paragraph(run("Body."), diagram_run()), tree=tree))

    assert parsed.text.endswith("; and 1,900 more.")
    assert len(parsed.text) < 100 * 302 + 100


# ------------------------------------------------------------- real files, the isolated pool


@needs_soffice
def test_a_diagram_libreoffice_imported_and_wrote_back_is_read(tmp_path: Path) -> None:
    source = tmp_path / "plan.pptx"
    source.write_bytes(saved(diagram_deck(below="Below the diagram.")))
    subprocess.run(["soffice", "--headless", f"-env:UserInstallation=file://{tmp_path}/profile",
                    "--convert-to", "pptx", "--outdir", str(tmp_path / "out"), str(source)],
                   check=True, capture_output=True, timeout=120)
    payload = (tmp_path / "out" / "plan.pptx").read_bytes()  # LibreOffice's own writing

    parsed = extract("pptx", payload)

    assert parsed.text == f"Quarter\n\n{PLANNED}\n\nBelow the diagram."
    assert parsed.notes == (READ.format(1),)


@pytest.mark.slow
def test_a_slide_diagram_is_read_in_the_isolated_pool() -> None:
    from capsa.guard import default_extractor

    doc = extract_attachment(Attachment(label="deck.pptx",
                                        payload=saved(diagram_deck(title=None))),
                             default_extractor())

    assert doc.text == PLANNED


@pytest.mark.parametrize("name", ["report.docx", "annual-review.docx", "slides.pptx",
                                  "libreoffice/report.docx", "libreoffice/slides.pptx"])
def test_real_documents_without_diagrams_read_as_before(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    kind = name.rsplit(".", 1)[1]
    payload = (REALDOCS / name).read_bytes()
    parsed = extract(kind, payload)
    monkeypatch.setattr(office_hidden, "read_docx_diagrams", lambda document: Diagrams())
    monkeypatch.setattr(office_hidden, "read_pptx_diagrams", lambda presentation: Diagrams())

    assert (parsed.text, parsed.notes) == (extract(kind, payload).text, ())
