"""The whole window: reservations read from a model and counted, the rest for context."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from capsa.budget import Budget, Passage, Window, estimate_tokens, pack, plan_window
from capsa.budget.window import read_window, warn_if_empty
from capsa.errors import BudgetError


def chat_model(window: int, output: int | None = None, max_tokens: int | None = None) -> object:
    """Shaped like a LangChain chat model: a profile dict, maybe a max_tokens setting."""
    profile = {"max_input_tokens": window}
    if output is not None:
        profile["max_output_tokens"] = output
    return SimpleNamespace(profile=profile, max_tokens=max_tokens)


def llm(window: int, num_output: int) -> object:
    """Shaped like a LlamaIndex LLM: metadata.context_window and num_output."""
    return SimpleNamespace(metadata=SimpleNamespace(context_window=window, num_output=num_output))


def test_read_window_reads_a_chat_models_profile_and_reserves_its_output() -> None:
    assert read_window(chat_model(128_000, output=16_384)) == (128_000, 16_384)


def test_read_window_prefers_the_models_own_max_tokens_setting() -> None:
    assert read_window(chat_model(128_000, output=16_384, max_tokens=800)) == (128_000, 800)


def test_read_window_reads_a_llamaindex_llms_metadata() -> None:
    assert read_window(llm(3900, 256)) == (3900, 256)


def test_read_window_takes_an_explicit_output_reservation() -> None:
    assert read_window(llm(3900, 256), output_tokens=1000) == (3900, 1000)


def test_read_window_refuses_a_model_that_says_nothing_and_says_what_to_pass() -> None:
    with pytest.raises(ValueError, match="pass the window size as an int"):
        read_window(SimpleNamespace(profile=None))


def test_plan_window_reserves_system_history_tools_and_output() -> None:
    system, history = "Answer from the documents only.", ["Hi.", "Hello! How can I help?"]
    tool = {"name": "search", "parameters": {"type": "object", "properties": {}}}
    plan = plan_window(llm(4096, 512), system=system, history=history, tools=[tool])
    assert plan.system_tokens == estimate_tokens(system)
    assert plan.history_tokens == sum(estimate_tokens(m) for m in history)
    assert plan.tools_tokens > 0
    assert plan.context_tokens == 4096 - 512 - plan.system_tokens - plan.history_tokens - (
        plan.tools_tokens)


def test_plan_window_counts_with_the_tokenizer_it_is_given() -> None:
    plan = plan_window(1000, system="one two three", tokenizer=lambda text: text.split())
    assert plan.system_tokens == 3


def test_window_budget_keeps_the_other_budget_fields() -> None:
    budget = Window(window_tokens=2000, output_tokens=500).budget(attachment_share=0.5,
                                                                  shape="brief")
    assert (budget.max_tokens, budget.attachment_share, budget.shape) == (1500, 0.5, "brief")


def test_window_budget_refuses_when_the_reservations_fill_the_window() -> None:
    with pytest.raises(BudgetError, match="the 1000-token window holds no context"):
        Window(window_tokens=1000, output_tokens=600, history_tokens=400).budget()


def test_budget_for_model_is_the_plans_budget() -> None:
    model = chat_model(8192, output=1024)
    assert Budget.for_model(model, system="Be brief.").max_tokens == 8192 - 1024 - 3


def test_attachment_split_follows_the_window() -> None:
    budget = Budget.for_model(llm(600, 100), attachment_share=0.5)
    long = " ".join(f"Attached rule {n}: the hotel cap is EUR {100 + n}." for n in range(80))
    packet = pack("hotel cap", [Passage(id="r", text=long)], budget,
                  attachments=[Passage(id="a", text=long.replace("Attached", "Memo"))])
    attached, retrieved = packet.receipts
    assert packet.used_tokens <= 500
    assert attached.tokens_kept > 150 and retrieved.tokens_kept > 150


def test_warn_if_empty_logs_the_budget_and_the_reason(caplog: pytest.LogCaptureFixture) -> None:
    packet = pack("cap", [Passage(id="p", text="The cap is EUR 165.")], Budget(max_tokens=2))
    with caplog.at_level(logging.WARNING, logger="capsa.budget"):
        warn_if_empty(packet)
    assert "2-token budget holds none of the 1 passages, not even cut" in caplog.text


def test_warn_if_empty_blames_the_strict_floor_not_the_budget(
        caplog: pytest.LogCaptureFixture) -> None:
    passages = [Passage(id="p", text="The cap is EUR 165. " * 20)]
    packet = pack("visa rules", passages, Budget(max_tokens=40, strict_floor=True))
    with caplog.at_level(logging.WARNING, logger="capsa.budget"):
        warn_if_empty(packet)
    assert "strict relevance floor" in caplog.text and "token budget" not in caplog.text


def test_warn_if_empty_says_when_every_input_was_empty(
        caplog: pytest.LogCaptureFixture) -> None:
    packet = pack("cap", [Passage(id="p", text="")], Budget(max_tokens=40))
    with caplog.at_level(logging.WARNING, logger="capsa.budget"):
        warn_if_empty(packet)
    assert "all 1 passages are empty" in caplog.text


def test_warn_if_empty_is_silent_when_something_was_kept(
        caplog: pytest.LogCaptureFixture) -> None:
    packet = pack("cap", [Passage(id="p", text="The cap is EUR 165.")], Budget(max_tokens=50))
    with caplog.at_level(logging.WARNING, logger="capsa.budget"):
        warn_if_empty(packet)
    assert caplog.text == ""
