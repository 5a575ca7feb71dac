"""One retrieval, several readers: a packet per receiver profile.

A frontier model with a large window reads prose; a small local model does
better with a short list of facts; a person skimming wants one line per
source. `pack_for` segments and scores the retrieval once, then packs it for
each `ReceiverProfile`, so every receiver gets a packet built for it, not the
same blob cut shorter.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from capsa.budget.compress import Prepared, prepare
from capsa.budget.pack import _check_ids, pack_prepared
from capsa.budget.packet import Budget, Packet, Passage
from capsa.budget.relevance import LexicalScorer, Scorer
from capsa.budget.tokens import Tokenizer, TokenizerLike, as_tokenizer

__all__ = ["ReceiverProfile", "pack_for"]


class ReceiverProfile(BaseModel):
    """A named target for packets: its budget, its layout and its tokenizer.

    Examples:
        >>> ReceiverProfile.local_model().budget.shape
        'features'
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    name: str = Field(min_length=1)
    """Key of this receiver's packet in `pack_for`'s result."""
    budget: Budget
    """Token ceiling, item cap and shape for this receiver."""
    compress: bool = True
    """Keep relevant sentences of passages that do not fit whole (see `pack`)."""
    tokenizer: TokenizerLike | None = Field(default=None, exclude=True)
    """This receiver's own counter; the `pack_for` tokenizer when None."""

    @classmethod
    def frontier_llm(cls, max_tokens: int = 8000, *,
                     tokenizer: TokenizerLike | None = None) -> ReceiverProfile:
        """A large hosted model: prose passages, compressed only when they do not fit."""
        return cls(name="frontier-llm", budget=Budget(max_tokens=max_tokens, shape="passages"),
                   tokenizer=tokenizer)

    @classmethod
    def local_model(cls, max_tokens: int = 1000, *,
                    tokenizer: TokenizerLike | None = None) -> ReceiverProfile:
        """A small local model: the relevant sentences as a bullet list per source."""
        return cls(name="local-model", budget=Budget(max_tokens=max_tokens, shape="features"),
                   tokenizer=tokenizer)

    @classmethod
    def human_brief(cls, max_tokens: int = 400, *, max_items: int = 5,
                    tokenizer: TokenizerLike | None = None) -> ReceiverProfile:
        """A person skimming: one line per source, the best sentence of each."""
        return cls(name="human-brief",
                   budget=Budget(max_tokens=max_tokens, max_items=max_items, shape="brief"),
                   tokenizer=tokenizer)


def pack_for(
    receivers: Sequence[ReceiverProfile],
    query: str,
    passages: Sequence[Passage],
    *,
    attachments: Sequence[Passage] = (),
    tokenizer: TokenizerLike | None = None,
    scorer: Scorer | None = None,
) -> dict[str, Packet]:
    """Pack the same retrieval once per receiver.

    Segmentation and scoring run once per distinct tokenizer, not once per
    receiver. Each packet keeps `pack`'s guarantees for its own budget.

    Args:
        receivers: the targets; names must be unique.
        query: what the passages should answer.
        passages: the retrieval, shared by every receiver.
        attachments: attached texts, shared by every receiver.
        tokenizer: default counter for receivers without their own.
        scorer: ranks sentences and passages; `LexicalScorer` when None.

    Returns:
        One packet per receiver, keyed by `ReceiverProfile.name`, in order.

    Raises:
        ValueError: two receivers share a name, or two passages an id.

    Examples:
        >>> passages = [Passage(id="a", text="The hotel cap is EUR 165. Trains are fine.")]
        >>> packets = pack_for([ReceiverProfile.frontier_llm(), ReceiverProfile.human_brief()],
        ...                    "hotel cap", passages)
        >>> sorted(packets)
        ['frontier-llm', 'human-brief']
    """
    names = [receiver.name for receiver in receivers]
    if len(set(names)) != len(names):
        raise ValueError(f"receiver names must be unique, got {names}")
    _check_ids([*attachments, *passages])
    chosen_scorer = scorer or LexicalScorer()
    prepared: dict[int, Prepared] = {}
    counters: dict[int, Tokenizer] = {}
    packets: dict[str, Packet] = {}
    for receiver in receivers:
        given = receiver.tokenizer if receiver.tokenizer is not None else tokenizer
        key = id(given)
        if key not in prepared:
            count = as_tokenizer(given)
            counters[key] = count
            prepared[key] = prepare(query, attachments, passages, tokenizer=count,
                                    scorer=chosen_scorer)
        packets[receiver.name] = pack_prepared(prepared[key], receiver.budget,
                                               compress=receiver.compress)
    return packets
