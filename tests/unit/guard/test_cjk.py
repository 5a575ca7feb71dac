"""`capsa.guard.cjk`: strict CJK readings, scored by their language's common characters.

Every input is written here: sentences in each language, encoded with Python's
codecs. The thresholds' measurements are ``benchmarks/legacy_encodings.py``'s.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from capsa.guard import cjk
from capsa.guard.cjk import (
    CHANCE_SHARE,
    CjkReading,
    cjk_readings,
    family_of,
    read_cjk,
    read_hz,
    standard_share,
)

CHINESE = "我们在北京开会，他们的报告已经完成了。这个问题很重要，大家都同意这个方案。"
TRADITIONAL = "我們在臺北開會，他們的報告已經完成了。這個問題很重要，大家都同意這個方案。"
JAPANESE = "私は東京で働いています。会議は午後三時に始まります。添付の資料をご確認ください。"
KOREAN = ("저는 서울에서 일하고 있습니다. 회의는 오후 세 시에 시작합니다. "
          "첨부한 자료를 확인해 주세요.")


@pytest.mark.parametrize(("text", "codec", "encoding", "language"), [
    (CHINESE, "gb2312", "gb18030", "Chinese"),
    (CHINESE, "gbk", "gb18030", "Chinese"),
    (TRADITIONAL, "big5", "big5", "Chinese"),
    (TRADITIONAL, "big5hkscs", "big5", "Chinese"),
    (JAPANESE, "euc_jp", "euc_jp", "Japanese"),
    (JAPANESE, "shift_jis", "cp932", "Japanese"),
    (KOREAN, "euc_kr", "cp949", "Korean"),
    (KOREAN, "johab", "johab", "Korean"),
])
def test_read_cjk_takes_the_reading_in_the_texts_own_language(
        text: str, codec: str, encoding: str, language: str) -> None:
    found = read_cjk(text.encode(codec))

    assert found is not None
    assert (found[0].encoding, found[0].language) == (encoding, language)


@pytest.mark.parametrize("payload", [
    "Grüße aus Köln, schöne Tage!".encode("cp1252"),
    "Привет, как дела? Всё хорошо.".encode("cp1251"),
    "Καλημέρα σας, τι κάνετε;".encode("cp1253"),
    "ภาษาไทยเป็นภาษาที่สวยงาม".encode("cp874"),
    bytes(range(0x80, 0x100)),
])
def test_read_cjk_finds_no_cjk_text_in_other_scripts_or_junk(payload: bytes) -> None:
    assert read_cjk(payload) is None


def test_cjk_readings_leave_out_a_codec_that_meets_an_invalid_sequence() -> None:
    readings = cjk_readings(KOREAN.encode("euc_kr") + b"\xff\xff")

    assert readings == []


def test_cjk_readings_leave_out_a_reading_with_control_characters() -> None:
    payload = KOREAN.encode("euc_kr").replace(b" ", b"\x01")

    assert all(r.encoding != "cp949" for r in cjk_readings(payload))


def test_cjk_readings_allow_a_character_cut_by_the_samples_end_only_when_told() -> None:
    sample = KOREAN.encode("euc_kr") + "다".encode("euc_kr")[:1]

    assert [r.encoding for r in cjk_readings(sample, cut=True)][:1] == ["cp949"]
    assert cjk_readings(sample) == []


def test_cjk_readings_come_strongest_evidence_first() -> None:
    readings = cjk_readings(CHINESE.encode("gb2312"))

    assert [r.evidence for r in readings] == sorted((r.evidence for r in readings), reverse=True)


def test_read_cjk_needs_more_than_a_word_or_two() -> None:
    assert read_cjk("中文".encode("gb2312")) is None


def test_read_cjk_abstains_when_a_second_reading_is_close() -> None:
    # A line of GB2312 and a line of EUC-KR: each reading has half a text's evidence.
    payload = CHINESE.encode("gb2312") + b"\n" + KOREAN.encode("euc_kr")
    first, second = cjk_readings(payload)[:2]
    assert {first.language, second.language} == {"Chinese", "Korean"}
    assert first.evidence < cjk.MARGIN * second.evidence

    assert read_cjk(payload, evidence=0.0) is None


def test_a_run_of_one_character_counts_once() -> None:
    laugh = {r.encoding: r for r in cjk_readings("ㅋㅋㅋㅋㅋㅋㅋㅋ".encode("euc_kr"))}

    assert laugh["cp949"].characters == 1


def test_read_cjk_reports_how_far_its_reading_leads() -> None:
    found = read_cjk(KOREAN.encode("euc_kr"))

    assert found is not None
    assert 1 - 1 / cjk.MARGIN <= found[1] <= 1.0


def test_reading_evidence_is_zero_at_or_below_a_misreadings_share() -> None:
    at_chance = CjkReading("gb18030", "Chinese", characters=100, common=round(100 * CHANCE_SHARE))

    assert at_chance.evidence == 0.0
    assert CjkReading("gb18030", "Chinese", characters=0, common=0).evidence == 0.0


def test_reading_evidence_is_the_chernoff_exponent_of_its_common_characters() -> None:
    reading = CjkReading("cp949", "Korean", characters=20, common=8)
    q, p = 0.4, CHANCE_SHARE

    assert reading.evidence == pytest.approx(
        20 * (q * math.log(q / p) + (1 - q) * math.log((1 - q) / (1 - p))))


@given(st.integers(1, 50), st.integers(1, 20), st.floats(0.1, 1.0))
def test_reading_evidence_grows_with_length_at_the_same_share(characters: int, more: int,
                                                              share: float) -> None:
    short = CjkReading("big5", "Chinese", characters, round(share * characters))
    longer = CjkReading("big5", "Chinese", characters * (1 + more),
                        round(share * characters) * (1 + more))

    assert longer.evidence >= short.evidence


def test_read_hz_reads_gb2312_between_its_escapes() -> None:
    payload = "HZ: 我们在北京开会，这个问题很重要。".encode("hz")

    found = read_hz(payload)

    assert found is not None
    assert (found.encoding, found.language) == ("hz", "Chinese")


@pytest.mark.parametrize("payload", [
    b"cd ~{src,docs} && ls ~/work",                 # a shell brace: a space inside
    b"th:replace=\"~{fragments/header :: header}\"",  # a Thymeleaf fragment
    b"pairs that are GB2312 but no common word: ~{abcdefgh~}",
    b"no escape at all, just a tilde ~ here",
    "not ASCII ~{ at all é".encode(),
])
def test_read_hz_refuses_ascii_with_a_tilde_brace_that_is_not_hz(payload: bytes) -> None:
    assert read_hz(payload) is None


@pytest.mark.parametrize(("text", "codec"), [
    (CHINESE, "gb2312"), (TRADITIONAL, "big5"), (KOREAN, "euc_kr"), (JAPANESE, "shift_jis"),
    (JAPANESE, "euc_jp"),
])
def test_standard_share_of_text_in_its_own_codec_is_whole(text: str, codec: str) -> None:
    assert standard_share(text.encode(codec), codec) == 1.0


def test_standard_share_of_a_misreading_in_an_extension_is_small() -> None:
    # Shift-JIS bytes are valid cp949: Hangul syllables outside KS X 1001.
    assert standard_share(JAPANESE.encode("shift_jis"), "cp949") < 0.5


@pytest.mark.parametrize(("payload", "encoding", "share"), [
    (b"plain", "cp949", 1.0), (b"\xff\xff", "cp949", 0.0), ("é".encode("cp1252"), "cp1252", 1.0),
])
def test_standard_share_of_edge_cases(payload: bytes, encoding: str, share: float) -> None:
    assert standard_share(payload, encoding) == share


@pytest.mark.parametrize(("codec", "family"), [
    ("gb2312", "gb18030"), ("GBK", "gb18030"), ("euc-kr", "cp949"), ("shift_jis", "cp932"),
    ("big5hkscs", "big5"), ("euc_jisx0213", "euc_jp"), ("johab", "johab"),
])
def test_family_of_puts_a_codec_with_the_codecs_that_read_its_bytes(codec: str,
                                                                    family: str) -> None:
    members = family_of(codec)

    assert members is not None and family in members


@pytest.mark.parametrize("codec", ["cp1252", "utf-8", "utf-16-le", "koi8_r", "cp874", "hz"])
def test_family_of_knows_no_family_for_other_codecs(codec: str) -> None:
    assert family_of(codec) is None


@pytest.mark.parametrize("language", ["Chinese", "Japanese", "Korean"])
def test_the_common_character_lists_come_with_charset_normalizer(language: str) -> None:
    # charset-normalizer keeps them in `constant.FREQUENCIES`; were they gone,
    # every reading would score nothing and the detector would decide alone.
    assert len(cjk._most_common(language).pattern) > 20


def test_traditional_forms_count_as_common_chinese() -> None:
    common = cjk._most_common("Chinese")

    assert common.match("這") and common.match("这") and common.match("們")



_ALPHABETS = {
    "cp1252": "abcdefghijklmnopqrstuvwxyzàáâäçèéêëìíîïñòóôöùúûüßÀÉÈÖÜÇÑæøåÆØÅœ",
    "cp1250": "abcdefghijklmnopqrstuvwxyząćęłńóśźżčďěňřšťůžĄĆĘŁŃÓŚŹŻČŘŠŽ",
    "cp1251": "абвгдеёжзийклмнопрстуфхцчшщъыьэюяАБВГДЕЖЗИЙКЛМНОПРСТУФХЦЧШЩЭЮЯ",
    "cp866": "абвгдеёжзийклмнопрстуфхцчшщъыьэюяАБВГДЕЖЗИЙКЛМНОПРСТУФХЦЧШЩЭЮЯ",
    "koi8_r": "абвгдеёжзийклмнопрстуфхцчшщъыьэюяАБВГДЕЖЗИЙКЛМНОПРСТУФХЦЧШЩЭЮЯ",
    "cp1253": "αβγδεζηθικλμνξοπρστυφχψωάέήίόύώΑΒΓΔΕΖΗΘΙΚΛΜΝΞΟΠΡΣΤΥΦΧΨΩ",
    "cp1255": "אבגדהוזחטיכלמנסעפצקרשת",
    "cp1256": "ابتثجحخدذرزسشصضطظعغفقكلمنهوي",
    "cp874": "กขคงจฉชซญดตถทนบปผพฟมยรลวศสหอฮะาำิีึืุูเแโใไ่้๊๋",
}


@pytest.mark.parametrize("codec", sorted(_ALPHABETS))
@given(data=st.data())
def test_no_cjk_reading_of_a_single_byte_alphabet_can_overturn_the_detector(
        codec: str, data: st.DataObject) -> None:
    # Words of random letters, spaced or run together: whatever CJK codec reads
    # them, never with the evidence needed to replace a single-byte code page.
    words = data.draw(st.lists(st.text(st.sampled_from(_ALPHABETS[codec]), min_size=1,
                                       max_size=12), min_size=1, max_size=30))
    for joined in (" ".join(words), "".join(words)):
        assert read_cjk(joined.encode(codec), evidence=cjk.OVERRIDE_EVIDENCE) is None


@given(st.binary(min_size=1, max_size=200), st.integers(0, 199),
       st.sampled_from(b"\x00\x01\x07\x1b\x7f"))
def test_no_cjk_reading_holds_a_control_character(junk: bytes, at: int, control: int) -> None:
    at = min(at, len(junk))
    assert read_cjk(junk[:at] + bytes([control]) + junk[at:], evidence=0.0) is None
