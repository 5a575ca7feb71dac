"""`ExtractionLimits`: the defaults the issue names, validation at construction, immutability."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from capsa.guard import DEFAULT_LIMITS, ExtractionLimits

MiB = 1024 * 1024


def test_limits_defaults_follow_the_seed_numbers() -> None:
    limits = ExtractionLimits()

    assert limits.max_bytes == 8 * MiB
    assert limits.max_uncompressed_bytes == 8 * MiB
    assert limits.max_expansion_ratio == 100
    assert limits.max_members == 1024
    assert limits.max_nesting_depth == 1
    assert limits.max_pages == 20
    assert limits.max_text_chars == 50_000
    assert limits.max_total_chars == 120_000


def test_limits_defaults_bound_each_parser_call_in_time_and_memory() -> None:
    limits = ExtractionLimits()

    assert limits.timeout_s == 30
    assert limits.cpu_s == 30
    assert limits.memory_bytes == 1024 * MiB
    assert limits.max_file_write_bytes == 64 * MiB
    assert limits.on_type_mismatch == "refuse"


def test_default_limits_constant_equals_a_fresh_instance() -> None:
    assert ExtractionLimits() == DEFAULT_LIMITS


@pytest.mark.parametrize(
    "field",
    ["max_bytes", "max_uncompressed_bytes", "max_expansion_ratio", "ratio_floor_bytes",
     "max_members", "max_pages", "max_pixels", "max_text_chars", "max_total_chars",
     "timeout_s", "cpu_s", "memory_bytes", "max_file_write_bytes"],
)
@pytest.mark.parametrize("value", [0, -1])
def test_limits_refuse_non_positive_ceilings_at_construction(field: str, value: int) -> None:
    with pytest.raises(ValidationError, match=field):
        ExtractionLimits(**{field: value})


def test_limits_allow_zero_nesting_but_not_negative() -> None:
    assert ExtractionLimits(max_nesting_depth=0).max_nesting_depth == 0
    with pytest.raises(ValidationError, match="max_nesting_depth"):
        ExtractionLimits(max_nesting_depth=-1)


def test_limits_accept_only_the_two_type_mismatch_policies() -> None:
    assert ExtractionLimits(on_type_mismatch="trust_bytes").on_type_mismatch == "trust_bytes"
    with pytest.raises(ValidationError, match="on_type_mismatch"):
        ExtractionLimits(on_type_mismatch="guess")


def test_limits_refuse_unknown_fields() -> None:
    with pytest.raises(ValidationError, match="max_bites"):
        ExtractionLimits(max_bites=10)  # type: ignore[call-arg]


def test_limits_are_frozen() -> None:
    limits = ExtractionLimits()
    with pytest.raises(ValidationError, match="frozen"):
        limits.max_bytes = 1  # type: ignore[misc]


def test_limits_model_copy_leaves_the_original_unchanged() -> None:
    limits = ExtractionLimits(max_pages=7)

    copy = limits.model_copy(update={"max_pages": 3})

    assert (limits.max_pages, copy.max_pages) == (7, 3)


def test_limits_document_every_field_in_the_json_schema() -> None:
    properties = ExtractionLimits.model_json_schema()["properties"]

    undocumented = [name for name, spec in properties.items() if not spec.get("description")]

    assert set(properties) == set(ExtractionLimits.model_fields)
    assert undocumented == []
