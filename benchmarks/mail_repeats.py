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
2. **additions**: parts that add text to the same bodies: a paragraph after a
   picture, a list footer, an invitation line, a reply above a quote, a P.S.,
   a signature only one rendering has. All should be handed back.
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
import sys
import sysconfig
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


def _part(text: str, subtype: str = "plain") -> EmailMessage:
    part = EmailMessage()
    part.set_content(text, subtype=subtype)
    return part


def _row(case: str, kind: str, body: Message, part: Message) -> dict[str, Any]:
    data = part.get_payload(decode=True)
    assert isinstance(data, bytes)
    overlap = BodyWords(body).overlap(part, data)
    return {"case": case, "kind": kind, "words": overlap.words, "found": overlap.found,
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
    """The extremes the two thresholds sit between."""
    renderings = [r for r in rows if r["kind"] == "rendering"]
    additions = [r for r in rows if r["kind"] == "addition"]
    measured_found = [part for row in found_rows for part in row.get("parts", ())]
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
