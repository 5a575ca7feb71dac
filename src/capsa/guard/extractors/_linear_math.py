"""The pieces of linear math text shared by Word's equations and HTML's MathML.

Both are written close to Word's linear format (UnicodeMath): ``a/b``,
``x^2``, ``x_i``, ``√x``; a part of a fraction, a script or a root is bare
when it reads as one thing and bracketed otherwise, so ``(a+b)/2`` never
reads as ``a+b/2``.
"""

from __future__ import annotations

import re

__all__ = ["OPENING", "ROOTS", "bracketed", "operand"]

_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")
OPENING = {"(": ")", "[": "]", "{": "}", "⟨": "⟩", "|": "|"}
"""Opening brackets and the closing bracket each pairs with."""
ROOTS = {"2": "√", "3": "∛", "4": "∜"}
"""The root signs a degree has a character of its own for."""


def operand(text: str) -> str:
    """`text` as one operand of a script, a fraction or a root: bare when it is one symbol, a
    number, a word (``lim``, ``max``, ``ij``) or already bracketed whole; in parentheses
    otherwise.

    Examples:
        >>> operand("2"), operand("n+1"), operand("(a+b)"), operand("lim")
        ('2', '(n+1)', '(a+b)', 'lim')
    """
    if len(text) <= 1 or text.isalpha() or _NUMBER.fullmatch(text) or bracketed(text):
        return text
    return f"({text})"


def bracketed(text: str) -> bool:
    """Whether `text` opens with a bracket that closes at its very end."""
    closing = OPENING.get(text[0])
    if closing is None or text[-1] != closing or closing == "|":
        return False
    depth = 0
    for position, ch in enumerate(text):
        if ch == text[0]:
            depth += 1
        elif ch == closing:
            depth -= 1
            if depth == 0:
                return position == len(text) - 1
    return False
