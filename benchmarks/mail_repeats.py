"""E-mail text parts that say the body again: where the thresholds of `_repeats` sit.

`capsa.guard.extractors.mail` leaves out a plain or HTML part beside the body
when at least ``DUPLICATE_SHARE`` of its distinct words are in the body and at
least ``COVER_SHARE`` of the body's are in it. This measures both shares on:

1. **renderings**: three messages written here, each as HTML and as the plain
   text a mail client makes of it, by the conventions their bug reports and
   fixtures show: Gmail writes a link as ``text <url>``, a picture as
   ``[image: alt]`` and bold as ``*bold*``; Outlook writes ``text<url>`` and
   ``[cid:image001.png@...]``; Apple Mail drops links and pictures; Thunderbird
   numbers list items; a footnote-link converter (html2text's way) ends the text
   with ``[1]: url``. Each is compared both ways: the plain part beside the HTML
   body, and the HTML part beside the plain body. All should be left out.
   Four more messages are Chinese, Japanese, Korean and Chinese mixed with
   English, each rendered as plain text wrapped at 20, 37 and 76 display
   columns (a wide character takes two), broken between any two wide
   characters and at spaces, as UAX #14 lets a wrapper break them.
2. **additions**: parts that add text to the same bodies: a paragraph after a
   picture, a list footer, an invitation line, a reply above a quote, a P.S.,
   a signature only one rendering has; for the CJK messages, a list footer
   (also beside a body that quotes it), another message in the same language,
   the same message in another CJK language. All should be handed back.
3. **found**: Python's own e-mail test messages (``test/test_email/data`` of
   the running interpreter, skipped where it has none): what `read_mail`
   hands back and leaves out for each.

Nothing is downloaded and no found file is copied. Run
``python benchmarks/mail_repeats.py [--out PATH]``; it writes
``benchmarks/results/mail_repeats.json``. No timing.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import sysconfig
import unicodedata
from email import policy
from email.message import EmailMessage, Message
from email.parser import BytesParser
from pathlib import Path
from typing import Any

from capsa.errors import IngestionRejected
from capsa.guard.extractors._repeats import COVER_SHARE, DUPLICATE_SHARE, BodyWords
from capsa.guard.extractors.mail import read_mail

HERE = Path(__file__).resolve().parent
CPYTHON_MAIL = Path(sysconfig.get_path("stdlib")) / "test" / "test_email" / "data"

INVOICE = (
    '<div>Hi Dana,</div><div><br></div><div>Please find the <a href="https://billing.example.com/'
    'inv/2024-117?t=9f3ac">invoice for March</a> below. The total is <b>4,180.00 EUR</b>, due on '
    '30 April.</div><div><br></div><div><img src="cid:image001.png@01DA2B3C.4F5E6D70" '
    'alt="Company logo"></div><div>If anything looks wrong, reply to this mail or call me on '
    "+44 20 7946 0123.</div><div><br></div><div>Best regards,</div><div>Marta Kowalska</div>"
    "<div>Accounts, Northwind Harbour Ltd</div>")
INVOICE_TEXT = (
    "Please find the invoice for March below. The total is 4,180.00 EUR, due on 30 April.\n\n"
    "If anything looks wrong, reply to this mail or call me on +44 20 7946 0123.\n\n"
    "Best regards,\nMarta Kowalska\nAccounts, Northwind Harbour Ltd\n")
MEETING = (
    "<p>Team,</p><p>The berth allocation review moves to <strong>Thursday 14:00</strong> in room "
    "3.12. Agenda:</p><ol><li>North berth dredging schedule</li><li>Crane 4 maintenance window"
    "</li><li>Night shift staffing for May</li></ol><p>Slides are on the <a href="
    '"https://intranet.example.com/ops/berths">ops site</a>. Please send corrections by Wednesday '
    "noon.</p><p>Thanks,<br>Jonas</p>")
MEETING_LIST = (" 1. North berth dredging schedule\n 2. Crane 4 maintenance window\n"
                " 3. Night shift staffing for May\n")
SHORT = '<div dir="ltr">Thanks, that works for me.</div>'

RENDERINGS: dict[str, tuple[str, dict[str, str]]] = {
    "invoice": (INVOICE, {
        "gmail": "Hi Dana,\n\nPlease find the invoice for March\n<https://billing.example.com/inv/"
                 "2024-117?t=9f3ac> below. The total is *4,180.00 EUR*, due on 30 April.\n\n"
                 "[image: Company logo]\nIf anything looks wrong, reply to this mail or call me "
                 "on +44 20 7946 0123.\n\nBest regards,\nMarta Kowalska\nAccounts, Northwind "
                 "Harbour Ltd\n",
        "outlook": "Hi Dana,\n\nPlease find the invoice for March<https://billing.example.com/inv/"
                   "2024-117?t=9f3ac> below. The total is 4,180.00 EUR, due on 30 April.\n\n"
                   "[cid:image001.png@01DA2B3C.4F5E6D70]\nIf anything looks wrong, reply to this "
                   "mail or call me on +44 20 7946 0123.\n\nBest regards,\nMarta Kowalska\n"
                   "Accounts, Northwind Harbour Ltd\n",
        "apple": "Hi Dana,\n\n" + INVOICE_TEXT,
        "footnotes": "Hi Dana,\n\nPlease find the invoice for March [1] below. The total is "
                     "**4,180.00 EUR**, due on 30 April.\n\n![Company logo][2]\n\nIf anything "
                     "looks wrong, reply to this mail or call me on +44 20 7946 0123.\n\nBest "
                     "regards,\nMarta Kowalska\nAccounts, Northwind Harbour Ltd\n\n[1]: https://"
                     "billing.example.com/inv/2024-117?t=9f3ac\n[2]: cid:image001.png@01DA2B3C."
                     "4F5E6D70\n",
        "mobile-signature": "Hi Dana,\n\n" + INVOICE_TEXT + "\nSent from my iPhone\n",
    }),
    "meeting": (MEETING, {
        "thunderbird": "Team,\n\nThe berth allocation review moves to *Thursday 14:00* in room "
                       "3.12. Agenda:\n\n" + MEETING_LIST + "\nSlides are on the ops site <https:"
                       "//intranet.example.com/ops/berths>. Please send corrections by Wednesday "
                       "noon.\n\nThanks,\nJonas\n",
        "outlook": "Team,\n\nThe berth allocation review moves to Thursday 14:00 in room 3.12. "
                   "Agenda:\n\n" + MEETING_LIST + "\nSlides are on the ops site<https://intranet"
                   ".example.com/ops/berths>. Please send corrections by Wednesday noon.\n\n"
                   "Thanks,\nJonas\n",
    }),
    "short": (SHORT, {"gmail": "Thanks, that works for me.\n",
                      "apple": "Thanks, that works for me."}),
}
"""Each message as HTML, and the plain renderings of it."""

ADDITIONS: dict[str, dict[str, str]] = {
    "invoice": {
        "after-picture": "The second page shows the credit note we agreed in February; it is "
                         "already deducted.\n",
        "after-picture-short": "Thanks again!\n",
        "list-footer": "_______________________________________________\nharbour-billing mailing "
                       "list\nharbour-billing@lists.example.org\nhttps://lists.example.org/"
                       "listinfo/harbour-billing\n",
        "invitation-line": "Payment run: Tuesday 30 April, 10:00, treasury office\n",
        "reply-above-quote": "Marta, the invoice is paid; remittance advice attached separately."
                             "\n\nOn 12 April, Marta Kowalska wrote:\n> Please find the invoice "
                             "for March below.\n",
        "postscript": "Hi Dana,\n\n" + INVOICE_TEXT + "\nP.S. The bank details changed last "
                      "week: use IBAN GB29 NWBK 6016 1331 9268 19 from now on.\n",
        "legal-signature": "Hi Dana,\n\n" + INVOICE_TEXT + "-- \nNorthwind Harbour Ltd, "
                           "registered in England no. 04817263, 12 Quay Street, Bristol BS1 "
                           "4DJ\n",
    },
    "meeting": {
        "after-picture": "Here is the crane photo from this morning: the rust on the boom is "
                         "worse than in March.\n",
        "list-footer": "--\nYou received this because you are on the ops-berths list. "
                       "Unsubscribe: https://lists.example.com/u/ops-berths\n",
        "postscript": "Team,\n\nThe berth allocation review moves to Thursday 14:00 in room "
                      "3.12. Agenda:\n\n" + MEETING_LIST + "\nSlides are on the ops site. Please "
                      "send corrections by Wednesday noon.\n\nThanks,\nJonas\n\nPS: bring your "
                      "badge, reception is closed.\n",
    },
    "short": {"other-short": "See you on Monday.\n", "after-picture": "Nice photo!\n"},
}
"""Parts that add text to each message; the first plain rendering stands for its plain body."""

CJK: dict[str, str] = {
    "zh": ("各位同事：\n泊位分配评审会议改到<b>星期四下午两点</b>，在三楼十二号会议室"
           "举行。议程包括北泊位疏浚计划、四号起重机维护窗口以及五月份夜班人员安排。\n"
           '幻灯片已经放在<a href="https://intranet.example.com/ops/berths">运营网站</a>'
           "上。如有修改意见，请在星期三中午之前发给我。\n谢谢！\n王强"),
    "ja": ("チームの皆さん\n岸壁割り当ての見直し会議は<b>木曜日の午後二時</b>に変更に"
           "なりました。場所は三階の会議室です。議題は北岸壁の浚渫計画、四号クレーンの"
           "点検日程、そして五月の夜勤体制です。\n資料は運用サイトに置いてあります。"
           "修正があれば水曜日の正午までにお知らせください。\nよろしくお願いします。\n山田"),
    "ko": ("팀원 여러분,\n선석 배정 검토 회의가 <b>목요일 오후 두 시</b>로 "
           "변경되었습니다. 장소는 3층 12호 회의실입니다. 안건은 북쪽 선석 준설 "
           "계획, 4호 크레인 점검 일정, 그리고 5월 야간 근무 편성입니다.\n"
           "자료는 운영 사이트에 올려 두었습니다. 수정 사항이 있으면 수요일 정오까지 "
           "알려 주세요.\n감사합니다.\n김민수"),
    "zh-en": ("Hi team / 各位：\nQ3 报告的 draft 已经放在 SharePoint 上了，请在 Friday "
              "之前 review 一下。重点是 Crane 4 的 maintenance window 和北泊位 dredging "
              "的预算。\n如果有问题，直接回复这封邮件或者打我的分机 4512。\nThanks, 王强"),
}
"""Messages in scripts written without spaces, one paragraph a line, as HTML fragments."""
CJK_WIDTHS = (20, 37, 76)
CJK_ADDITIONS: dict[str, str] = {
    "list-footer": ("_______________________________________________\n港口运营邮件列表\n"
                    "harbour-ops@lists.example.org\n退订或修改设置请访问 "
                    "https://lists.example.org/listinfo/harbour-ops\n"),
    "other-message": ("各位同事：\n四号起重机的维护工作提前到星期二上午完成，"
                      "星期四之前可以恢复作业。夜班人员请按原计划到岗。\n谢谢！\n李娜"),
    "after-picture": "这是今天早上拍的起重机照片：吊臂上的锈比三月份更严重了。\n",
    "postscript": "附言：银行账户上周已经变更，以后请使用新的账户付款，旧账户将于下月关闭。",
    "short-reply": "好的，星期四见。",
}
"""Parts that add text beside the Chinese message (the P.S. follows its whole text)."""


def _cjk_html(text: str) -> str:
    return "".join(f"<div>{line}</div>" for line in text.split("\n"))


def _cjk_plain(text: str, columns: int) -> str:
    """A mailer's plain rendering of `text`: tags gone, a link as ``text <url>``, lines
    wrapped at `columns` display columns between any two wide characters or at a space."""
    text = re.sub(r'<a href="([^"]*)">([^<]*)</a>', r"\2 <\1>", text)
    text = re.sub(r"<[^>]*>", "", text)
    lines: list[str] = []
    for paragraph in text.split("\n"):
        line, width = "", 0
        for piece in re.findall(r"[A-Za-z0-9@.:/_<>'-]+|\s|.", paragraph):
            size = sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in piece)
            if width + size > columns and line:
                lines.append(line.rstrip())
                line, width = ("", 0) if piece.isspace() else (piece, size)
                continue
            line, width = line + piece, width + size
        lines += [line.rstrip(), ""]
    return "\n".join(lines)


for _name, _text in CJK.items():
    RENDERINGS[_name] = (_cjk_html(_text), {f"wrap-{width}": _cjk_plain(_text, width)
                                            for width in CJK_WIDTHS})
ADDITIONS.update({
    "zh": {**{what: _cjk_plain(text, 40) for what, text in CJK_ADDITIONS.items()},
           "postscript": _cjk_plain(CJK["zh"] + "\n" + CJK_ADDITIONS["postscript"], 40),
           "ja-version": _cjk_plain(CJK["ja"], 40), "ko-version": _cjk_plain(CJK["ko"], 40)},
    "ja": {"zh-version": _cjk_plain(CJK["zh"], 40)},
    "ko": {"other-message": _cjk_plain(
        "팀원 여러분,\n4호 크레인 정비가 화요일 오전에 끝나서 목요일 전에 작업을 "
        "재개할 수 있습니다. 야간 근무자는 원래 계획대로 출근해 주세요.\n"
        "감사합니다.\n이나래", 40)},
    "zh-en": {"list-footer": _cjk_plain(CJK_ADDITIONS["list-footer"], 40)},
})
QUOTED_FOOTER = _cjk_html(CJK["zh"] + "\n> " + CJK_ADDITIONS["list-footer"].replace("\n", "\n> "))
"""The Chinese message quoting the list footer of the message it answers."""


def _part(text: str, subtype: str = "plain") -> EmailMessage:
    part = EmailMessage()
    part.set_content(text, subtype=subtype)
    return part


def _row(case: str, kind: str, body: Message, part: Message) -> dict[str, Any]:
    data = part.get_payload(decode=True)
    assert isinstance(data, bytes)
    overlap = BodyWords(body).overlap(part, data)
    script = "cjk" if case.split("/")[0] in CJK else "latin"
    return {"case": case, "kind": kind, "script": script, "words": overlap.words,
            "found": overlap.found,
            "share": round(overlap.found / max(1, overlap.words), 3),
            "body_words": overlap.body_words, "covered": overlap.covered,
            "cover": round(overlap.covered / max(1, overlap.body_words), 3),
            "in_order": overlap.in_order, "left_out": overlap.repeats}


def measured() -> list[dict[str, Any]]:
    """One row per rendering (both ways) and per addition (against both bodies)."""
    rows: list[dict[str, Any]] = []
    for name, (html, plains) in RENDERINGS.items():
        for client, plain in plains.items():
            rows.append(_row(f"{name}/{client}: plain beside HTML body", "rendering",
                             _part(html, "html"), _part(plain)))
            rows.append(_row(f"{name}/{client}: HTML beside plain body", "rendering",
                             _part(plain), _part(html, "html")))
        first_plain = next(iter(plains.values()))
        for what, text in ADDITIONS[name].items():
            rows.append(_row(f"{name}/{what}: beside HTML body", "addition",
                             _part(html, "html"), _part(text)))
            rows.append(_row(f"{name}/{what}: beside plain body", "addition",
                             _part(first_plain), _part(text)))
    rows.append(_row("zh/list-footer: beside an HTML body quoting it", "addition",
                     _part(QUOTED_FOOTER, "html"), _part(ADDITIONS["zh"]["list-footer"])))
    return rows


def found() -> list[dict[str, Any]]:
    """Python's e-mail test messages: each plain or HTML part beside the body (not in an
    alternative with it, not an attachment) measured, and what `read_mail` made of it all."""
    rows: list[dict[str, Any]] = []
    for path in sorted(CPYTHON_MAIL.glob("msg_*.txt")) if CPYTHON_MAIL.is_dir() else []:
        payload = path.read_bytes()
        message = BytesParser(policy=policy.default).parsebytes(payload)
        body = message.get_body(("html", "plain")) if isinstance(message, EmailMessage) else None
        if not message.is_multipart() or body is None:
            continue
        try:
            mail = read_mail(payload)
        except IngestionRejected as refused:
            rows.append({"file": path.name, "refused": refused.reason})
            continue
        rows.append({"file": path.name,
                     "parts": [_row(f"{path.name}: {part.get_content_type()}", "found", body,
                                    part) for part in _beside(message, body)],
                     "handed_back": [f"{f.name} ({f.media_type})" for f in mail.embedded],
                     "left_out": [part.describe() for part in mail.repeated]})
    return rows


def _beside(message: Message, body: Message) -> list[Message]:
    """Non-empty plain and HTML leaves outside embedded messages and alternatives."""
    parts: list[Message] = []
    stack: list[Message] = [message]
    while stack:
        part = stack.pop()
        ctype = part.get_content_type()
        if ctype in ("message/rfc822", "multipart/alternative"):
            continue
        if part.is_multipart():
            children = part.get_payload()
            stack.extend(reversed([c for c in children if isinstance(c, Message)]))
        elif (part is not body and ctype in ("text/plain", "text/html")
              and not part.get_filename() and part.get_content_disposition() != "attachment"):
            data = part.get_payload(decode=True)
            if isinstance(data, bytes) and data.strip():
                parts.append(part)
    return parts


def summary(rows: list[dict[str, Any]], found_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The extremes the two thresholds sit between, over all rows and over the CJK ones."""
    measured_found = [part for row in found_rows for part in row.get("parts", ())]
    cjk = [r for r in rows if r["script"] == "cjk"]
    return {**_extremes(rows, measured_found), "cjk": _extremes(cjk, [])}


def _extremes(rows: list[dict[str, Any]], measured_found: list[dict[str, Any]]
              ) -> dict[str, Any]:
    renderings = [r for r in rows if r["kind"] == "rendering"]
    additions = [r for r in rows if r["kind"] == "addition"]
    return {
        "duplicate_share": DUPLICATE_SHARE, "cover_share": COVER_SHARE,
        "renderings_left_out": sum(r["left_out"] for r in renderings),
        "renderings": len(renderings),
        "additions_left_out": sum(r["left_out"] for r in additions),
        "additions": len(additions),
        "lowest_rendering_share": min(r["share"] for r in renderings if r["words"] >= 6),
        "lowest_rendering_cover": min(r["cover"] for r in renderings),
        "highest_addition_share_with_cover": max(
            (r["share"] for r in additions if r["cover"] >= COVER_SHARE and r["words"] >= 6),
            default=0.0),
        "highest_kept_cover_at_share": max(
            (r["cover"] for r in additions + measured_found
             if r["share"] >= DUPLICATE_SHARE and not r["left_out"]), default=0.0),
        "found_parts": len(measured_found),
        "found_parts_left_out": sum(r["left_out"] for r in measured_found),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "results" / "mail_repeats.json")
    args = parser.parse_args(argv)
    rows = measured()
    print(f"{'share':>6} {'cover':>6} {'order':>5} {'left out':>8}  case")
    for row in rows:
        print(f"{row['share']:6.3f} {row['cover']:6.3f} {row['in_order']!s:>5} "
              f"{'yes' if row['left_out'] else '':>8}  {row['kind']}: {row['case']}")
    found_rows = found()
    for row in (part for found_row in found_rows for part in found_row.get("parts", ())):
        print(f"{row['share']:6.3f} {row['cover']:6.3f} {row['in_order']!s:>5} "
              f"{'yes' if row['left_out'] else '':>8}  {row['kind']}: {row['case']}")
    result = {"summary": summary(rows, found_rows), "rows": rows, "found": found_rows,
              "python": sys.version.split()[0]}
    print(json.dumps(result["summary"], indent=1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
