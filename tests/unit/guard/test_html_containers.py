"""HTML containers whose text a reader sees, which unstructured drops whole, are read.

unstructured 0.27 maps ``form``, ``details``, ``summary``, ``figure`` and
``dialog`` to element classes that drop their content as likely boilerplate;
a page wrapped in one ``<form>`` (ASP.NET Web Forms) read as nothing. These
run the real partitioner through `UnstructuredExtractor`.
"""

from __future__ import annotations

import re

import pytest

from capsa.guard.extractors import UnstructuredExtractor
from capsa.guard.port import Parsed

pytest.importorskip("unstructured")

MARKER = re.compile(r"\b(?:shown|hidden)\d+\b")


def extract(body: str, kind: str = "html") -> Parsed:
    page = f"<html><head><title>t</title></head><body>{body}</body></html>".encode()
    return UnstructuredExtractor().extract(kind, None, page, max_pages=5)


@pytest.mark.parametrize("body", [
    '<form id="form1" action="./Default.aspx"><div><h1>shown1</h1><p>shown2 words.</p>'
    "</div></form>",
    "<details><summary>shown1 question?</summary><p>shown2 answer.</p></details>",
    "<details open><summary><h3>shown1</h3></summary>shown2 text</details>",
    "<figure><figcaption>shown1 caption.</figcaption></figure><p>shown2</p>",
    "<dialog open><p>shown1 notice.</p></dialog><p>shown2</p>",
    "<form><details><summary>shown1</summary><figure><p>shown2</p></figure></details></form>",
])
def test_text_a_reader_sees_inside_a_container_unstructured_drops_is_read(body: str) -> None:
    assert MARKER.findall(extract(body).text) == ["shown1", "shown2"]


@pytest.mark.parametrize("body", [
    "<dialog><p>hidden1 closed dialog.</p></dialog><p>shown2</p>",  # the UA style hides it
    "<details hidden><summary>hidden1</summary></details><p>shown2</p>",
    '<form style="display:none"><p>hidden1</p></form><p>shown2</p>',
    "<nav><a href='/'>hidden1</a></nav><p>shown2</p>",  # a site's menu stays out
    "<form><button>hidden1</button><label>hidden3</label><p>shown2</p></form>",
])
def test_what_stays_out_stays_out(body: str) -> None:
    assert MARKER.findall(extract(body).text) == ["shown2"]


def test_an_html_mail_body_in_a_form_is_read() -> None:
    mail = (b"From: a@example.com\r\nTo: b@example.com\r\nSubject: Your order\r\n"
            b"MIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n\r\n"
            b"<html><body><form action='https://shop.example/track'><p>Order 4411 ships "
            b"on Monday.</p></form></body></html>\r\n")

    assert "Order 4411 ships on Monday." in extract_mail(mail).text


def extract_mail(mail: bytes) -> Parsed:
    return UnstructuredExtractor().extract("eml", None, mail, max_pages=5)


FOLDED = ("kept the text of {} collapsed section(s) (<details> without open): a reader sees "
          "it once the section is unfolded")


@pytest.mark.parametrize(("body", "folded"), [
    ("<details><summary>Q?</summary><p>answer</p></details>", 1),
    ("<details><summary>Q?</summary>bare answer</details>", 1),
    ("<details>no summary at all</details>", 1),
    ("<details><summary>Q1?</summary>a</details><details><summary>Q2?</summary>b</details>", 2),
    ("<details open><summary>Q?</summary><p>answer</p></details>", 0),
    ("<details><summary>Only a summary</summary></details><p>text</p>", 0),
    ("<details><summary>Q?</summary><p hidden>secret</p></details><p>text</p>", 0),
])
def test_a_closed_details_section_with_text_is_named_in_a_note(body: str, folded: int) -> None:
    notes = extract(body).notes
    assert [note for note in notes if "collapsed" in note] == (
        [FOLDED.format(folded)] if folded else [])
