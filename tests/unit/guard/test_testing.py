"""`capsa.guard.testing`: the safe behaviours of the chaos extractors, run in process.

The dangerous behaviours (hang, allocate, segfault, ...) only ever run inside
an isolated worker; see `test_isolation.py`.
"""

from __future__ import annotations

import pytest

from capsa.guard.extractors import PlainTextExtractor
from capsa.guard.testing import FaultInjectingExtractor, MisbehavingExtractor


def test_echo_returns_the_payload_as_text() -> None:
    assert MisbehavingExtractor("echo").extract("text", None, b"fine", max_pages=1) == "fine"


def test_an_echo_prefix_is_echoed_whatever_the_behaviour() -> None:
    extractor = MisbehavingExtractor("segfault")

    assert extractor.extract("text", None, b"echo:safe", max_pages=1) == "echo:safe"


def test_raise_raises_a_plain_key_error() -> None:
    with pytest.raises(KeyError, match="tripped"):
        MisbehavingExtractor("raise").extract("text", None, b"x", max_pages=1)


def test_garbage_returns_something_that_is_not_text() -> None:
    assert not isinstance(MisbehavingExtractor("garbage").extract("text", None, b"x",
                                                                  max_pages=1), str)


def test_surrogate_returns_a_lone_surrogate() -> None:
    assert "\ud800" in MisbehavingExtractor("surrogate").extract("text", None, b"x", max_pages=1)


def test_misbehaving_extractor_claims_the_plain_text_kinds() -> None:
    assert MisbehavingExtractor.kinds == {"text", "markdown", "csv", "json"}


# seeded fault injection


def test_fault_for_is_a_pure_function_of_payload_and_seed() -> None:
    first = FaultInjectingExtractor(seed=3, rates={"crash": 0.5})
    second = FaultInjectingExtractor(seed=3, rates={"crash": 0.5})
    payloads = [f"file {i}".encode() for i in range(200)]

    draws = [first.fault_for(p) for p in payloads]

    assert draws == [second.fault_for(p) for p in payloads]
    assert 0 < draws.count("crash") < len(payloads)
    assert set(draws) == {"crash", None}


def test_fault_for_changes_with_the_seed() -> None:
    payloads = [f"file {i}".encode() for i in range(50)]

    one = [FaultInjectingExtractor(seed=1, rates={"raise": 0.5}).fault_for(p) for p in payloads]
    two = [FaultInjectingExtractor(seed=2, rates={"raise": 0.5}).fault_for(p) for p in payloads]

    assert one != two


def test_fault_injection_with_no_rates_never_misbehaves() -> None:
    extractor = FaultInjectingExtractor(seed=7)

    assert [extractor.fault_for(bytes([i])) for i in range(100)] == [None] * 100
    assert extractor.extract("text", None, b"fine", max_pages=1) == "fine"


def test_fault_injection_at_rate_one_always_injects_that_fault() -> None:
    extractor = FaultInjectingExtractor(rates={"raise": 1.0})

    with pytest.raises(KeyError):
        extractor.extract("text", None, b"anything", max_pages=1)


def test_fault_injection_delegates_clean_payloads_to_the_inner_extractor() -> None:
    extractor = FaultInjectingExtractor(PlainTextExtractor(), seed=1)

    assert extractor.extract("text", None, b"\xef\xbb\xbfhi", max_pages=1) == "hi"
    assert extractor.kinds == PlainTextExtractor.kinds
    assert extractor.self_test() == PlainTextExtractor().self_test()


@pytest.mark.parametrize(
    "rates", [{"explode": 0.1}, {"crash": -0.1}, {"crash": 0.6, "hang": 0.6}]
)
def test_fault_injection_refuses_impossible_rates(rates: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="fault"):
        FaultInjectingExtractor(rates=rates)
