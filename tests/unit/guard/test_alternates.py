"""Content written twice for newer and older readers is read as the application draws it.

`capsa.guard.extractors._alternates` picks the branch of an
``mc:AlternateContent`` an application draws: its first choice whose required
namespaces the application knows, else the fallback. The rules are pinned
on bare trees first, then through Word files read by the real `unstructured`
partitioner: before one rule served all three applications, Word read the
first branch whatever it required (words in a choice no reader draws were
read, the fallback Word shows was lost), lost every run and emoji written as
alternate content, and charts and text boxes each had a rule of their own.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree
from tests.unit.guard.test_docx_notes import cite, notes_part
from tests.unit.guard.test_office_hidden import MARKER, docx, extract, paragraph, run

from capsa.guard.extractors._alternates import (
    EXCEL,
    POWERPOINT,
    WORD,
    in_unshown_branch,
    resolve,
    shown_branch,
)
from capsa.guard.extractors._floors import _docx_visible_text

pytest.importorskip("unstructured")

MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"
W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
W14 = "http://schemas.microsoft.com/office/word/2010/wordml"
WPS = "http://schemas.microsoft.com/office/word/2010/wordprocessingShape"
W16SE = "http://schemas.microsoft.com/office/word/2015/wordml/symex"
P14 = "http://schemas.microsoft.com/office/powerpoint/2010/main"
NOBODY = "urn:capsa:no-reader-knows-this"
WORD_NOTE = ("read {} passage(s) Word writes twice, for newer and older readers, as Word shows "
             "them (python-docx reads neither)")
DECLARED = {"w14": W14, "wps": WPS, "w16se": W16SE, "p14": P14, "zz": NOBODY}


def alternate(*choices: tuple[str, str], fallback: str | None = None) -> str:
    """An ``mc:AlternateContent`` of (requires, content) choices and an optional fallback, with
    every prefix a choice requires declared on it, as Word declares them on the root."""
    declared = "".join(f' xmlns:{prefix}="{uri}"' for prefix, uri in DECLARED.items())
    branches = "".join(f'<mc:Choice Requires="{requires}">{content}</mc:Choice>'
                       for requires, content in choices)
    if fallback is not None:
        branches += f"<mc:Fallback>{fallback}</mc:Fallback>"
    return f'<mc:AlternateContent xmlns:mc="{MC}"{declared}>{branches}</mc:AlternateContent>'


def tree(content: str) -> etree._Element:
    return etree.fromstring(f'<w:p xmlns:w="{W}">{content}</w:p>'.encode())


def texts(root: etree._Element) -> list[str]:
    return [t.text or "" for t in root.iter(f"{{{W}}}t")]


# ----------------------------------------------------------------------- the rule itself


def test_the_first_choice_the_application_knows_is_drawn() -> None:
    root = tree(alternate(("zz", run("hidden1")), ("w14", run("shown1")),
                          ("wps", run("hidden2")), fallback=run("hidden3")))
    drawn = shown_branch(root[0], WORD)

    assert drawn is not None and texts(drawn) == ["shown1"]


@pytest.mark.parametrize("requires", ["zz", "w14 zz", "undeclared", ""])
def test_a_choice_needing_anything_unknown_falls_back(requires: str) -> None:
    # an undeclared prefix names no namespace, and a choice requiring nothing is not valid
    root = tree(alternate((requires, run("hidden1")), fallback=run("shown1")))

    assert texts(shown_branch(root[0], WORD)) == ["shown1"]


def test_with_no_choice_known_and_no_fallback_nothing_is_drawn() -> None:
    root = tree(alternate(("zz", run("hidden1"))))

    assert shown_branch(root[0], WORD) is None
    assert in_unshown_branch(root.find(f".//{{{W}}}t"), WORD)


def test_each_application_knows_its_own_namespaces_only() -> None:
    root = tree(alternate(("p14", run("slide")), fallback=run("page")))

    assert texts(shown_branch(root[0], POWERPOINT)) == ["slide"]
    assert texts(shown_branch(root[0], WORD)) == ["page"]
    assert texts(shown_branch(root[0], EXCEL)) == ["page"]


def test_an_element_in_a_branch_inside_the_drawn_one_is_judged_at_every_level() -> None:
    inner = alternate(("zz", run("hidden1")), fallback=run("shown2"))
    root = tree(alternate(("w14", run("shown1") + inner), fallback=run("hidden2")))
    by_text = {t.text: t for t in root.iter(f"{{{W}}}t")}

    assert [word for word, t in by_text.items() if not in_unshown_branch(t, WORD)] == [
        "shown1", "shown2"]


def test_resolving_puts_the_drawn_content_in_place_outermost_first() -> None:
    inner = alternate(("zz", run("hidden1")), fallback=run("shown2"))
    root = tree(run("shown0") + alternate(("w14", run("shown1") + inner),
                                          fallback=run("hidden2" + alternate(
                                              ("w14", run("hidden3")))))
                + run("shown3"))

    placed = resolve(root, WORD, where=lambda parent: True, limit=100)

    assert texts(root) == ["shown0", "shown1", "shown2", "shown3"]
    assert len(placed) == 2  # the outer and the inner one it drew; the fallback's went with it
    assert next(root.iter(f"{{{MC}}}AlternateContent"), None) is None


def test_resolving_leaves_what_where_refuses_and_stops_at_the_limit() -> None:
    root = tree(alternate(("w14", run("shown1")), fallback=run("hidden1"))
                + alternate(("w14", run("shown2")), fallback=run("hidden2")))

    placed = resolve(root, WORD, where=lambda parent: True, limit=1)

    assert len(placed) == 1
    assert texts(root) == ["shown1", "shown2", "hidden2"]
    assert resolve(root, WORD, where=lambda parent: False, limit=100) == []


# ------------------------------------------------------------------------ through Word


def test_words_in_a_choice_word_cannot_draw_stay_out_and_its_fallback_is_read() -> None:
    body = paragraph(run("shown1 "), alternate(("zz", run("hidden1 ")), fallback=run("shown2")))

    parsed = extract("docx", docx(body))

    assert MARKER.findall(parsed.text) == ["shown1", "shown2"]
    assert parsed.notes == (WORD_NOTE.format(1),)


def test_a_text_box_whose_drawing_word_cannot_draw_is_read_from_its_fallback() -> None:
    def box(word: str) -> str:
        return (f"<w:txbxContent>{paragraph(run(word))}</w:txbxContent>")

    drawing = (f'<w:drawing><wps:wsp><wps:txbx>{box("hidden1")}</wps:txbx></wps:wsp>'
               "</w:drawing>")
    vml = (f'<w:pict><v:shape xmlns:v="urn:schemas-microsoft-com:vml"><v:textbox>'
           f'{box("shown2")}</v:textbox></v:shape></w:pict>')
    body = paragraph(run("shown1 "), f"<w:r>{alternate(('wps zz', drawing), fallback=vml)}</w:r>")

    parsed = extract("docx", docx(body))

    assert MARKER.findall(parsed.text) == ["shown1", "shown2"]
    assert parsed.notes == ()  # a text box read is no passage of text written twice


def emoji(code: str, fallback: str) -> str:
    """A run holding a character as Word 2016 and later write an emoji: a symbol extension
    naming its code point, and the character itself for older readers."""
    symbol = f'<w16se:symEx w16se:font="Segoe UI Emoji" w16se:char="{code}"/>'
    return f"<w:r>{alternate(('w16se', symbol), fallback=f'<w:t>{fallback}</w:t>')}</w:r>"


def test_an_emoji_reads_as_its_character_in_the_body_and_in_a_footnote() -> None:
    body = (paragraph(run("Shipped "), emoji("1F680", "\U0001f680"), run(" on time"),
                      cite("footnote", 1)))
    parts = notes_part("footnote", {1: paragraph(run("Rated "), emoji("2B50", "\u2b50"))})

    parsed = extract("docx", docx(body, parts=parts))

    assert parsed.text.startswith("Shipped \U0001f680 on time[1]")
    assert parsed.text.endswith("[1] Rated \u2b50")
    assert WORD_NOTE.format(2) in parsed.notes


@pytest.mark.parametrize("code", ["D800", "110000", "not-hex", "1F", ""])
def test_a_symbol_naming_no_character_reads_as_nothing(code: str) -> None:
    parsed = extract("docx", docx(paragraph(run("shown1 "), emoji(code, "hidden1"),
                                            run(" shown2"))))

    assert MARKER.findall(parsed.text) == ["shown1", "shown2"]


def test_an_alternate_in_a_runs_properties_is_left_as_it_stands() -> None:
    fonts = alternate(("w16se", f'<w:rFonts xmlns:w="{W}" w:ascii="Segoe UI Emoji"/>'),
                      fallback=f'<w:rFonts xmlns:w="{W}" w:ascii="Segoe UI Symbol"/>')
    body = f'<w:p><w:r><w:rPr>{fonts}</w:rPr><w:t>shown1</w:t></w:r></w:p>'

    parsed = extract("docx", docx(body))

    assert parsed.text == "shown1"
    assert parsed.notes == ()


def test_whole_paragraphs_written_twice_are_read_once() -> None:
    body = (paragraph(run("shown1"))
            + alternate(("w14", paragraph(run("shown2")) + paragraph(run("shown3"))),
                        fallback=paragraph(run("hidden1")))
            + paragraph(run("shown4")))

    parsed = extract("docx", docx(body))

    assert MARKER.findall(parsed.text) == ["shown1", "shown2", "shown3", "shown4"]


def test_hidden_runs_inside_the_drawn_branch_still_stay_out() -> None:
    body = paragraph(run("shown1 "), alternate(
        ("w14", run("hidden1 ", "<w:vanish/>") + run("shown2")), fallback=run("hidden2")))

    assert MARKER.findall(extract("docx", docx(body)).text) == ["shown1", "shown2"]


# ------------------------------------------------------------------- the floor stays one

BRANCH_WORDS = st.text(alphabet="abcdefgh ", min_size=0, max_size=30)


@settings(max_examples=40, deadline=None)
@given(requires=st.sampled_from(["w14", "zz", "wps zz"]), choice=BRANCH_WORDS,
       fallback=BRANCH_WORDS, before=BRANCH_WORDS)
def test_the_docx_floor_never_counts_a_branch_the_parser_may_not_read(
        requires: str, choice: str, fallback: str, before: str) -> None:
    body = paragraph(run(before), alternate((requires, run(choice)), fallback=run(fallback)))
    document = (f'<w:document xmlns:w="{W}"><w:body>{body}</w:body></w:document>').encode()

    floor = _docx_visible_text(document)
    read = extract("docx", docx(body)).text

    assert floor <= len("".join(read.split()))
