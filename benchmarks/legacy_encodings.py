"""Legacy CJK decoding: labelled files found on this machine, and sentences written here.

Measures what `capsa.guard.cjk` adds to charset-normalizer, and the figures its
thresholds rest on:

1. **labelled files**: every file of chardet's test suite found on the machine
   (its folders name each file's encoding; the Google Cloud SDK ships a copy)
   and Python's own ``test/cjkencodings`` of the running interpreter, decoded by
   `detect_and_decode` and by the same with the CJK readings switched off (the
   detector alone). A decode is right when 99 % of its characters agree with
   the label's decoding. UTF and ISO-2022 folders are left out: neither path
   guesses there.
2. **readings**: in the labelled CJK files, the lowest common-character share
   and evidence of a right reading, the highest of a wrong one (``CHANCE_SHARE``).
3. **non-CJK pieces**: the most evidence any CJK reading of a piece of 16 to
   1,024 bytes of the other labelled files reached (``OVERRIDE_EVIDENCE``).
4. **sentences**: everyday sentences written below, 1 to 5 at a time, in every
   codec of their language; how often each path gives them back exactly.
5. **jamo chat**: Korean with the jamo of chat (ㅋㅋ, ㅇㅇ), which EUC-JP reads
   as hiragana: how often each path gives it back.

Nothing is downloaded; files missing on this machine are skipped, and no found
file is copied anywhere. Run ``python benchmarks/legacy_encodings.py [--quick]
[--out PATH]``; it writes ``benchmarks/results/legacy_encodings.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import importlib
import json
import os
import platform
import random
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from capsa.guard import cjk
from capsa.guard.normalize import UndecodableText, detect_and_decode

normalize_module = importlib.import_module("capsa.guard.normalize")

HERE = Path(__file__).resolve().parent
CHARDET = "/usr/lib/google-cloud-sdk/platform/gsutil/third_party/chardet/tests"
CPYTHON = Path(sysconfig.get_path("stdlib")) / "test" / "cjkencodings"

LABELS = {"Big5": "big5", "CP932": "cp932", "CP949": "cp949", "EUC-JP": "euc_jp",
          "EUC-KR": "euc_kr", "GB2312": "gb2312", "Johab": "johab", "SHIFT_JIS": "shift_jis",
          "IBM855": "cp855", "IBM866": "cp866", "KOI8-R": "koi8_r",
          "MacCyrillic": "mac_cyrillic", "MacRoman": "mac_roman", "TIS-620": "tis_620",
          "iso-8859-1": "latin-1"}
"""chardet's folder names, and the codec each names; ``iso-8859-N-*`` and ``windows-NNNN-*``
folders are read from their names."""

PHRASES = {
    "Chinese": ["我们在北京开会", "他们的报告已经完成了", "这个问题很重要", "你可以看一下附件",
                "我们要在下周一以前回复", "公司今年的发展很好", "大家都同意这个方案",
                "他说明天不能来", "这是我们的工作计划", "会议上讨论了很多事情"],
    "Traditional": ["我們在臺北開會", "他們的報告已經完成了", "這個問題很重要", "你可以看一下附件",
                    "我們要在下週一以前回覆", "公司今年的發展很好", "大家都同意這個方案",
                    "他說明天不能來", "這是我們的工作計劃", "會議上討論了很多事情"],
    "Japanese": ["私は東京で働いています", "会議は午後三時に始まります",
                 "添付の資料をご確認ください", "来週の月曜日までに返事をください",
                 "この問題について話し合いました", "新しい計画はとても良いと思います",
                 "田中さんは明日来ません", "駅の近くに新しい店ができました"],
    "Korean": ["저는 서울에서 일하고 있습니다", "회의는 오후 세 시에 시작합니다",
               "첨부한 자료를 확인해 주세요", "다음 주 월요일까지 답장을 주세요",
               "이 문제에 대해 이야기했습니다", "새로운 계획이 아주 좋다고 생각합니다",
               "김 선생님은 내일 오지 않습니다", "보고서를 다 썼습니다"],
}
PUNCTUATION = {"Chinese": ("，", "。", ""), "Traditional": ("，", "。", ""),
               "Japanese": ("、", "。", ""), "Korean": (", ", ".", " ")}
CODECS = {"Chinese": ["gb2312", "gbk", "gb18030", "hz"],
          "Traditional": ["big5", "big5hkscs", "cp950"],
          "Japanese": ["shift_jis", "euc_jp"],
          "Korean": ["euc_kr", "johab"]}
CHAT = ["알았어", "뭐야", "진짜", "그래서", "내일 보자", "미안해", "대박", "오늘 회의 끝났어",
        "저는 서울에서 일하고 있습니다", "첨부한 자료를 확인해 주세요"]
JAMO = ["ㅋㅋ", "ㅋㅋㅋ", "ㅎㅎ", "ㅠㅠ", "ㅜㅜ", "ㅇㅇ", "ㄴㄴ", "ㄱㄱ", "ㅇㅋ", "ㄷㄷ"]


def label_codec(folder: str) -> str | None:
    if folder in LABELS:
        return LABELS[folder]
    if folder.startswith("iso-8859-"):
        return "iso8859_" + folder.split("-")[2]
    if folder.startswith("windows-"):
        return "cp" + folder.split("-")[1]
    return None


def labelled_files() -> Iterator[tuple[str, Path, str]]:
    """(group, path, codec) for each labelled code-page file found."""
    for folder in sorted(os.listdir(CHARDET)) if os.path.isdir(CHARDET) else []:
        codec = label_codec(folder)
        if codec is not None:
            for path in sorted(Path(CHARDET, folder).iterdir()):
                yield ("cjk" if cjk.family_of(codec) else "other"), path, codec
    for path in sorted(CPYTHON.glob("*.txt")) if CPYTHON.is_dir() else []:
        name = path.stem
        if not name.endswith("-utf8") and not name.startswith("iso2022"):
            yield "cjk", path, name


@contextlib.contextmanager
def detector_alone() -> Iterator[None]:
    """`detect_and_decode` with the CJK readings and HZ switched off."""
    saved = normalize_module.read_cjk, normalize_module.read_hz
    normalize_module.read_cjk = lambda *args, **kwargs: None
    normalize_module.read_hz = lambda *args, **kwargs: None
    try:
        yield
    finally:
        normalize_module.read_cjk, normalize_module.read_hz = saved


def decode(payload: bytes) -> tuple[str | None, str | None]:
    try:
        decoded = detect_and_decode(payload)
    except UndecodableText:
        return None, "refused"
    return decoded.text, decoded.encoding


def agreement(text: str | None, expected: str) -> float:
    if text is None:
        return 0.0
    if text == expected:
        return 1.0
    if len(text) == len(expected):
        return sum(a == b for a, b in zip(text, expected, strict=True)) / max(1, len(text))
    return difflib.SequenceMatcher(None, text[:3000], expected[:3000], autojunk=False).ratio()


def outcome(text: str | None, expected: str) -> str:
    if text is None:
        return "refused"
    return "right" if agreement(text, expected) >= 0.99 else "wrong"


def run_labelled() -> dict[str, Any]:
    rows = []
    for group, path, codec in labelled_files():
        payload = path.read_bytes()
        expected = payload.decode(codec, "replace")
        text, encoding = decode(payload)
        with detector_alone():
            alone_text, alone_encoding = decode(payload)
        rows.append({"group": group, "file": f"{path.parent.name}/{path.name}", "label": codec,
                     "bytes": len(payload), "encoding": encoding,
                     "outcome": outcome(text, expected), "detector_alone": alone_encoding,
                     "detector_alone_outcome": outcome(alone_text, expected)})
    summary = {}
    for group in ("cjk", "other"):
        mine = [r for r in rows if r["group"] == group]
        summary[group] = {"files": len(mine), **{
            f"{path}_{kind}": sum(1 for r in mine if r[key] == kind)
            for path, key in (("capsa", "outcome"), ("alone", "detector_alone_outcome"))
            for kind in ("right", "refused", "wrong")}}
    return {"rows": rows, "summary": summary}


def run_readings(labelled: list[dict[str, Any]]) -> dict[str, Any]:
    right: list[tuple[float, float, str]] = []
    wrong: list[tuple[float, float, str]] = []
    for row in labelled:
        if row["group"] != "cjk" or row["file"].split("/")[0] not in LABELS:
            continue
        payload = Path(CHARDET, row["file"]).read_bytes()
        sample = normalize_module._code_page_sample(payload)
        for reading in cjk.cjk_readings(sample, cut=len(sample) < len(payload)):
            same = cjk.family_of(reading.encoding) == cjk.family_of(row["label"])
            (right if same else wrong).append(
                (round(reading.share, 3), round(reading.evidence, 2), row["file"]))
    return {
        "right_readings": len(right), "wrong_readings": len(wrong),
        "right_lowest_share": min(right, default=(None, None, None)),
        "right_lowest_evidence": min(right, key=lambda r: r[1], default=(None, None, None)),
        "wrong_highest_share": max(wrong, default=(None, None, None)),
        "wrong_highest_evidence": max(wrong, key=lambda r: r[1], default=(None, None, None)),
    }


def run_pieces(labelled: list[dict[str, Any]], *, quick: bool) -> dict[str, Any]:
    sizes = (16, 64, 1024) if quick else (16, 32, 64, 128, 256, 1024)
    pieces, best = 0, (0.0, "", 0)
    for row in labelled:
        if row["group"] != "other":
            continue
        payload = Path(CHARDET, row["file"]).read_bytes()[: 4000 if quick else 20000]
        for size in sizes:
            for start in range(0, max(1, len(payload) - size), max(1, size // 4)):
                piece = payload[start:start + size]
                if piece.isascii():
                    continue
                pieces += 1
                readings = cjk.cjk_readings(piece, cut=True)
                if readings and readings[0].evidence > best[0]:
                    best = (readings[0].evidence, row["file"], size)
    return {"pieces": pieces, "sizes": list(sizes), "highest_evidence": round(best[0], 2),
            "highest_in": best[1], "highest_piece_bytes": best[2],
            "override_evidence": cjk.OVERRIDE_EVIDENCE}


def sentences(language: str, count: int, rng: random.Random) -> str:
    comma, stop, between = PUNCTUATION[language]
    return between.join(
        comma.join(rng.sample(PHRASES[language], rng.randint(1, 2))) + stop for _ in range(count))


def run_sentences(*, quick: bool) -> list[dict[str, Any]]:
    rng = random.Random(1)
    texts = 30 if quick else 200
    rows = []
    for language, codecs_ in CODECS.items():
        for count in (1, 2, 3, 5):
            batch = [sentences(language, count, rng) for _ in range(texts)]
            for codec in codecs_:
                capsa = sum(decode(t.encode(codec))[0] == t for t in batch)
                with detector_alone():
                    alone = sum(decode(t.encode(codec))[0] == t for t in batch)
                rows.append({"language": language, "codec": codec, "sentences": count,
                             "texts": texts, "capsa_right": capsa, "alone_right": alone})
    return rows


def run_chat(*, quick: bool) -> dict[str, Any]:
    rng = random.Random(2)
    texts = [" ".join(rng.choice(CHAT if rng.random() < 0.5 else JAMO)
                      for _ in range(rng.randint(2, 12))) for _ in range(200 if quick else 2000)]
    result: dict[str, Any] = {"texts": len(texts)}
    for codec in ("euc_kr", "johab"):
        capsa = [decode(t.encode(codec))[0] == t for t in texts]
        with detector_alone():
            alone = [decode(t.encode(codec))[0] == t for t in texts]
        result[codec] = {"capsa_right": sum(capsa), "alone_right": sum(alone),
                         "only_capsa_right": sum(c and not a for c, a in zip(capsa, alone,
                                                                               strict=True)),
                         "only_alone_right": sum(a and not c for c, a in zip(capsa, alone,
                                                                              strict=True))}
    return result


def machine() -> dict[str, Any]:
    import charset_normalizer

    return {"python": platform.python_version(),
            "charset_normalizer": charset_normalizer.__version__,
            "chardet_tests_found": os.path.isdir(CHARDET), "cjkencodings_found": CPYTHON.is_dir()}


def report(result: dict[str, Any]) -> None:
    print("1. Labelled files (right / refused / wrong)")
    for group, row in result["labelled"]["summary"].items():
        print(f"   {group:6} {row['files']:4} files   capsa {row['capsa_right']}/"
              f"{row['capsa_refused']}/{row['capsa_wrong']}   detector alone "
              f"{row['alone_right']}/{row['alone_refused']}/{row['alone_wrong']}")
    for row in result["labelled"]["rows"]:
        if row["outcome"] != row["detector_alone_outcome"] or (
                row["group"] == "cjk" and row["outcome"] != "right"):
            print(f"   {row['file']:48} {row['label']:10} capsa {row['encoding']} "
                  f"({row['outcome']}), alone {row['detector_alone']} "
                  f"({row['detector_alone_outcome']})")
    readings = result["readings"]
    print("2. Readings of the labelled CJK files (share, evidence)")
    print(f"   right: lowest share {readings['right_lowest_share'][:2]}, lowest evidence "
          f"{readings['right_lowest_evidence'][:2]}")
    print(f"   wrong: highest share {readings['wrong_highest_share'][:2]}, highest evidence "
          f"{readings['wrong_highest_evidence'][:2]}")
    pieces = result["non_cjk_pieces"]
    print(f"3. Non-CJK pieces: {pieces['pieces']}, highest evidence {pieces['highest_evidence']}"
          f" ({pieces['highest_in']}, {pieces['highest_piece_bytes']} bytes); "
          f"override needs {pieces['override_evidence']}")
    print("4. Sentences given back exactly (capsa / detector alone, of each batch)")
    for row in result["sentences"]:
        print(f"   {row['language']:12} {row['codec']:10} {row['sentences']} sentence(s): "
              f"{row['capsa_right']:4} / {row['alone_right']:4} of {row['texts']}")
    chat = result["jamo_chat"]
    print(f"5. Korean chat with jamo, {chat['texts']} texts (capsa / detector alone; "
          "only one right)")
    for codec in ("euc_kr", "johab"):
        row = chat[codec]
        print(f"   {codec:8} {row['capsa_right']} / {row['alone_right']}; "
              f"{row['only_capsa_right']} / {row['only_alone_right']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="fewer sentences and pieces")
    parser.add_argument("--out", default=str(HERE / "results" / "legacy_encodings.json"))
    args = parser.parse_args(argv)
    labelled = run_labelled()
    result = {"machine": machine(), "labelled": labelled,
              "readings": run_readings(labelled["rows"]),
              "non_cjk_pieces": run_pieces(labelled["rows"], quick=args.quick),
              "sentences": run_sentences(quick=args.quick), "jamo_chat": run_chat(quick=args.quick)}
    report(result)
    Path(args.out).write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
