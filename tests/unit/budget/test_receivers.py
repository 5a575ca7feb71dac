from __future__ import annotations

from collections.abc import Sequence

import pytest

from capsa.budget import (
    Budget,
    LexicalScorer,
    Passage,
    ReceiverProfile,
    estimate_tokens,
    pack_for,
)

from .conftest import char_tokenizer

QUERY = "hotel cap"


def test_pack_for_builds_a_packet_per_receiver_in_its_own_shape(passages: list[Passage]) -> None:
    receivers = [ReceiverProfile.frontier_llm(), ReceiverProfile.local_model(60),
                 ReceiverProfile.human_brief(80)]
    packets = pack_for(receivers, QUERY, passages)
    assert list(packets) == ["frontier-llm", "local-model", "human-brief"]
    assert "\n- " in packets["local-model"].render()
    assert "\n- " not in packets["frontier-llm"].render()
    brief = packets["human-brief"].render().splitlines()[1:-1]  # inside the container
    assert brief and all(line.startswith("<document") for line in brief)  # one line each


def test_pack_for_keeps_each_receivers_budget(passages: list[Passage]) -> None:
    receivers = [ReceiverProfile(name=f"r{n}", budget=Budget(max_tokens=n)) for n in (30, 60, 90)]
    for receiver, packet in zip(receivers, pack_for(receivers, QUERY, passages).values(),
                                strict=True):
        assert estimate_tokens(packet.render()) <= receiver.budget.max_tokens


def test_pack_for_scores_the_retrieval_once_per_tokenizer(passages: list[Passage]) -> None:
    calls: list[int] = []

    class Spy:
        def score(self, query: str, texts: Sequence[str]) -> list[float]:
            calls.append(len(texts))
            return LexicalScorer().score(query, texts)

    receivers = [ReceiverProfile.frontier_llm(), ReceiverProfile.local_model(),
                 ReceiverProfile.human_brief(tokenizer=char_tokenizer)]
    pack_for(receivers, QUERY, passages, scorer=Spy())
    assert len(calls) == 4  # sentences and passages, for each of two tokenizers


def test_pack_for_uses_a_receivers_own_tokenizer(passages: list[Passage]) -> None:
    receiver = ReceiverProfile(name="chars", budget=Budget(max_tokens=80), tokenizer=char_tokenizer)
    packet = pack_for([receiver], QUERY, passages)["chars"]
    assert packet.used_tokens == char_tokenizer(packet.render()) <= 80


def test_pack_for_rejects_duplicate_receiver_names(passages: list[Passage]) -> None:
    with pytest.raises(ValueError, match="unique"):
        pack_for([ReceiverProfile.frontier_llm()] * 2, QUERY, passages)


def test_receiver_presets_differ_in_budget_and_shape() -> None:
    presets = [ReceiverProfile.frontier_llm(), ReceiverProfile.local_model(),
               ReceiverProfile.human_brief()]
    assert [(p.budget.max_tokens, p.budget.shape) for p in presets] == [
        (8000, "passages"), (1000, "features"), (400, "brief")]
