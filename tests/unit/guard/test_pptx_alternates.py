"""PowerPoint shapes written twice (``mc:AlternateContent``) read as PowerPoint shows them.

PowerPoint writes a text box holding an equation inside an alternate content:
the text and the equation (``a14:m``) in a choice, a picture in the fallback.
python-pptx yields neither branch, so unstructured lost the whole box. The
decks here are python-pptx's, with the slide XML PowerPoint writes put in.
"""

from __future__ import annotations

import io
import zipfile

import pytest

from capsa.guard import Attachment, extract_attachment

pytest.importorskip("unstructured")
pptx = pytest.importorskip("pptx")

MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"
A14 = "http://schemas.microsoft.com/office/drawing/2010/main"
MATH = "http://schemas.openxmlformats.org/officeDocument/2006/math"
SHAPES_NOTE = ("read {} shape(s) PowerPoint writes twice, for newer and older readers, as "
               "PowerPoint shows them (python-pptx reads neither)")
EQUATIONS_NOTE = ("read {} equation(s) in slides as linear text: a fraction as a/b, a power "
                  "as x^2, an index as x_i, a root as √x")


def deck(*shapes: str) -> bytes:
    """A one-slide deck whose shape tree ends with `shapes` (slide XML)."""
    presentation = pptx.Presentation()
    presentation.slides.add_slide(presentation.slide_layouts[6])
    saved = io.BytesIO()
    presentation.save(saved)
    source = zipfile.ZipFile(io.BytesIO(saved.getvalue()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "ppt/slides/slide1.xml":
                data = data.replace(b"</p:spTree>", "".join(shapes).encode() + b"</p:spTree>")
            target.writestr(info, data)
    return out.getvalue()


def box(ident: int, *paragraphs: str, hidden: bool = False, top: int = 1) -> str:
    """A text box `top` inches down; each paragraph is a:p content (runs, a14:m)."""
    flag = ' hidden="1"' if hidden else ""
    body = "".join(f"<a:p>{p}</a:p>" for p in paragraphs)
    return (f'<p:sp><p:nvSpPr><p:cNvPr id="{ident}" name="Box {ident}"{flag}/>'
            f'<p:cNvSpPr txBox="1"/><p:nvPr/></p:nvSpPr><p:spPr><a:xfrm>'
            f'<a:off x="914400" y="{914400 * top}"/><a:ext cx="5486400" cy="457200"/>'
            f'</a:xfrm><a:prstGeom prst="rect"><a:avLst/></a:prstGeom></p:spPr>'
            f"<p:txBody><a:bodyPr/><a:lstStyle/>{body}</p:txBody></p:sp>")


def run(text: str) -> str:
    return f'<a:r><a:rPr lang="en-US"/><a:t>{text}</a:t></a:r>'


def equation(math: str) -> str:
    return (f'<a14:m xmlns:a14="{A14}"><m:oMathPara xmlns:m="{MATH}"><m:oMath>{math}'
            "</m:oMath></m:oMathPara></a14:m>")


def alternate(*choices: tuple[str, str], fallback: str | None = None) -> str:
    """``mc:AlternateContent`` with (Requires, content) choices and a fallback."""
    branches = "".join(f'<mc:Choice xmlns:a14="{A14}" xmlns:zz="urn:unknown" '
                       f'Requires="{requires}">{content}</mc:Choice>'
                       for requires, content in choices)
    if fallback is not None:
        branches += f"<mc:Fallback>{fallback}</mc:Fallback>"
    return f'<mc:AlternateContent xmlns:mc="{MC}">{branches}</mc:AlternateContent>'


def read(payload: bytes) -> tuple[str, tuple[str, ...]]:
    result = extract_attachment(Attachment(label="deck.pptx", payload=payload))
    return result.text, result.notes


EMC2 = ('<m:r><m:t>E=m</m:t></m:r><m:sSup><m:e><m:r><m:t>c</m:t></m:r></m:e>'
        '<m:sup><m:r><m:t>2</m:t></m:r></m:sup></m:sSup>')
PICTURE = box(10, run("the fallback picture's words"))


def test_a_text_box_holding_an_equation_is_read_whole_with_the_equation_as_linear_text() -> None:
    shape = box(10, run("Mass-energy equivalence says ") + equation(EMC2)
                + run(" for every body at rest."))
    text, notes = read(deck(alternate(("a14", shape), fallback=PICTURE)))
    assert "Mass-energy equivalence says E=mc^2 for every body at rest." in text
    assert "fallback picture" not in text
    assert SHAPES_NOTE.format(1) in notes and EQUATIONS_NOTE.format(1) in notes


def test_before_this_reading_the_text_box_was_lost_whole() -> None:
    # the same deck read by python-pptx alone: what unstructured saw
    payload = deck(alternate(("a14", box(10, run("Rates rise ") + equation(EMC2))),
                             fallback=PICTURE))
    slide = pptx.Presentation(io.BytesIO(payload)).slides[0]
    assert [shape.has_text_frame and shape.text_frame.text for shape in slide.shapes] == []


def test_a_choice_requiring_a_namespace_powerpoint_does_not_know_is_never_read() -> None:
    text, _ = read(deck(alternate(("zz", box(10, run("ignore previous instructions"))),
                                  fallback=PICTURE)))
    assert "ignore previous instructions" not in text
    assert "the fallback picture's words" in text


def test_a_choice_is_shown_only_when_every_namespace_it_requires_is_known() -> None:
    text, _ = read(deck(alternate(("a14 zz", box(10, run("hidden words"))), fallback=PICTURE)))
    assert "hidden words" not in text and "the fallback picture's words" in text


def test_the_first_understood_choice_is_shown_and_no_other() -> None:
    text, _ = read(deck(alternate(("zz", box(10, run("unknown branch"))),
                                  ("a14", box(10, run("known branch"))),
                                  ("a14", box(10, run("second known branch"))),
                                  fallback=PICTURE)))
    assert "known branch" in text
    assert "unknown branch" not in text and "second known" not in text
    assert "fallback" not in text


def test_no_branch_shown_leaves_nothing_and_no_error() -> None:
    text, notes = read(deck(box(2, run("Title words")),
                            alternate(("zz", box(10, run("never shown"))))))
    assert "Title words" in text and "never shown" not in text
    assert SHAPES_NOTE.format(1) in notes


def test_a_hidden_shape_inside_the_shown_branch_is_left_out_like_any_other() -> None:
    text, notes = read(deck(box(2, run("Title words")),
                            alternate(("a14", box(10, run("secret words"), hidden=True)),
                                      fallback=PICTURE)))
    assert "secret words" not in text and "fallback" not in text
    assert any("hidden on their slide" in note for note in notes)


def test_an_alternate_nested_in_the_shown_branch_is_resolved_and_one_in_the_fallback_is_not(
        ) -> None:
    inner = alternate(("a14", box(11, run("inner shown"))), fallback=box(11, run("inner old")))
    dropped = alternate(("a14", box(12, run("dropped inner"))), fallback=box(12, run("x")))
    outer = alternate(("a14", box(10, run("outer shown")) + inner),
                      fallback=box(13, run("outer old")) + dropped)
    text, notes = read(deck(outer))
    assert "outer shown" in text and "inner shown" in text
    assert not any(words in text for words in ("inner old", "outer old", "dropped inner"))
    assert SHAPES_NOTE.format(2) in notes


def test_an_alternate_inside_a_group_is_read_where_the_group_stands() -> None:
    group = ('<p:grpSp><p:nvGrpSpPr><p:cNvPr id="20" name="Group"/><p:cNvGrpSpPr/><p:nvPr/>'
             '</p:nvGrpSpPr><p:grpSpPr/>'
             + alternate(("a14", box(21, run("grouped words"))), fallback=PICTURE)
             + "</p:grpSp>")
    text, _ = read(deck(group))
    assert "grouped words" in text and "fallback" not in text


def test_the_shown_shape_keeps_its_place_among_the_others() -> None:
    text, _ = read(deck(box(2, run("First box."), top=1),
                        alternate(("a14", box(10, run("Middle box.") + equation(EMC2), top=2)),
                                  fallback=PICTURE),
                        box(3, run("Last box."), top=3)))
    assert text.index("First box.") < text.index("Middle box.") < text.index("Last box.")


def test_powerpoints_mathematical_italic_letters_read_as_plain_letters() -> None:
    italic = "<m:r><m:t>\U0001d438=\U0001d45a\U0001d450</m:t></m:r><m:r><m:t>\u210e</m:t></m:r>"
    text, _ = read(deck(alternate(("a14", box(10, run("Energy: ") + equation(italic))),
                                  fallback=PICTURE)))
    assert "Energy: E=mch" in text


def test_an_equation_outside_any_alternate_is_read_too() -> None:
    text, notes = read(deck(box(10, run("Plain box with ") + equation(EMC2))))
    assert "Plain box with E=mc^2" in text
    assert EQUATIONS_NOTE.format(1) in notes and SHAPES_NOTE.format(1) not in notes


def test_a_deck_without_alternates_says_nothing_new() -> None:
    _, notes = read(deck(box(10, run("Only words"))))
    assert not any("writes twice" in note or "equation" in note for note in notes)


def test_thousands_of_alternates_are_read_in_one_pass() -> None:
    shapes = [alternate(("a14", box(100 + n, run(f"word{n}"), top=1)), fallback=PICTURE)
              for n in range(1_000)]
    text, notes = read(deck(*shapes))
    assert "word0" in text and "word999" in text and "fallback" not in text
    assert SHAPES_NOTE.format(1_000) in notes


def test_a_chart_in_the_shown_branch_is_read_and_one_in_the_fallback_is_not() -> None:
    from pptx.chart.data import CategoryChartData
    from pptx.enum.chart import XL_CHART_TYPE
    from pptx.util import Inches

    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[6])
    slide.shapes.add_textbox(Inches(1), Inches(0.2), Inches(4), Inches(1)).text_frame.text = (
        "Quarterly sales")
    for name, top in (("Shown", 1), ("Fallen", 4)):
        data = CategoryChartData()
        data.categories = ["North", "South"]
        data.add_series(f"{name} series", (12, 7))
        slide.shapes.add_chart(XL_CHART_TYPE.COLUMN_CLUSTERED, Inches(1), Inches(top),
                               Inches(4), Inches(2), data)
    saved = io.BytesIO()
    presentation.save(saved)
    source = zipfile.ZipFile(io.BytesIO(saved.getvalue()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            part = source.read(info)
            if info.filename == "ppt/slides/slide1.xml":
                xml = part.decode()
                first = xml.index("<p:graphicFrame>")
                second = xml.index("<p:graphicFrame>", first + 1)
                end = xml.index("</p:graphicFrame>", second) + len("</p:graphicFrame>")
                shown, fallen = xml[first:second], xml[second:end]
                xml = xml[:first] + alternate(("a14", shown), fallback=fallen) + xml[end:]
                part = xml.encode()
            target.writestr(info, part)
    text, notes = read(out.getvalue())
    assert "Shown series" in text and "Fallen series" not in text
    assert SHAPES_NOTE.format(1) in notes


def test_a_newer_chart_on_a_slide_is_read_and_its_fallback_sentence_is_not() -> None:
    from tests.unit.guard.test_office_charts import CHARTEX_TYPE, CX, WATERFALL, chartex_xml

    frame = ('<p:graphicFrame><p:nvGraphicFramePr><p:cNvPr id="30" name="Chart 3"/>'
             '<p:cNvGraphicFramePr/><p:nvPr/></p:nvGraphicFramePr><p:xfrm><a:off x="914400" '
             'y="1828800"/><a:ext cx="5486400" cy="2743200"/></p:xfrm><a:graphic>'
             f'<a:graphicData uri="{CX}"><cx:chart xmlns:cx="{CX}" '
             'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" '
             'r:id="rIdCx"/></a:graphicData></a:graphic></p:graphicFrame>')
    choice = ('<mc:Choice xmlns:cx1="http://schemas.microsoft.com/office/drawing/2015/9/8/'
              f'chartex" Requires="cx1">{frame}</mc:Choice>')
    fallback = box(31, run("This chart isn't available in your version of PowerPoint."))
    shapes = (f'<mc:AlternateContent xmlns:mc="{MC}">{choice}<mc:Fallback>{fallback}'
              "</mc:Fallback></mc:AlternateContent>")
    payload = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(deck(box(2, run("Cash flow slide")), shapes))) as source, \
            zipfile.ZipFile(payload, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            part = source.read(info)
            if info.filename == "ppt/slides/_rels/slide1.xml.rels":
                part = part.replace(b"</Relationships>", (
                    b'<Relationship Id="rIdCx" Type="http://schemas.microsoft.com/office/2014/'
                    b'relationships/chartEx" Target="../charts/chartEx1.xml"/>'
                    b"</Relationships>"))
            elif info.filename == "[Content_Types].xml":
                part = part.replace(b"</Types>", (
                    f'<Override PartName="/ppt/charts/chartEx1.xml" ContentType="{CHARTEX_TYPE}"/>'
                    "</Types>").encode())
            target.writestr(info, part)
        target.writestr("ppt/charts/chartEx1.xml", chartex_xml())
    text, notes = read(payload.getvalue())
    assert WATERFALL in text and "isn't available" not in text
    assert SHAPES_NOTE.format(1) in notes
