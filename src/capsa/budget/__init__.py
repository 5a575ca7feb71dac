"""Budgeted compression: passages and attachments packed into a token budget.

`pack()` ranks retrieved passages and attached texts against the query and
fits them into `Budget.max_tokens`, measured on the rendered text, tags
included: whole passages where they fit, their most relevant sentences where
they do not, a visible cut as a last resort, and a `Receipt` for every input
saying what survived. `pack_for()` builds one packet per `ReceiverProfile`
from the same retrieval; `compress_text()` shrinks a single text.

Examples:
    >>> from capsa.budget import Budget, Passage, pack
    >>> packet = pack("hotel cap", [Passage(id="p1", text="The hotel cap is EUR 165.")],
    ...               Budget(max_tokens=200))
    >>> packet.receipts[0].whole
    True
"""

from capsa.budget.pack import compress_text, pack
from capsa.budget.packet import (
    Budget,
    DropReason,
    Group,
    Markup,
    Packet,
    Passage,
    Receipt,
    Shape,
)
from capsa.budget.receivers import ReceiverProfile, pack_for
from capsa.budget.relevance import EmbeddingScorer, LexicalScorer, Scorer
from capsa.budget.sentences import split_sentences
from capsa.budget.static import StaticScorer
from capsa.budget.tokens import Tokenizer, TokenizerLike, as_tokenizer, estimate_tokens
from capsa.budget.window import Window, plan_window

__all__ = [
    "Budget",
    "DropReason",
    "EmbeddingScorer",
    "Group",
    "LexicalScorer",
    "Markup",
    "Packet",
    "Passage",
    "Receipt",
    "ReceiverProfile",
    "Scorer",
    "Shape",
    "StaticScorer",
    "Tokenizer",
    "TokenizerLike",
    "Window",
    "as_tokenizer",
    "compress_text",
    "estimate_tokens",
    "pack",
    "pack_for",
    "plan_window",
    "split_sentences",
]
