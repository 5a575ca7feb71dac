"""Word characters python-docx does not yield as text: symbols and phonetic guides.

python-docx reads a run's ``w:t``, tabs and breaks, and nothing else. Word
shows more:

- **A symbol** inserted from a symbol font (``w:sym``): Insert > Symbol in
  the Symbol font writes ``<w:sym w:font="Symbol" w:char="F061"/>``, drawn
  as α. Engineering and science documents write their Greek letters and
  operators so ("the α coefficient" read as "the  coefficient"). The
  Symbol font's letters are written as the Unicode characters they draw
  (`SYMBOL_FONT`); a symbol of any other font is written when its code is a
  character of its own, and left out when it is a private-use code whose
  glyph only that font knows (Wingdings' check marks).
- **An emoji** Word 2016 and later write as a symbol extension
  (``w16se:symEx``) whose fallback is the character
  (`capsa.guard.extractors._alternates`): `symbol_extension` writes the
  character it names.
- **Text typed in the Symbol font**: a run whose own fonts are Symbol draws
  its letters as that font's (``a`` as α), as documents from Word 97 and
  their conversions hold them, sometimes as the private-use codes
  (U+F061) that normalisation would strip. Each letter is written as the
  character drawn; a font set only by a style is not looked up.
- **A phonetic guide** (``w:ruby``: furigana over Japanese kanji, pinyin over
  Chinese): the base text and its reading, as ``漢字(かんじ)``, as an HTML
  page writes ruby with ``rp`` parentheses. The base was lost whole
  ("これは漢字です" read as "これはです").
"""

from __future__ import annotations

from typing import Any

__all__ = ["SYMBOL_FONT", "read_glyphs", "symbol_extension"]

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_W16SE = "{http://schemas.microsoft.com/office/word/2015/wordml/symex}"

SYMBOL_FONT: dict[int, str] = {
    **{code: chr(code) for code in b" !#%&(),./0123456789:;<=>?[]_{|}"},
    0x22: "\u2200", 0x24: "\u2203", 0x27: "\u220b", 0x2A: "\u2217", 0x2B: "+",
    0x2D: "\u2212", 0x40: "\u2245", 0x5C: "\u2234", 0x5E: "\u22a5", 0x7E: "\u223c",
    **dict(zip(range(0x41, 0x5B), "ΑΒΧΔΕΦΓΗΙϑΚΛΜΝΟΠΘΡΣΤΥςΩΞΨΖ", strict=True)),
    **dict(zip(range(0x61, 0x7B), "αβχδεφγηιϕκλμνοπθρστυϖωξψζ", strict=True)),
    **dict(zip(range(0xA1, 0xBD),
               "ϒ′≤⁄∞ƒ♣♦♥♠↔←↑→↓°±″≥×∝∂•÷≠≡≈…", strict=True)),
    **dict(zip(range(0xBF, 0xE2),
               "↵ℵℑℜ℘⊗⊕∅∩∪⊃⊇⊄⊂⊆∈∉∠∇®©™∏√⋅¬∧∨⇔⇐⇑⇒⇓◊⟨", strict=True)),
    0xE2: "®", 0xE3: "©", 0xE4: "™", 0xE5: "\u2211", 0xF1: "\u27e9", 0xF2: "\u222b",
}
"""The Symbol font's codes (Word writes them from U+F020) as the characters they draw.
Codes that draw only a piece of a tall bracket or an extender are not in it."""

_SYMBOL_FONTS = frozenset({"symbol"})


def read_glyphs(roots: Any) -> int:
    """Write each symbol and phonetic guide under `roots` (the text parts' root elements)
    as the text Word draws; return how many there were."""
    written = 0
    for root in roots:
        for symbol in list(root.iter(f"{_W}sym")):
            if _holds_content(symbol):
                _replace_by_text(symbol, _symbol_text(symbol.get(f"{_W}font"),
                                                      symbol.get(f"{_W}char")))
                written += 1
        for ruby in list(root.iter(f"{_W}ruby")):
            if _spell_out(ruby):
                written += 1
        for run in root.iter(f"{_W}r"):
            if _in_symbol_font(run):
                for text in run.iterchildren(f"{_W}t"):
                    text.text = "".join(_symbol_letter(char) for char in text.text or "")
                written += 1
    return written


def _in_symbol_font(run: Any) -> bool:
    """Whether the run's own fonts (``w:rFonts``) set the Symbol font for its letters."""
    fonts = run.find(f"{_W}rPr/{_W}rFonts")
    return fonts is not None and any(
        (fonts.get(f"{_W}{which}") or "").strip().lower() in _SYMBOL_FONTS
        for which in ("ascii", "hAnsi"))


def _symbol_letter(char: str) -> str:
    """What the Symbol font draws for `char`, typed as a letter (``a``) or as its
    private-use code (U+F061); any other character is drawn by a fallback font as itself."""
    point = ord(char)
    byte = point - 0xF000 if 0xF020 <= point <= 0xF0FF else point
    return SYMBOL_FONT.get(byte, char) if byte <= 0xFF else char


def symbol_extension(symbol: Any) -> None:
    """Replace a ``w16se:symEx`` by a ``w:t`` of the character it names (empty if none)."""
    _replace_by_text(symbol, _character(symbol.get(f"{_W16SE}char")))


def _symbol_text(font: str | None, code: str | None) -> str:
    """What Word draws for `code` in `font`: the Symbol font's letter, or the code's own
    character; nothing for a private-use code of another font."""
    try:
        point = int(code or "", 16)
    except ValueError:
        return ""
    if (font or "").strip().lower() in _SYMBOL_FONTS:
        byte = point - 0xF000 if 0xF020 <= point <= 0xF0FF else point
        return SYMBOL_FONT.get(byte, "")
    return "" if 0xE000 <= point <= 0xF8FF else _character(code)


def _character(code: str | None) -> str:
    try:
        point = int(code or "", 16)
    except ValueError:
        return ""
    if point < 0x20 or 0xD800 <= point <= 0xDFFF or point > 0x10FFFF:
        return ""
    return chr(point)


def _replace_by_text(element: Any, text: str) -> None:
    replacement = element.makeelement(f"{_W}t", {})
    replacement.text = text
    replacement.tail = element.tail
    element.getparent().replace(element, replacement)


def _spell_out(ruby: Any) -> bool:
    """Replace the run holding `ruby` by the base's runs, then its reading's in parentheses.

    The runs keep their properties, so a hidden run in a guide is left out
    like any other. False when the ruby stands in no run.
    """
    holder = ruby.getparent()
    if holder is None or holder.tag != f"{_W}r" or holder.getparent() is None:
        return False
    base = [run for part in ruby.iterchildren(f"{_W}rubyBase") for run in part]
    reading = [run for part in ruby.iterchildren(f"{_W}rt") for run in part]
    runs = base
    if any(text.text for run in reading for text in run.iter(f"{_W}t")):
        runs = [*base, _plain_run(holder, "("), *reading, _plain_run(holder, ")")]
    parent = holder.getparent()
    at = parent.index(holder)
    parent.remove(holder)
    for offset, run in enumerate(runs):
        parent.insert(at + offset, run)
    return True


def _plain_run(like: Any, text: str) -> Any:
    run = like.makeelement(f"{_W}r", {})
    shown = run.makeelement(f"{_W}t", {})
    shown.text = text
    run.append(shown)
    return run


def _holds_content(element: Any) -> bool:
    parent = element.getparent()
    return parent is not None and not parent.tag.endswith("Pr")
