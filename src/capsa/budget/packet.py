"""The records of budgeted packing: what goes in, what comes out, what happened.

`Passage` and `Budget` go into `pack()`; a `Packet` comes out, carrying the
rendered text, the kept passages and one `Receipt` per input passage. All are
frozen pydantic models, so they can cross process and framework boundaries
and be compared, hashed in tests and serialised as JSON.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveInt, field_validator

__all__ = ["Budget", "DropReason", "EmptyReason", "Group", "Markup", "Packet", "Passage",
           "Receipt", "Shape"]

Shape = Literal["passages", "brief", "features"]
"""How kept passages are laid out.

``passages``: each passage's kept sentences in their original order, gaps shown
as ``…``; ``brief``: one line per passage, its single most relevant sentence;
``features``: one kept sentence per line, as a bullet list.
"""

Group = Literal["attached", "retrieved"]
"""Which container a passage belongs to: files the user attached, or retrieval."""

DropReason = Literal["budget", "max_items", "duplicate", "empty", "irrelevant"]
"""Why a passage kept nothing.

``budget``: no room left (or not even room for the containers); ``max_items``:
the packet already held `Budget.max_items` passages; ``duplicate``: everything
it says was already packed from another passage; ``empty``: it had no text;
``irrelevant``: nothing in it scored above `Budget.min_relevance` for the query
(the retriever's top passage only under `Budget.strict_floor`).
"""

EmptyReason = Literal["no_input", "empty", "budget", "irrelevant"]
"""Which rule left a packet with nothing in it (`Packet.emptied_by`).

``no_input``: no passage or attachment was given; ``empty``: every one given
had no text; ``budget``: the budget could not hold one piece of any of them
with its containers, as the caller's tokenizer measures them (at least one was
dropped for ``budget``); ``irrelevant``: the strict relevance floor
(`Budget.strict_floor`) dropped every retrieved passage and nothing was attached.
"""

Markup = Literal["auto", "tags", "compact"]
"""How documents are written inside capsa's ``<context>`` containers.

``tags``: ``<document id="p3" source="travel.pdf">…</document>``, about ten
tokens a document; ``compact``: ``<document p3>…``, opened by id only and
running to the next opener or the container's end, about five (the source
stays in the receipts); ``auto``: compact when the passages must be
compressed to fit (where tags would take a third of a tight budget), tags
when everything fits whole, not counting what the relevance floor drops.
Either way passage text can open no document and close no container.
Frameworks' own frames (`capsa.budget.render.Layout`) ignore it.
"""

_FROZEN = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class Passage(BaseModel):
    """One retrieved passage or attached text, as handed to `pack()`.

    Examples:
        >>> Passage(id="p1", text="The cap is EUR 165.", source="travel.pdf").source
        'travel.pdf'
    """

    model_config = _FROZEN

    id: str = Field(min_length=1)
    """Identifier, unique within one `pack()` call; rendered as the document's ``id``."""
    text: str
    """The passage text; receipts' offsets index into it."""
    source: str | None = None
    """Where it came from: a title, a file name, a URL; rendered as the document's ``source``
    (tagged markup) and kept on its receipt. Its words are also read with the whole
    passage when passages are scored (`capsa.budget.relevance.source_words`), as a
    retriever scores a passage under its title."""
    title: str | None = None
    """What its document is titled (a web page's ``<title>``, a report's title), when the
    source does not say it: read with the whole passage when passages are scored, as
    `source` is, and never rendered. A page at ``https://example.com/p/8412`` titled
    "Resetting the router" is scored under both."""
    score: float | None = None
    """The retriever's score, higher meaning more relevant; combined with capsa's own.
    NaN or an infinity (a vector store's failed similarity) is no score: compared
    with the others it would reorder them all."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Caller's data, carried through untouched and never rendered."""
    page: str | None = None
    """The page it is on in its source (``"12"``); rendered as the document's ``page``,
    so an answer can cite it. None when the source has no pages or did not say."""

    @field_validator("score")
    @classmethod
    def _finite(cls, score: float | None) -> float | None:
        return score if score is None or math.isfinite(score) else None


class Budget(BaseModel):
    """How much room a packet may take, and how it is laid out.

    Impossible settings fail here, at construction (a `ValueError`).

    Examples:
        >>> Budget(max_tokens=1000, max_items=5).attachment_share
        0.7
    """

    model_config = _FROZEN

    max_tokens: PositiveInt
    """Hard ceiling on the rendered packet, tags and markers included, in tokenizer units."""
    max_items: PositiveInt | None = None
    """At most this many retrieved passages are kept; None for no limit."""
    attachment_share: float = Field(default=0.7, ge=0.0, le=1.0)
    """Share of `max_tokens` reserved for attachments when both kinds compete for room.

    Divided fairly among the attachments; whatever they leave unused goes to
    retrieval, and whatever retrieval leaves unused goes to them.
    """
    shape: Shape = "passages"
    """Layout of the rendered packet (see `Shape`)."""
    min_relevance: float | None = Field(default=0.0, ge=0.0, lt=1.0)
    """Relevance floor for retrieved text that must be compressed: nothing at or below it is filler.

    Relevance is the scorer's score divided by the best one of the packing
    (0 to 1), with answer-type evidence (`capsa.budget.evidence`).
    When the retrieved passages do not all fit, sentences at or below the floor
    are never packed to fill room, a passage with nothing above it is dropped
    as ``irrelevant`` (except the retriever's top passage, unless
    `strict_floor`: then, when nothing is relevant, the packet is empty and its
    receipts say "no relevant evidence" instead of padding it). With the lexical
    default, 0.0 means "shares at least one query term";
    use an `EmbeddingScorer` where paraphrase matters. When everything fits,
    everything is kept, as the retriever chose it. Attachments, which the user
    chose, are never dropped for relevance. The floor is off when the query has
    nothing to score against (no terms and no score anywhere); None turns it off.
    """
    strict_floor: bool = False
    """Let the relevance floor drop the retriever's top passage too, and so empty the packet.

    By default the top retrieved passage (the highest `Passage.score`, or the
    first when none is scored) is never dropped as ``irrelevant``: the
    retriever's ranking is evidence the scorer may not see (a paraphrase shares
    no term with the question), and an empty context makes a chat engine
    answer "Empty Response". Set it where an empty context is the right answer
    to a question nothing retrieved can answer; `Packet.emptied_by` then says
    ``irrelevant``.
    """
    markup: Markup = "auto"
    """How capsa writes each document: ``"tags"``, ``"compact"``, or ``"auto"`` (see `Markup`)."""
    mark_excerpts: bool = False
    """Open a passage shortened by sentence selection with ``shown="312/1870"`` (characters).

    The ``…`` gap markers always show that sentences were left out; this adds
    how much, at about seven tokens per shortened passage, which at tight
    budgets is room for evidence (see the budget docs for the measured cost).
    A passage cut mid-sentence always ends with its ``<truncated/>`` marker.
    """

    @classmethod
    def for_model(cls, model: object, *, system: str | int = "",
                  history: Sequence[str] | int = (),
                  tools: Sequence[str | Mapping[str, Any]] | int = (),
                  output_tokens: int | None = None, margin_tokens: int = 0,
                  tokenizer: Any = None, **fields: Any) -> Budget:
        """The budget left for context in `model`'s window (see `capsa.budget.plan_window`).

        `model` is a LangChain chat model, a LlamaIndex LLM or the window size;
        the output, system prompt, history and tools are reserved, the rest is
        `max_tokens`. Other `Budget` fields (``attachment_share``, ``shape``)
        pass through.

        Raises:
            BudgetError: the reservations leave no room for context.

        Examples:
            >>> Budget.for_model(8192, system="Be brief.", output_tokens=1024).max_tokens
            7165
        """
        from capsa.budget.window import plan_window

        return plan_window(model, system=system, history=history, tools=tools,
                           output_tokens=output_tokens, margin_tokens=margin_tokens,
                           tokenizer=tokenizer).budget(**fields)


class Receipt(BaseModel):
    """What happened to one input passage inside `pack()`.

    Every input passage, attached or retrieved, gets exactly one receipt, so a
    caller can always say what the model did not see, and why.
    """

    model_config = _FROZEN

    passage_id: str
    """The passage's `Passage.id`."""
    group: Group
    """Whether it was attached or retrieved."""
    source: str | None = None
    """The passage's `Passage.source`."""
    page: str | None = None
    """The passage's `Passage.page`, so what survived can be cited by page."""
    tokens_full: NonNegativeInt
    """Tokens in the passage as given, counted by the packet's tokenizer.

    Less what that tokenizer charges once per call, whatever the text (a Hugging
    Face tokenizer's ``[CLS]`` and ``[SEP]``: `capsa.budget.tokens.per_call_tokens`),
    which the packet pays once in `Packet.used_tokens`, not once per passage."""
    tokens_kept: NonNegativeInt
    """Tokens of what reached the packet, laid out as prose with its ``…`` and cut markers.

    Never more than `tokens_full`; 0 when dropped. The bullets and line breaks
    of the ``features`` and ``brief`` shapes are layout and are not counted here.
    """
    query_terms_preserved: float | None = Field(default=None, ge=0.0, le=1.0)
    """Share of the query terms present in the passage that survived; None if it had none."""
    kept_spans: tuple[tuple[NonNegativeInt, NonNegativeInt], ...] = ()
    """Character offsets ``(start, end)`` into `Passage.text` of every kept piece."""
    truncated: bool = False
    """True when a piece was cut mid-sentence; the text then ends with a `<truncated/>` marker."""
    dropped: DropReason | None = None
    """Why nothing was kept; None when the passage reached the packet."""
    detail: str | None = None
    """A human-readable note on what happened (``"kept 2 of 5 sentences"``)."""
    whole: bool = False
    """True when every sentence of the passage reached the packet, uncut."""
    rank: NonNegativeInt | None = None
    """Position among the packet's kept passages, in rendered order; None when dropped."""


class Packet(BaseModel):
    """The result of `pack()`: the text for the model and the account of it.

    Examples:
        >>> from capsa.budget import pack
        >>> packet = pack("hotel cap", [Passage(id="p1", text="The hotel cap is EUR 165.")],
        ...               Budget(max_tokens=100))
        >>> print(packet.render())
        <context source="retrieved">
        <document id="p1">The hotel cap is EUR 165.</document>
        </context>
        >>> packet.used_tokens <= 100 and packet.receipts[0].whole
        True
    """

    model_config = _FROZEN

    query: str
    """The query the passages were ranked against."""
    budget: Budget
    """The budget the packet was built for."""
    passages: tuple[Passage, ...]
    """The kept input passages (attachments first), in rendered order, as given."""
    texts: tuple[str, ...]
    """What of each kept passage reached the packet, markers included, before escaping."""
    receipts: tuple[Receipt, ...]
    """One receipt per input passage: attachments first, then retrieval, in input order."""
    used_tokens: NonNegativeInt
    """Tokens of `render()`, counted by the tokenizer the packet was built with."""
    rendered: str
    """The exact text `render()` returns."""
    compact: bool = False
    """True when the documents are written in the compact form (`Budget.markup`)."""
    emptied_by: EmptyReason | None = None
    """Which rule left the packet empty (see `EmptyReason`); None when anything was kept."""
    respelt: tuple[tuple[str, str], ...] = ()
    """Query words no passage holds that were read as a passage's word one edit away,
    as ``(typed, read as)`` pairs: ``(("recieve", "receive"),)``. Relevance was
    judged with the respelt query; `query` stays as the caller wrote it
    (`capsa.budget.relevance.respell`)."""

    @property
    def dropped(self) -> tuple[Receipt, ...]:
        """Receipts of the passages that kept nothing, with their reasons."""
        return tuple(receipt for receipt in self.receipts if receipt.dropped is not None)

    def render(self) -> str:
        """Return the provenance-tagged text to put in the model's context.

        Attachments come in ``<context source="attached">``, retrieval in
        ``<context source="retrieved">``, each passage in a ``<document>``
        element (only opened, by its id, in the compact form of a tight budget:
        `Budget.markup`); passage text is escaped so it can never close or forge one.
        An empty packet renders as the empty string.
        """
        return self.rendered

    def provenance(self) -> list[dict[str, Any]]:
        """Return where every kept piece came from, in rendered order, as JSON-ready dicts.

        Each entry has the passage ``id``, ``source``, ``page``, ``group``, the kept
        character ``spans`` into the original text and whether it was
        ``truncated``: enough to cite or highlight the evidence in the source.
        """
        kept = sorted((r for r in self.receipts if r.rank is not None), key=lambda r: r.rank or 0)
        return [
            {
                "id": passage.id,
                "source": passage.source,
                "page": passage.page,
                "group": receipt.group,
                "spans": [list(span) for span in receipt.kept_spans],
                "truncated": receipt.truncated,
            }
            for passage, receipt in zip(self.passages, kept, strict=True)
        ]

    def as_dict(self) -> dict[str, Any]:
        """Return the whole packet as JSON-ready data, rendered text included."""
        return self.model_dump(mode="json")
