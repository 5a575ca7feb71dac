"""MathML in HTML reaches the text as linear math, where unstructured read nothing.

unstructured reads a ``<math>`` only through a TeX annotation or an
``alttext``; `annotate_math` gives the others an ``alttext`` of their linear
text. These run the real partitioner through `UnstructuredExtractor`, and the
linear writer directly.
"""

from __future__ import annotations

import pytest
from lxml import etree

from capsa.guard.extractors import UnstructuredExtractor
from capsa.guard.extractors._html_math import linear_mathml

pytest.importorskip("unstructured")


def text_of(body: str) -> str:
    page = f"<html><head><title>t</title></head><body>{body}</body></html>".encode()
    return UnstructuredExtractor().extract("html", None, page, max_pages=5).text


def mi(name: str) -> str:
    return f"<mi>{name}</mi>"


@pytest.mark.parametrize(("mathml", "linear"), [
    (f"{mi('π')}<msup>{mi('r')}<mn>2</mn></msup>", "πr^2"),
    (f"<mfrac><mrow>{mi('a')}<mo>+</mo>{mi('b')}</mrow><mn>2</mn></mfrac>", "(a+b)/2"),
    (f"<mfrac linethickness='0'>{mi('n')}{mi('k')}</mfrac>", "n¦k"),
    (f"<msubsup>{mi('x')}{mi('i')}<mn>2</mn></msubsup>", "x_i^2"),
    (f"<msup>{mi('e')}<mrow><mi>i</mi><mi>π</mi></mrow></msup>", "e^iπ"),  # letters: one operand
    (f"<msqrt>{mi('x')}<mo>+</mo><mn>1</mn></msqrt>", "√(x+1)"),
    (f"<mroot>{mi('x')}<mn>3</mn></mroot>", "∛x"),
    (f"<mroot>{mi('x')}<mn>5</mn></mroot>", "√(5&x)"),
    (f"<munderover><mo>∑</mo><mrow>{mi('i')}<mo>=</mo><mn>1</mn></mrow>{mi('n')}"
     f"</munderover><msub>{mi('x')}{mi('i')}</msub>", "∑_(i=1)^n x_i"),
    (f"<munder><mo>lim</mo><mrow>{mi('n')}<mo>→</mo><mi>∞</mi></mrow></munder>"
     f"<msub>{mi('a')}{mi('n')}</msub>", "lim_(n→∞) a_n"),
    ("<mfenced open='[' close=']'><mn>0</mn><mn>1</mn></mfenced>", "[0,1]"),
    ("<mrow><mo>(</mo><mtable><mtr><mtd><mn>1</mn></mtd><mtd><mn>0</mn></mtd></mtr>"
     "<mtr><mtd><mn>0</mn></mtd><mtd><mn>1</mn></mtd></mtr></mtable><mo>)</mo></mrow>",
     "(1, 0; 0, 1)"),
    (f"{mi('x')}<mphantom>{mi('y')}</mphantom><mo>+</mo>{mi('z')}", "x+z"),
    (f"<semantics><mrow>{mi('x')}</mrow><annotation encoding='text/plain'>ex</annotation>"
     "</semantics>", "x"),
    (f"<menclose notation='box'>{mi('x')}</menclose>", "x"),  # unknown: its text in order
])
def test_mathml_is_written_as_linear_math(mathml: str, linear: str) -> None:
    assert linear_mathml(etree.fromstring(f"<math>{mathml}</math>")) == linear


def test_inline_mathml_stands_where_it_is_in_its_sentence() -> None:
    body = f"<p>Area is <math>{mi('π')}<msup>{mi('r')}<mn>2</mn></msup></math> square units.</p>"

    assert text_of(body) == "Area is πr^2 square units."


def test_display_mathml_is_its_own_element() -> None:
    body = (f"<p>Before.</p><math display='block'><mfrac>{mi('a')}{mi('b')}</mfrac></math>"
            "<p>After.</p>")

    assert text_of(body).split("\n\n") == ["Before.", "a/b", "After."]


@pytest.mark.parametrize(("math", "read"), [
    (f"<math alttext='x squared'><msup>{mi('x')}<mn>2</mn></msup></math>", "x squared"),
    (f"<math><semantics><msup>{mi('x')}<mn>2</mn></msup><annotation "
     "encoding='application/x-tex'>x^{2}</annotation></semantics></math>", "x^{2}"),
])
def test_math_unstructured_already_reads_is_left_as_it_is(math: str, read: str) -> None:
    assert text_of(f"<p>See {math} here.</p>") == f"See {read} here."


def test_deep_mathml_is_read_in_order_past_the_structure_depth() -> None:
    deep = "<mrow>" * 200 + mi("x") + "<mo>+</mo>" + mi("y") + "</mrow>" * 200

    assert linear_mathml(etree.fromstring(f"<math>{deep}</math>")) == "x+y"
