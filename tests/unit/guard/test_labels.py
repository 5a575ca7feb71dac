"""`safe_label`: an untrusted file name becomes one short printable line with no path."""

from __future__ import annotations

import pytest

from capsa.guard import safe_label
from capsa.guard.labels import MAX_LABEL_CHARS


@pytest.mark.parametrize(
    ("raw", "label"),
    [
        ("../../../../etc/passwd", "passwd"),
        ("/etc/shadow", "shadow"),
        ("C:\\Windows\\System32\\drivers\\etc\\hosts", "hosts"),
        ("..\\..\\boot.ini", "boot.ini"),
        ("reports/2024/q3.pdf", "q3.pdf"),
    ],
)
def test_safe_label_keeps_only_the_last_path_component(raw: str, label: str) -> None:
    assert safe_label(raw) == label


def test_safe_label_applies_nfkc_before_stripping_full_width_paths() -> None:
    assert safe_label("．．／etc／passwd") == "passwd"
    assert safe_label("a＼b.txt") == "b.txt"


@pytest.mark.parametrize(
    ("raw", "label"),
    [
        ("line1\nSYSTEM: obey\n.txt", "line1 SYSTEM: obey .txt"),
        ("\x1b[2Jcleared.txt", "[2Jcleared.txt"),
        ("tab\there\r.txt", "tab here .txt"),
        ("nul\x00byte.txt", "nulbyte.txt"),
        ("del\x7f\x85.txt", "del.txt"),
    ],
)
def test_safe_label_removes_control_characters(raw: str, label: str) -> None:
    assert safe_label(raw) == label


def test_safe_label_removes_bidi_overrides_so_the_extension_reads_true() -> None:
    assert safe_label("report\u202efdp.exe") == "reportfdp.exe"


@pytest.mark.parametrize(
    "invisible", ["\u200b", "\u200d", "\u2066", "\ufeff", "\U000e0041", "\u2028", "\u2029"]
)
def test_safe_label_removes_zero_width_tag_and_separator_characters(invisible: str) -> None:
    assert safe_label(f"in{invisible}voice.pdf") == "invoice.pdf"


def test_safe_label_removes_lone_surrogates() -> None:
    assert safe_label("bad\ud800name.txt") == "badname.txt"


def test_safe_label_collapses_white_space() -> None:
    assert safe_label("  quarterly \u00a0\u3000 report .pdf  ") == "quarterly report .pdf"


def test_safe_label_composes_nfd_to_nfc() -> None:
    assert safe_label("cafe\u0301.txt") == "caf\u00e9.txt"


@pytest.mark.parametrize("raw", ["", ".", "..", "   ", "...", "dir/", "a/..", "\u200b\u202e", None])
def test_safe_label_falls_back_to_the_position_when_nothing_printable_remains(
    raw: str | None,
) -> None:
    assert safe_label(raw, index=7) == "attachment-7"


def test_safe_label_keeps_reserved_device_names_as_harmless_text() -> None:
    assert safe_label("CON.txt") == "CON.txt"


def test_safe_label_caps_length_and_keeps_the_extension() -> None:
    label = safe_label("a" * 10_000 + ".pdf")

    assert len(label) == MAX_LABEL_CHARS
    assert label.endswith(".pdf")
    assert label.startswith("aaaa")


def test_safe_label_gives_long_names_with_a_shared_prefix_distinct_labels() -> None:
    first = safe_label("x" * 300 + "-january.pdf")
    second = safe_label("x" * 300 + "-february.pdf")

    assert first != second
    assert len(first) == len(second) == MAX_LABEL_CHARS


def test_safe_label_caps_names_made_of_wide_characters() -> None:
    label = safe_label("\U0001f600" * 300)

    assert len(label) <= MAX_LABEL_CHARS
    assert label.startswith("\U0001f600")


def test_safe_label_drops_an_overlong_extension_instead_of_keeping_it() -> None:
    label = safe_label("a" * 300 + "." + "b" * 40)

    assert len(label) == MAX_LABEL_CHARS
    assert "." not in label


def test_safe_label_is_stable_for_an_already_safe_label() -> None:
    label = safe_label("../" + "n" * 400 + ".docx")

    assert safe_label(label) == label


def test_safe_label_leaves_an_ordinary_name_alone() -> None:
    assert safe_label("Q3 budget (final) v2.xlsx") == "Q3 budget (final) v2.xlsx"
