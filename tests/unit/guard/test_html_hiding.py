"""The tokenizer pass that finds what a page hides: one state per the HTML standard's rules.

Each case is a page (HTML as markdown-it writes it) and the stretches a
browser does not show as text, as ``(hidden text, what)``.
"""

from __future__ import annotations

import pytest

from capsa.guard.extractors._html_hiding import hidden_ranges


def hidden(page: str, *, swallowing: bool = False) -> list[tuple[str, str]]:
    """What `hidden_ranges` hides in `page`; `swallowing` says every tag reaches text."""
    return [(page[found.start:found.end], found.what)
            for found in hidden_ranges(page, lambda start, end: swallowing)]


@pytest.mark.parametrize(("page", "expected"), [
    ("a<!---->b<!-->c<!--->d<!-- x --!>e", [("<!---->", "comment"), ("<!-->", "comment"),
                                            ("<!--->", "comment"), ("<!-- x --!>", "comment")]),
    ("a<? x >b<!DOCTYPE html>c</3 x>d<![CDATA[ y ]]>", [
        ("<? x >", "comment"), ("<!DOCTYPE html>", "comment"), ("</3 x>", "comment"),
        ("<![CDATA[ y ]]>", "comment")]),
    ("a<!-- never closed", [("<!-- never closed", "comment")]),
    ("a</>b", []),
])
def test_comments_of_every_kind_end_where_the_tokenizer_ends_them(
        page: str, expected: list[tuple[str, str]]) -> None:
    assert hidden(page) == expected


@pytest.mark.parametrize(("page", "hidden_text"), [
    ("<script>a</script>b", "<script>a</script>"),
    ('<script>a</script x=">">b', '<script>a</script x=">">'),
    ("<script><!--<script></script>a</script>b", "<script><!--<script></script>a</script>"),
    ("<script><!--<script>--></script>b", "<script><!--<script>--></script>"),
    ("<script><!-- a --></script>b", "<script><!-- a --></script>"),
    ("<SCRIPT>a</sCrIpT\t>b", "<SCRIPT>a</sCrIpT\t>"),
    ("<script>a</scripts></script>b", "<script>a</scripts></script>"),
])
def test_a_script_ends_at_its_end_tag_through_the_escaped_states(
        page: str, hidden_text: str) -> None:
    assert hidden(page) == [(hidden_text, "script")]


def test_tag_names_compare_in_ascii_case_only() -> None:
    page = "<script>a</\u017fcript>b</script>c"  # a long s is not an 's' to a browser

    assert hidden(page) == [("<script>a</\u017fcript>b</script>", "script")]


def test_an_attribute_value_holding_a_gt_does_not_end_the_tag() -> None:
    assert hidden('<style title="a>b">x</style>y') == [('<style title="a>b">x</style>', "style")]


@pytest.mark.parametrize("page", ["<textarea><!-- a --></textarea>", "<xmp><!-- a --></xmp>",
                                  "<plaintext><!-- a --></plaintext><script>"])
def test_shown_raw_text_elements_hold_no_markup(page: str) -> None:
    assert hidden(page) == []


def test_a_template_ends_at_its_own_end_tag() -> None:
    page = "<template><template></template><style></template></style>a</template>b"

    assert hidden(page) == [(page[:-1], "template")]


def test_svg_reads_cdata_as_text_and_textarea_as_markup() -> None:
    page = "<svg><![CDATA[ a ]]><textarea><!-- b --></textarea></svg>"

    assert hidden(page) == [("<!-- b -->", "comment")]


def test_svg_hiding_elements_end_at_their_end_tag_not_in_a_comment() -> None:
    page = "<svg><script><!--</script>-->a</script>b</svg>"

    assert hidden(page) == [("<script><!--</script>-->a</script>", "script")]


def test_an_html_tag_breaks_out_of_svg_and_closes_what_it_opened() -> None:
    page = "<p><svg><style>a</p><textarea><!-- b --></textarea>"

    assert hidden(page) == [("<style>a", "style")]


def test_an_svg_integration_point_reads_html_inside() -> None:
    page = "<svg><foreignObject><textarea><!-- a --></textarea></foreignObject></svg>"

    assert hidden(page) == []


def test_a_tag_that_reaches_past_its_markup_is_hidden_with_what_it_swallowed() -> None:
    page = '<span title="a\n<p>b</p>\n<p>" c>d'

    assert hidden(page, swallowing=True) == [(page[:-1], "tag")]
