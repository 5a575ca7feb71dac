"""`pack()`: passages and attachments into one packet that fits its budget.

The plan is built in three steps, each a pure function of the inputs:

1. *share the window*: attachments get `Budget.attachment_share` of it, divided
   fairly among them (the smallest first, each taking no more than it needs);
   what they leave unused goes to retrieval, and what retrieval leaves unused
   goes back to them;
2. *select* within each share (`capsa.budget.compress`);
3. *render and measure*: the rendered packet is counted with the caller's
   tokenizer. Planning adds up per-sentence counts, which a tokenizer need
   not honour: it may charge a joined text more than its parts (a
   super-additive counter), less, or a minimum per call, and need not even
   grow with the text. So when the measured packet is over budget the plan is
   rebuilt for a smaller target until it fits; when even the smallest plan
   measures over (parts the plan counted as free), its passages are taken out,
   the least useful first, each measured again, until it fits, and every one
   taken out says so in its receipt. The empty packet renders as ``""``, which
   is checked against the budget first, so the loop always ends within it.
   The budget is a promise about the rendered text, not about arithmetic.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from capsa import telemetry
from capsa.budget.compress import (
    Choice,
    Doc,
    Prepared,
    Seen,
    Selection,
    floor_in_force,
    prepare,
    relevant,
    select,
    select_whole,
    spare_top,
)
from capsa.budget.packet import Budget, EmptyReason, Group, Packet, Passage, Receipt, Shape
from capsa.budget.relevance import LexicalScorer, Scorer, analyze
from capsa.budget.render import COMPACT, ELLIPSIS, TAGGED, Body, Layout, build_body
from capsa.budget.tokens import TokenizerLike, as_tokenizer
from capsa.errors import BudgetError

__all__ = ["compress_text", "pack"]

_QUICK_ATTEMPTS = 6
_BODIES_KEPT = 4096
"""Most bodies one prepared input remembers."""


@dataclass(frozen=True, slots=True)
class _Plan:
    attached: Selection
    retrieved: Selection
    measured_out: frozenset[tuple[Group, int]] = field(default_factory=frozenset)
    """Passages the plan chose but `_within` took out: the rendered packet measured over."""


def pack(
    query: str,
    passages: Sequence[Passage],
    budget: Budget,
    *,
    attachments: Sequence[Passage] = (),
    compress: bool = True,
    tokenizer: TokenizerLike | None = None,
    scorer: Scorer | None = None,
    layout: Layout | None = None,
) -> Packet:
    """Pack passages (and attachments) into a packet that fits `budget`, best first.

    Passages that fit whole stay whole. When they do not all fit, the packet
    keeps the most relevant sentences across passages, in their original order,
    with ``…`` where sentences were left out; duplicate sentences are packed
    once; room too small for any further whole sentence goes to the opening
    words of the most useful one left out, and a single sentence too large for
    the whole budget is cut, each at a word boundary behind a
    ``<truncated shown=… total=…/>`` marker (``<truncated/>`` in the compact
    form, see `Budget.markup`). With
    ``compress=False``, passages are packed whole in relevance order and only
    the first one is ever cut. Either way ``tokenizer(packet.render()) <=
    budget.max_tokens``, tags and markers included; when not even the
    containers fit, the packet is empty and every receipt says so. Retrieved
    sentences with no relevance to the query (`Budget.min_relevance`) are
    never packed as filler, and a retrieved passage with none above it is
    dropped as ``irrelevant``: a packet may keep less than its budget. The
    retriever's top passage (highest `Passage.score`, else the first) is
    never dropped as irrelevant unless `Budget.strict_floor` is set, so the
    floor alone never empties a packet; an empty packet names the rule that
    emptied it (`Packet.emptied_by`).

    Args:
        query: what the passages should answer; ranks sentences and passages.
        passages: retrieved passages, in the retriever's order; ids unique.
        budget: the token ceiling, item cap, attachment share and layout.
        attachments: texts the user attached; packed first, in their own
            container, under `Budget.attachment_share`.
        compress: keep the relevant sentences of passages that do not fit whole.
        tokenizer: the counter the budget is measured with, in any form
            `as_tokenizer` accepts; `estimate_tokens` when None. Pass the
            target model's counter for exact budgets.
        scorer: ranks sentences and passages; `LexicalScorer` when None.
        layout: how the packet is written and so what the budget pays for:
            capsa's containers when None, or a framework's frames (`Layout`).

    Returns:
        The packet, with one receipt per input passage.

    Raises:
        ValueError: two inputs share an id.
        BudgetError: the tokenizer charges more than the budget for an empty string.
        ScorerError: `scorer` returned the wrong number of scores, or a non-finite one.

    Examples:
        >>> passages = [Passage(id="a", text="Trains are booked in standard class. "
        ...                     "The hotel cap is EUR 165. Taxis need a receipt.")]
        >>> packet = pack("hotel cap", passages, Budget(max_tokens=33))
        >>> packet.texts[0]
        '… The hotel cap is EUR 165. …'
        >>> packet.receipts[0].kept_spans
        ((37, 62),)
        >>> packet.used_tokens <= 33
        True
    """
    _check_ids([*attachments, *passages])
    prepared = _prepare_cached(query, attachments, passages, tokenizer,
                               scorer or _DEFAULT_SCORER, layout or Layout())
    return _with_callers_passages(pack_prepared(prepared, budget, compress=compress),
                                  [*attachments, *passages])


def _with_callers_passages(packet: Packet, given: Sequence[Passage]) -> Packet:
    """`packet` holding the caller's own `Passage` objects.

    A prepared input reused from an earlier call (`_prepare_cached`) holds that
    call's passages: equal in everything packing reads, but perhaps not in
    `Passage.metadata`, which the caller gets back on `Packet.passages`.
    """
    by_id = {passage.id: passage for passage in given}
    if all(by_id.get(p.id) is p for p in packet.passages):
        return packet
    return packet.model_copy(update={"passages": tuple(by_id[p.id] for p in packet.passages)})


_DEFAULT_SCORER = LexicalScorer()
_PREPARED: OrderedDict[tuple[object, ...], tuple[object, Scorer, Prepared, int]] = OrderedDict()
_PREPARED_SIZE = 8
_PREPARED_CHARS = 2_000_000
"""Most input characters the cache holds; the newest entry stays whatever its size.

A prepared input holds several objects per sentence: eight large documents
kept after use would cost memory and slow every later garbage collection."""
_PREPARED_LOCK = threading.Lock()


def _prepare_cached(query: str, attachments: Sequence[Passage], passages: Sequence[Passage],
                    counter: TokenizerLike | None, scorer: Scorer, layout: Layout) -> Prepared:
    """`prepare`, reusing the last few results: packing one retrieval for several budgets
    (or retrying with a smaller one) segments, counts and scores it once. The cache
    holds at most `_PREPARED_SIZE` inputs and, but for the newest, `_PREPARED_CHARS`.

    The key is the query, every input's id, text, source, title, score and page,
    the layout, and the very counter and scorer objects the caller passed (held by
    the cache, so their ids cannot be reused), so a hit is what `prepare` would
    return but for `Passage.metadata`, which packing never reads (`pack` hands the
    caller's own passages back).
    """
    key = (query, id(counter), id(scorer), repr(layout),
           tuple((p.id, p.text, p.source, p.title, p.score, p.page) for p in attachments),
           tuple((p.id, p.text, p.source, p.title, p.score, p.page) for p in passages))
    with _PREPARED_LOCK:
        hit = _PREPARED.get(key)
        if hit is not None and hit[0] is counter and hit[1] is scorer:
            _PREPARED.move_to_end(key)
            return hit[2]
    prepared = prepare(query, attachments, passages, tokenizer=as_tokenizer(counter),
                       scorer=scorer, layout=layout)
    size = sum(len(p.text) for p in attachments) + sum(len(p.text) for p in passages)
    with _PREPARED_LOCK:
        _PREPARED[key] = (counter, scorer, prepared, size)
        held = sum(entry[3] for entry in _PREPARED.values())
        while len(_PREPARED) > _PREPARED_SIZE or (held > _PREPARED_CHARS and len(_PREPARED) > 1):
            held -= _PREPARED.popitem(last=False)[1][3]
    return prepared


def pack_prepared(prepared: Prepared, budget: Budget, *, compress: bool) -> Packet:
    """Pack already segmented and scored inputs for one budget (see `pack`)."""
    with telemetry.packing(budget.max_tokens, budget.max_items) as observed:
        packet = _pack_prepared(prepared, budget, compress=compress)
        observed(packet)
    return packet


def _pack_prepared(prepared: Prepared, budget: Budget, *, compress: bool) -> Packet:
    prepared = _with_markup(prepared, budget)
    ceiling = budget.max_tokens
    empty = prepared.measure("")
    if empty > ceiling:
        raise BudgetError(f"the tokenizer counts {empty} tokens for an empty packet, "
                          f"over the {ceiling}-token budget")
    target = ceiling - prepared.charge
    for _ in range(_QUICK_ATTEMPTS):
        plan, packet = _attempt(prepared, budget, target, compress)
        if packet.used_tokens <= ceiling:
            return packet
        target -= max(packet.used_tokens - ceiling, 1)
        if target <= 0:
            return _within(prepared, budget, *_attempt(prepared, budget, 0, compress))
    best: tuple[_Plan, Packet] | None = None
    low, high = 1, target - 1
    while low <= high:
        middle = (low + high) // 2
        plan, packet = _attempt(prepared, budget, middle, compress)
        if packet.used_tokens <= ceiling:
            best, low = (plan, packet), middle + 1
        else:
            high = middle - 1
    if best is not None:
        return best[1]
    return _within(prepared, budget, *_attempt(prepared, budget, 0, compress))


def _within(prepared: Prepared, budget: Budget, plan: _Plan, packet: Packet) -> Packet:
    """`packet`, or if it measures over the budget, less its least useful passages until it fits.

    Only reached when even the plan for no room at all measures over: parts the
    tokenizer charges nothing alone cost something together. Retrieved
    passages go first, the last chosen first (the least useful), then
    attachments, the last first; each removal is measured, since a tokenizer
    need not charge less for less text. The empty packet renders as ``""``,
    which `_pack_prepared` has checked against the budget, so this ends within it.
    """
    ceiling = budget.max_tokens
    order: list[tuple[Group, int]] = [("retrieved", n) for n in reversed(plan.retrieved.chosen)]
    order += [("attached", n) for n in reversed(plan.attached.chosen)]
    for group, n in order:
        if packet.used_tokens <= ceiling:
            return packet
        plan = _without(plan, group, n)
        packet = _packet(prepared, budget, plan)
    if packet.used_tokens > ceiling:  # only if the tokenizer counts "" two ways
        raise BudgetError(f"the tokenizer counts {packet.used_tokens} tokens for an empty "
                          f"packet, over the {ceiling}-token budget")
    return packet


def _without(plan: _Plan, group: Group, n: int) -> _Plan:
    """`plan` with passage `n` of `group` taken out, and recorded as measured out."""
    selection = plan.attached if group == "attached" else plan.retrieved
    fewer = replace(selection, chosen={k: v for k, v in selection.chosen.items() if k != n})
    out = plan.measured_out | {(group, n)}
    if group == "attached":
        return _Plan(fewer, plan.retrieved, out)
    return _Plan(plan.attached, fewer, out)


def _spared(prepared: Prepared, budget: Budget) -> Prepared:
    """The retriever's top passage marked, so the relevance floor never drops it (`spare_top`)."""
    retrieved = spare_top(prepared.retrieved, strict=budget.strict_floor)
    return prepared if retrieved is prepared.retrieved else replace(prepared, retrieved=retrieved)


def _with_markup(prepared: Prepared, budget: Budget) -> Prepared:
    """The inputs with the top passage spared (`_spared`) and laid out as `Budget.markup` says.

    ``auto`` writes compact documents when the inputs do not all fit whole in
    tags, leaving out what the relevance floor would drop anyway: then
    sentences must be left out, and every token of markup is one of evidence.
    For the same reason a compact packet ends a cut passage with the bare
    ``<truncated/>`` (four tokens, not twelve), unless `Budget.mark_excerpts`
    asks for the numbers. A framework's frames stay as they are.

    Each layout is worked out once per prepared input (`Prepared.variants`):
    packing one retrieval for several budgets lays it out the same way.
    """
    strict, marked, shape = budget.strict_floor, budget.mark_excerpts, budget.shape
    tagged = _variant(prepared, ("tagged", strict, marked),
                      lambda: _tagged(_spared(prepared, budget), marked))
    if prepared.layout.frames is not None:
        return tagged
    if budget.markup == "auto":
        ceiling = budget.max_tokens - prepared.charge
        attached = _demand(tagged, tagged.attached, "attached", shape)
        retrieved = _demand(tagged, tagged.retrieved, "retrieved", shape)
        if attached + retrieved > ceiling:
            floor = _floor(tagged, budget, retrieved, ceiling)
            retrieved = _demand(tagged, [d for d in tagged.retrieved if relevant(d, floor)],
                                "retrieved", shape)
        compact = attached + retrieved > ceiling
    else:
        compact = budget.markup == "compact"
    if not compact:
        return tagged
    return _variant(prepared, ("compact", strict, marked, shape == "features"),
                    lambda: _compacted(tagged, budget))


def _variant(prepared: Prepared, key: tuple[object, ...],
             make: Callable[[], Prepared]) -> Prepared:
    """`make()`, remembered on `prepared` under `key` (`Prepared.variants`)."""
    found = prepared.variants.get(key)
    if found is None:
        found = prepared.variants[key] = make()
    return found


def _tagged(prepared: Prepared, marked: bool) -> Prepared:
    """`prepared` in tags, planned with the longest ``shown="…"`` where excerpts are marked."""
    if prepared.layout.frames is not None:
        return prepared
    tagged = _relayout(prepared, TAGGED)
    if marked:
        longest = max((len(d.passage.text) for d in (*tagged.attached, *tagged.retrieved)),
                      default=0)
        tagged = replace(tagged, excerpt=tagged.count(f' shown="{longest}/{longest}"'))
    return tagged


def _compacted(tagged: Prepared, budget: Budget) -> Prepared:
    """`tagged` in compact documents."""
    # A compact document runs to the next line, so the newline after each body is
    # paid where the body ends. The layout prices it as after a tag (free in
    # `estimate_tokens`); after a trailing "…" a tokenizer may charge it, and the
    # container's closing newline is then the last body's, so it is counted there.
    # Planned so, a packet seldom needs measuring twice. (A feature list's body
    # ends in its own newline.)
    count = tagged.count
    trail = 0 if budget.shape == "features" else max(
        (count(f"{ELLIPSIS}\n") - count(ELLIPSIS)) - (count(">\n") - count(">")), 0)
    compacted = _relayout(tagged, COMPACT)
    return replace(compacted, terse_cuts=not budget.mark_excerpts, trail=trail,
                   context={g: max(v - trail, 0) for g, v in compacted.context.items()})


def _relayout(prepared: Prepared, layout: Layout) -> Prepared:
    """`prepared` with each document's and container's markup counted for `layout`."""
    if prepared.layout == layout:
        return prepared
    count = prepared.tokenizer

    def recount(docs: Sequence[Doc]) -> tuple[Doc, ...]:
        return tuple(replace(doc, overhead=count(layout.document_overhead(doc.passage)))
                     for doc in docs)

    return replace(prepared, attached=recount(prepared.attached),
                   retrieved=recount(prepared.retrieved), layout=layout,
                   context={g: count(layout.context_overhead(g)) for g in prepared.context})


def compress_text(
    text: str,
    query: str,
    max_tokens: int,
    *,
    tokenizer: TokenizerLike | None = None,
    scorer: Scorer | None = None,
    min_relevance: float | None = 0.0,
    strict_floor: bool = False,
) -> str:
    """Shrink one text to its sentences most relevant to `query`, within `max_tokens`.

    The same selection as `pack`, without containers: kept sentences in their
    original order, ``…`` for gaps, and a truncation marker after a sentence
    cut to the room left (or the best one, if even it had to be cut). A text
    that already fits comes back unchanged. The same relevance floor as
    `pack` (`capsa.budget.compress.floor_in_force`): sentences at or below
    `min_relevance` are not kept as filler, and the text, like `pack`'s top
    passage, is never emptied for relevance unless `strict_floor` says so.
    The result is measured with `tokenizer`, whatever it charges for joined
    pieces, and shrunk until it fits.

    Args:
        text: the text to compress.
        query: what the kept sentences should be relevant to.
        max_tokens: ceiling on ``tokenizer(result)``; 0 gives ``""``.
        tokenizer: the counter; `estimate_tokens` when None.
        scorer: the sentence ranker; `LexicalScorer` when None.
        min_relevance: the relevance floor, as `Budget.min_relevance`; None for none.
        strict_floor: return ``""`` when nothing in the text is above the floor,
            as `Budget.strict_floor`.

    Returns:
        The compressed text, ``""`` when nothing fits (or, with `strict_floor`,
        nothing is relevant).

    Raises:
        ValueError: `max_tokens` is negative, or `min_relevance` is outside [0, 1).
        BudgetError: the text does not fit and the tokenizer counts more than
            `max_tokens` even for ``""``.
        ScorerError: `scorer` broke the `Scorer` contract.

    Examples:
        >>> compress_text("Intro here. The hotel cap is EUR 165. Outro.", "hotel cap", 9)
        '… The hotel cap is EUR 165. …'
    """
    if max_tokens < 0:
        raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
    if min_relevance is not None and not 0.0 <= min_relevance < 1.0:
        raise ValueError(f"min_relevance must be in [0, 1) or None, got {min_relevance}")
    count = as_tokenizer(tokenizer)
    full = count(text)
    if full <= max_tokens:
        return text
    empty = count("")
    if empty > max_tokens:
        raise BudgetError(f"the tokenizer counts {empty} tokens for an empty text, "
                          f"over the {max_tokens}-token budget")
    prepared = prepare(query, (), [Passage(id="text", text=text)], tokenizer=count,
                       scorer=scorer or _DEFAULT_SCORER)
    (doc,) = spare_top([replace(prepared.retrieved[0], overhead=0)], strict=strict_floor)
    prepared = replace(prepared, retrieved=(doc,))
    floor = floor_in_force(prepared, min_relevance, full, max_tokens)
    target = max_tokens - prepared.charge
    while target > 0:
        selection = select(prepared, [doc], target, shape="passages", floor=floor)
        choice = selection.chosen.get(0)
        if choice is None:
            return ""
        result = _body(prepared, doc, choice, "passages").raw
        used = count(result)
        if used <= max_tokens:
            return result
        target -= max(used - max_tokens, 1)
    return ""


def _attempt(prepared: Prepared, budget: Budget, target: int,
             compress: bool) -> tuple[_Plan, Packet]:
    plan = _plan(prepared, budget, target, compress)
    return plan, _packet(prepared, budget, plan)


def _plan(prepared: Prepared, budget: Budget, target: int, compress: bool) -> _Plan:
    shape = budget.shape
    attached_demand = _demand(prepared, prepared.attached, "attached", shape)
    retrieved_demand = _demand(prepared, prepared.retrieved, "retrieved", shape)
    if attached_demand + retrieved_demand > target:
        floor = _floor(prepared, budget, retrieved_demand, target)
        retrieved_demand = _demand(
            prepared, [d for d in prepared.retrieved if relevant(d, floor)], "retrieved", shape)
    share = int(target * budget.attachment_share)
    if attached_demand + retrieved_demand <= target or attached_demand <= share:
        allowance = attached_demand
    elif retrieved_demand <= target - share:
        allowance = target - retrieved_demand
    else:
        allowance = share
    seen = Seen()
    # Room the attachments leave goes to retrieval, so they cut a sentence to fill
    # their room only when no retrieval can take it, or in the second pass below.
    alone = not any(doc.units for doc in prepared.retrieved)
    attached = _attachments(prepared, max(allowance, 0), shape, compress, seen, fill=alone)
    retrieved = _retrieval(prepared, budget, target - attached.used, compress, seen.copy())
    spare = target - attached.used - retrieved.used
    if spare > 0 and attached.used < attached_demand and allowance < target:
        seen = Seen()
        attached = _attachments(prepared, target - retrieved.used, shape, compress, seen,
                                fill=True)
        retrieved = _retrieval(prepared, budget, target - attached.used, compress, seen.copy())
    return _Plan(_settle(prepared, prepared.attached, attached),
                 _settle(prepared, prepared.retrieved, retrieved))


def _retrieval(prepared: Prepared, budget: Budget, room: int, compress: bool,
               seen: Seen) -> Selection:
    context = prepared.context["retrieved"]
    docs = prepared.retrieved
    floor = _floor(prepared, budget, _demand(prepared, docs, "retrieved", budget.shape), room)
    if compress:
        return select(prepared, docs, room, shape=budget.shape, max_items=budget.max_items,
                      context=context, seen=seen, floor=floor)
    return select_whole(prepared, docs, room, shape=budget.shape, max_items=budget.max_items,
                        context=context, floor=floor)


def _floor(prepared: Prepared, budget: Budget, demand: int, room: int) -> float | None:
    """The relevance floor in force (`capsa.budget.compress.floor_in_force`)."""
    return floor_in_force(prepared, budget.min_relevance, demand, room)


def _attachments(prepared: Prepared, room: int, shape: Shape, compress: bool,
                 seen: Seen, *, fill: bool) -> Selection:
    """Water-fill the attachments' room: smallest first, each at most an equal share.

    Only the last (largest) may cut a sentence into the room left (`fill`): what
    the others leave goes to the next one.
    """
    docs = prepared.attached
    context = prepared.context["attached"]
    result = Selection()
    inner = room - context
    order = sorted((_doc_demand(prepared, doc, shape), n) for n, doc in enumerate(docs)
                   if doc.units)
    for left, (demand, n) in zip(range(len(order), 0, -1), order, strict=True):
        allowance = min(demand, max(inner, 0) // left)
        if compress:
            one = select(prepared, [docs[n]], allowance, shape=shape, seen=seen,
                         fill=fill and left == 1)
        else:
            one = select_whole(prepared, [docs[n]], allowance, shape=shape)
        if 0 in one.chosen:
            result.chosen[n] = one.chosen[0]
        if 0 in one.duplicate:
            result.duplicate.add(n)
        inner -= one.used
    if result.chosen:
        result.used = room - inner
        result.chosen = {n: result.chosen[n] for n in sorted(result.chosen)}
    return result


def _settle(prepared: Prepared, docs: Sequence[Doc], selection: Selection) -> Selection:
    """Swap any compressed body that costs at least the whole passage for the whole."""
    for n, choice in selection.chosen.items():
        doc = docs[n]
        everything = list(range(len(doc.units)))
        if choice.kept == everything and choice.cut is None:
            continue
        if prepared.count(_body(prepared, doc, choice, "passages").raw) >= doc.tokens_full:
            selection.chosen[n] = Choice(everything)
    return selection


def _packet(prepared: Prepared, budget: Budget, plan: _Plan) -> Packet:
    kept: list[Passage] = []
    texts: list[str] = []
    rendered: dict[Group, list[str]] = {"attached": [], "retrieved": []}
    receipts: list[Receipt] = []
    ranks: dict[tuple[Group, int], int] = {}
    groups: tuple[tuple[Group, Selection, tuple[Doc, ...]], ...] = (
        ("attached", plan.attached, prepared.attached),
        ("retrieved", plan.retrieved, prepared.retrieved),
    )
    for group, selection, docs in groups:
        for n, choice in selection.chosen.items():
            body = _body(prepared, docs[n], choice, budget.shape)
            if not budget.mark_excerpts and body.excerpt is not None:
                body = Body(body.pieces)  # unmarked, built directly: `replace` costs more
            ranks[(group, n)] = len(kept)
            kept.append(docs[n].passage)
            texts.append(body.raw)
            rendered[group].append(prepared.layout.document(docs[n].passage, body))
    text = prepared.layout.packet(rendered.items())
    nothing = not kept
    for group, selection, docs in groups:
        for n, doc in enumerate(docs):
            kept_choice = selection.chosen.get(n)
            prose = (None if kept_choice is None
                     else _body(prepared, doc, kept_choice, "passages").raw)
            receipts.append(_receipt(prepared, doc, kept_choice, ranks.get((group, n)), prose,
                                     selection, budget, nothing,
                                     (group, n) in plan.measured_out))
    return Packet(query=prepared.query, budget=budget, passages=tuple(kept), texts=tuple(texts),
                  receipts=tuple(receipts), used_tokens=prepared.measure(text), rendered=text,
                  compact=prepared.layout.compact and prepared.layout.frames is None,
                  emptied_by=_emptied_by(receipts) if nothing else None,
                  respelt=prepared.respelt)


def _emptied_by(receipts: Sequence[Receipt]) -> EmptyReason:
    """The rule that left a packet empty: its receipts' reasons, the budget's first.

    ``budget`` whenever anything was dropped for room (more room would have
    kept it, whatever else happened to the rest); ``irrelevant`` when the
    strict floor dropped everything that had text; ``empty`` when nothing had.
    """
    reasons = {receipt.dropped for receipt in receipts}
    if not receipts:
        return "no_input"
    if "budget" in reasons:
        return "budget"
    if "irrelevant" in reasons:
        return "irrelevant"
    return "empty"


def _receipt(prepared: Prepared, doc: Doc, choice: Choice | None, rank: int | None,
             text: str | None, selection: Selection, budget: Budget, nothing: bool,
             measured_out: bool) -> Receipt:
    common = {"passage_id": doc.passage.id, "group": doc.group, "source": doc.passage.source,
              "page": doc.passage.page, "tokens_full": doc.tokens_full}
    if choice is None or rank is None or text is None:
        reason, detail = _why_dropped(doc, selection, budget, nothing, measured_out)
        return Receipt(**common, tokens_kept=0, dropped=reason, detail=detail,
                       query_terms_preserved=_preserved(doc, None))
    spans = _spans(doc, choice)
    whole = choice.cut is None and len(choice.kept) == len(doc.units)
    if whole:
        detail = "kept whole"
    elif choice.cut is not None:
        shown = sum(end - start for start, end in spans)
        detail = f"cut to {shown} of {len(doc.passage.text)} characters"
    else:
        detail = f"kept {len(choice.kept)} of {len(doc.units)} sentences"
    return Receipt(**common, tokens_kept=prepared.count(text), kept_spans=spans,
                   truncated=choice.cut is not None, whole=whole, rank=rank, detail=detail,
                   query_terms_preserved=_preserved(doc, choice))


def _why_dropped(doc: Doc, selection: Selection, budget: Budget,
                 nothing: bool, measured_out: bool) -> tuple[str, str]:
    index = doc.index
    if not doc.units:
        return "empty", "the passage has no text"
    if measured_out:
        return "budget", ("taken out after measuring: with it the rendered packet counted "
                          f"over the {budget.max_tokens}-token budget with this tokenizer")
    if index in selection.irrelevant:
        return "irrelevant", (f"no relevant evidence: nothing in it scores above min_relevance "
                              f"{budget.min_relevance} for the query")
    if index in selection.duplicate:
        return "duplicate", "everything it says was already packed from another passage"
    if index in selection.capped:
        return "max_items", f"the packet already holds {budget.max_items} passages"
    if nothing:
        return "budget", "the budget cannot hold this passage with its containers"
    return "budget", "no room left in the budget"


def _preserved(doc: Doc, choice: Choice | None) -> float | None:
    """Share of the query terms in the passage that the kept text still holds."""
    present = doc.present
    if not present:
        return None
    kept_terms: set[str] = set()
    if choice is not None:
        for position, k in enumerate(choice.kept):
            unit = doc.units[k]
            if choice.cut is not None and position == len(choice.kept) - 1:
                kept_terms.update(analyze(doc.passage.text[unit.start:choice.cut]))
            else:
                kept_terms.update(unit.terms)
    return len(present & kept_terms) / len(present)


def _spans(doc: Doc, choice: Choice) -> tuple[tuple[int, int], ...]:
    """Kept character spans, adjacent sentences merged into one span."""
    spans: list[tuple[int, int]] = []
    for position, k in enumerate(choice.kept):
        start, end = doc.units[k].start, doc.units[k].end
        if choice.cut is not None and position == len(choice.kept) - 1:
            end = choice.cut
        if spans and position and choice.kept[position - 1] == k - 1:
            spans[-1] = (spans[-1][0], end)
        else:
            spans.append((start, end))
    return tuple(spans)


def _body(prepared: Prepared, doc: Doc, choice: Choice, shape: Shape) -> Body:
    """The body of `choice`, built once per prepared input: planning, rendering and the
    receipt all ask for it, and packing for several budgets often keeps the same."""
    terse = prepared.terse_cuts
    key = (doc.group, doc.index, tuple(choice.kept), choice.cut, shape, terse)
    body = prepared.bodies.get(key)
    if body is None:
        body = build_body(doc.passage.text, doc.spans, choice.kept, shape, cut=choice.cut,
                          compact=terse)
        if len(prepared.bodies) >= _BODIES_KEPT:
            prepared.bodies.clear()
        prepared.bodies[key] = body
    return body


def _demand(prepared: Prepared, docs: Sequence[Doc], group: Group, shape: Shape) -> int:
    demands = [_doc_demand(prepared, doc, shape) for doc in docs if doc.units]
    return prepared.context[group] + sum(demands) if demands else 0


def _doc_demand(prepared: Prepared, doc: Doc, shape: Shape) -> int:
    if shape == "features":
        return doc.overhead + doc.whole_tokens + len(doc.units) * prepared.bullet + 1
    return doc.overhead + doc.whole_tokens


def _check_ids(passages: Sequence[Passage]) -> None:
    seen: set[str] = set()
    for passage in passages:
        if passage.id in seen:
            raise ValueError(f"two passages share the id {passage.id!r}; ids must be unique")
        seen.add(passage.id)
