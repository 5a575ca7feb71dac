"""N: names and labels (N1–N8): an untrusted name becomes one short, safe display line.

A label is never a path and never trusted for the type; it is shown in
reports and quoted in the prompt container, so it must stay printable,
bounded and unable to close the container.
"""

from __future__ import annotations

import re
import unicodedata

import pytest

from capsa.guard import Attachment, Extracted, IsolatedExtractor

from .conftest import (
    HOSTILE_LABELS,
    LIMITS,
    assert_omitted,
    run_among_good,
    run_set,
)

_HOSTILE_INDEX = 1  # run_among_good puts the hostile file second


@pytest.mark.parametrize(("entry", "raw", "expected"), HOSTILE_LABELS,
                         ids=[f"{e}-{i}" for i, (e, _, _) in enumerate(HOSTILE_LABELS)])
def test_hostile_name_becomes_a_safe_label(plain_pool: IsolatedExtractor, entry: str, raw: str,
                                           expected: str) -> None:
    payload = f"contents of a file sent as {entry}".encode()
    outcome = run_among_good(plain_pool, Attachment(label=raw, payload=payload))
    assert isinstance(outcome, Extracted)
    assert outcome.label == expected.format(index=_HOSTILE_INDEX)
    assert outcome.text == payload.decode()  # the bytes given, never a file at that path


@pytest.mark.parametrize("raw", ["a" * 10_000 + ".pdf", "\U0001f600" * 300,
                                 "n" * 300 + ".verylongextensionthatisnotone"])
def test_n4_overlong_name_is_capped_keeping_a_short_extension(plain_pool: IsolatedExtractor,
                                                              raw: str) -> None:
    outcome = run_among_good(plain_pool, Attachment(label=raw, payload=b"long name"))
    assert isinstance(outcome, Extracted)
    assert len(outcome.label) <= 255
    assert re.search(r"~[0-9a-f]{8}(\.pdf)?$", outcome.label), outcome.label
    if raw.endswith(".pdf"):
        assert outcome.label.endswith(".pdf")


def test_n4_two_long_names_with_a_shared_prefix_stay_distinct(
        plain_pool: IsolatedExtractor) -> None:
    names = ["q" * 400 + "-january.txt", "q" * 400 + "-february.txt"]
    run = run_set([Attachment(label=n, payload=n[-12:].encode()) for n in names], plain_pool)
    first, second = (item.label for item in run.result.extracted)
    assert first != second
    assert len(first) <= 255 and len(second) <= 255


def test_n3_right_to_left_override_neither_hides_nor_decides_the_type(
        plain_pool: IsolatedExtractor) -> None:
    outcome = run_among_good(plain_pool, Attachment(label="report\u202efdp.exe",
                                                    payload=b"plain words, not a program"))
    assert isinstance(outcome, Extracted)
    assert outcome.label == "reportfdp.exe"
    assert outcome.kind == "text"  # sniffed from the bytes, not the name


def test_every_hostile_label_in_one_set_stays_printable_and_contained(
        plain_pool: IsolatedExtractor) -> None:
    files = [Attachment(label=raw, payload=f"file {i}".encode())
             for i, (_, raw, _) in enumerate(HOSTILE_LABELS)]
    run = run_set(files, plain_pool, LIMITS)
    assert len(run.result.extracted) == len(files)
    for item in run.result.extracted:
        assert item.label and item.label == item.label.strip()
        assert "/" not in item.label and "\\" not in item.label
        assert not any(unicodedata.category(ch) in {"Cc", "Cf", "Cs", "Zl", "Zp"}
                       for ch in item.label)
        assert unicodedata.is_normalized("NFC", item.label)
    assert run.result.text.count("<attachment name=") == len(files)


def test_n5_fallback_labels_follow_the_position_in_the_set(
        plain_pool: IsolatedExtractor) -> None:
    files = [Attachment(label=raw, payload=b"nameless") for raw in ("", ".", "..", "   ")]
    run = run_set(files, plain_pool, LIMITS)
    assert [item.label for item in run.result.extracted] == [
        "attachment-0", "attachment-1", "attachment-2", "attachment-3"]


def test_n1_hostile_label_on_a_refused_file_is_safe_in_the_omission(
        plain_pool: IsolatedExtractor) -> None:
    outcome = run_among_good(plain_pool, Attachment(label="../../etc/\u202eempty\n.txt",
                                                    payload=b""))
    omission = assert_omitted(outcome, stage="size", reason="empty")
    assert omission.label == "empty .txt"


def test_declared_media_type_with_a_lone_surrogate_leaves_valid_utf8_output(
        plain_pool: IsolatedExtractor) -> None:
    run = run_set([Attachment(label="a.txt", media_type="text/plain\udcff", payload=b"hi")],
                  plain_pool, LIMITS)
    assert [item.media_type for item in run.result.extracted] == ["text/plain"]
    run.result.model_dump_json()


def test_declared_media_type_with_terminal_escapes_is_kept_printable(
        plain_pool: IsolatedExtractor) -> None:
    files = [Attachment(label="a.txt", media_type="text/plain\x1b]8;;x\x07\n", payload=b"hi"),
             Attachment(label="b.txt", media_type="\x1b\x07\u202e", payload=b"ho")]
    run = run_set(files, plain_pool, LIMITS)
    assert [item.media_type for item in run.result.extracted] == ["text/plain]8;;x", None]


def test_n4_six_mib_label_is_cut_before_any_normalisation(
        plain_pool: IsolatedExtractor, monkeypatch: pytest.MonkeyPatch) -> None:
    # U+FDFA grows eighteenfold under NFKC: whole, 6 MiB of it cost the
    # application 18 s and 2.8 GiB. Only a bounded slice may ever reach NFKC.
    seen: list[int] = []
    normalize = unicodedata.normalize

    def measured(form: str, text: str) -> str:
        seen.append(len(text))
        return normalize(form, text)

    monkeypatch.setattr(unicodedata, "normalize", measured)
    raw = "\ufdfa" * (2 << 20) + ".txt"  # 6 MiB of UTF-8
    outcome = run_among_good(plain_pool, Attachment(label=raw, payload=b"a long name"))
    assert isinstance(outcome, Extracted)
    assert len(outcome.label) <= 255
    assert len(outcome.label.encode()) <= 4 * 255
    assert outcome.label.endswith(".txt")
    assert max(seen) <= 18 * 1024  # NFKC of at most 1,024 characters, and NFC of its result


def test_n4_names_cut_before_normalisation_still_stay_distinct(
        plain_pool: IsolatedExtractor) -> None:
    # Equal first and last 512 characters; only the middle differs.
    names = ["a" * 600 + middle + "z" * 600 + ".txt" for middle in ("one", "two")]
    run = run_set([Attachment(label=n, payload=b"same") for n in names], plain_pool, LIMITS)
    first, second = (item.label for item in run.result.extracted)
    assert first != second


def test_overlong_declared_media_type_is_bounded_before_it_is_cleaned(
        plain_pool: IsolatedExtractor) -> None:
    run = run_set([Attachment(label="a.txt", media_type="text/plain" + "\x1b" * (8 << 20),
                              payload=b"hi")], plain_pool, LIMITS)
    assert [item.media_type for item in run.result.extracted] == ["text/plain"]
