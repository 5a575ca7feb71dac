"""PDF text layers whose fonts map to no characters: recognised, and read as pages without one.

A PDF font says which character each glyph is through its encoding or a
``ToUnicode`` map. Some producers write neither usefully: a subset font whose
glyphs are named ``g21``, ``g22``; a symbolic TrueType font with no map; a
``ToUnicode`` map onto control or private-use codes. pypdf then returns the
glyph names (``/g21/g22/g23``) or the raw codes, and the page's text layer is
there but says nothing: capsa kept it (the codes vanish in normalisation, the
names do not), and OCR, which reads such a page as it is drawn, never ran,
since the page had "text".

`undecodable` tells such a text from a real one: at least half of its
visible characters are control, private-use, unassigned or replacement
characters, or runs of unmapped glyph names (two or more ``/name12``
together, as pypdf writes them). The PDF reader then reads the page as one
without a text layer: by OCR when it can, with a note either way. A text
with some such characters among real words is kept as it is.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["undecodable"]

_GLYPH_NAMES = re.compile(r"(?:/[A-Za-z_.]{1,16}\d+){2,}")
"""Two or more unmapped glyph names in a row, as pypdf writes them (``/g21/g22``); a path
(``/usr/bin``) has no digits at the ends of its parts."""
_NO_CHARACTER = frozenset({"Cc", "Co", "Cn", "Cs"})


def undecodable(text: str) -> bool:
    """Whether at least half of `text`'s visible characters stand for no character.

    Examples:
        >>> undecodable("/g21/g22/g23/g21"), undecodable("\\x01\\x02\\x03 \\x04")
        (True, True)
        >>> undecodable("Invoice total: 230 EUR, see /usr/bin/env"), undecodable("")
        (False, False)
    """
    visible = sum(1 for char in text if not char.isspace())
    if not visible:
        return False
    names = sum(len(found.group()) for found in _GLYPH_NAMES.finditer(text))
    rest = _GLYPH_NAMES.sub("", text) if names else text
    codes = sum(1 for char in rest if char == "\ufffd" or (
        not char.isspace() and unicodedata.category(char) in _NO_CHARACTER))
    return 2 * (names + codes) >= visible
