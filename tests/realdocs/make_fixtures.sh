#!/usr/bin/env bash
# Rebuild the generated real-document fixtures in tests/realdocs/files/.
# Needs: LibreOffice (soffice, headless), pandoc, ImageMagick (/usr/bin/convert),
# Python with pypdf and msoffcrypto-tool. See README.md for what each file is.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$here/files"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
cd "$work"

cat > report.md <<'MD'
---
title: Harbour Operations Report
author: Northwind Port Authority
---

# Summary

The harbour handled more container traffic this quarter than in any quarter
before. Berth occupancy stayed under the planned ceiling, and the new crane
schedule cut average waiting time for feeder vessels by a third.

# Berth figures

| Berth | Vessels | Notes |
|-------|---------|-------|
| North | 142 | dredging finished in week six |
| South | 97 | crane two under repair |
| East | 211 | night shifts added |

# Outlook

Customs staff will answer questions about the new inspection rules at the
quarterly meeting. The authority expects steady growth next quarter, with the
east quay taking most of the additional feeder calls.
MD
# the long version repeats the body so the DOCX and PDF are over 50 KB of text
python3 - <<'PY'
body = open("report.md").read().split("---\n", 2)[2]
with open("long.md", "w") as f:
    f.write("---\ntitle: Harbour Operations Annual Review\n---\n")
    for n in range(1, 41):
        f.write(body.replace("# ", f"# Part {n}: ", 3))
PY

pandoc report.md -o "$out/report.docx"
pandoc long.md -o "$out/annual-review.docx"
pandoc report.md -o "$out/slides.pptx"
pandoc report.md -s -o "$out/report.epub" --metadata lang=en
pandoc report.md -s -o "$out/report.rtf"
soffice --headless --convert-to pdf --outdir . "$out/annual-review.docx" >/dev/null
cp annual-review.pdf "$out/annual-review-writer.pdf"
soffice --headless --convert-to html --outdir . "$out/report.docx" >/dev/null
cp report.html "$out/report-writer.html"
cat > cells.html <<'HTML'
<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Rota</title></head><body>
<h1>Help desk rota</h1>
<table border="1">
<tr><th>Day</th><th>Duty</th></tr>
<tr><td>Monday</td><td>answer<br/>questions</td></tr>
<tr><td>Tuesday</td><td>file
reports</td></tr>
</table>
</body></html>
HTML
pandoc cells.html -s -o "$out/rota-pandoc.html"
cp cells.html "$out/rota-handwritten.html"

printf 'Berth,Vessels,Tonnage\nNorth,142,1200000\nSouth,97,830000\nEast,211,1900000\n' > berths.csv
soffice --headless --convert-to xlsx --outdir . berths.csv >/dev/null
cp berths.xlsx "$out/berths.xlsx"
cp berths.csv "$out/berths.csv"
cp report.md "$out/report.md"
printf '{"harbour": "Northwind", "berths": ["North", "South", "East"], "vessels": 450}\n' \
  > "$out/berths.json"

# A scanned page: text rendered to a picture, the picture wrapped in a PDF with
# no text layer; and a mixed PDF whose first page has text and second does not.
/usr/bin/convert -size 1700x2200 xc:white -font DejaVu-Sans -pointsize 44 -fill black \
  -annotate +120+200 'Northwind Port Authority' \
  -annotate +120+300 'Scanned inspection notice' \
  -annotate +120+420 'All vessels must report their cargo' \
  -annotate +120+490 'manifest before entering the harbour.' \
  scan.png
/usr/bin/convert scan.png -colorspace Gray -depth 8 -quality 60 scan.jpg
# ImageMagick's policy forbids writing PDF here; Pillow's PDF writer wraps the JPEG.
python3 -c 'import sys; from PIL import Image; Image.open("scan.jpg").save(sys.argv[1], resolution=200)' \
  "$out/scanned-notice.pdf"
/usr/bin/convert scan.png -resize 50% "$out/scanned-notice.png"
soffice --headless --convert-to pdf --outdir . "$out/report.docx" >/dev/null
python3 - "$out" <<'PY'
import sys
from pypdf import PdfReader, PdfWriter
out = sys.argv[1]
writer = PdfWriter()
writer.add_page(PdfReader("report.pdf").pages[0])
writer.add_page(PdfReader(f"{out}/scanned-notice.pdf").pages[0])
with open(f"{out}/mixed-text-and-scan.pdf", "wb") as f:
    writer.write(f)
# copy protection only: an owner password, an empty user password (RC4-128)
locked = PdfWriter(clone_from="report.pdf")
locked.encrypt(user_password="", owner_password="harbour-owner", algorithm="RC4-128",
               permissions_flag=0)
with open(f"{out}/copy-protected.pdf", "wb") as f:
    locked.write(f)
PY

# Legacy encodings and UTF-16, as Windows and older Unix tools save them.
python3 - "$out" <<'PY'
import sys
out = sys.argv[1]
samples = {
    "legacy-cp1252.txt": ("Résumé of the café meeting: naïve façade, “quoted” terms, 5 € fee.\n", "cp1252"),
    "legacy-gbk.txt": ("港口管理局季度报告：本季度集装箱吞吐量创历史新高。\n", "gbk"),
    "legacy-shift-jis.txt": ("港湾局の四半期報告書です。コンテナの取扱量は過去最高でした。\n", "shift_jis"),
    "legacy-cp1256.txt": ("تقرير هيئة الميناء الفصلي: سجلت حركة الحاويات رقما قياسيا.\n", "cp1256"),
    "utf16-no-bom-chinese.txt": ("港口管理局季度报告\n本季度集装箱吞吐量创历史新高\n", "utf-16-le"),
    "utf16-bom.txt": ("\ufeffHarbour report in UTF-16 with a byte-order mark.\n", "utf-16-le"),
    "persian-zwnj.txt": ("می\u200cخواهم گزارش بندر را بخوانم. خانواده: 👨\u200d👩\u200d👧\n", "utf-8"),
}
for name, (text, encoding) in samples.items():
    with open(f"{out}/{name}", "wb") as f:
        f.write(text.encode(encoding))
PY

# A password-protected XLSX (an OLE container holding an EncryptedPackage).
python3 - "$out" <<'PY'
import sys, msoffcrypto.format.ooxml as ooxml
out = sys.argv[1]
with open("berths.xlsx", "rb") as plain, open(f"{out}/protected.xlsx", "wb") as locked:
    ooxml.OOXMLFile(plain).encrypt("harbour", locked)
PY

# E-mail from Python's email package: an HTML body with a table, two
# attachments, and a forwarded message with its own attachment.
python3 - "$out" <<'PY'
import sys
from email.message import EmailMessage
out = sys.argv[1]
forwarded = EmailMessage()
forwarded["From"] = "customs@northwind.example"
forwarded["To"] = "ops@northwind.example"
forwarded["Subject"] = "Inspection rules"
forwarded["Date"] = "Mon, 02 Nov 2026 09:00:00 +0000"
forwarded.set_content("The new inspection rules start next month.\n")
forwarded.add_attachment(open("berths.csv", "rb").read(), maintype="text", subtype="csv",
                         filename="berths.csv")
mail = EmailMessage()
mail["From"] = "ops@northwind.example"
mail["To"] = "board@northwind.example"
mail["Subject"] = "Quarterly report"
mail["Date"] = "Tue, 03 Nov 2026 10:00:00 +0000"
mail.set_content("The quarterly report is attached.\n")
mail.add_alternative(
    "<html><body><p>The quarterly report is attached.</p><table>"
    "<tr><td>Customs staff</td><td>answer\nquestions</td></tr>"
    "<tr><td>Board</td><td>approve<br>budget</td></tr></table></body></html>",
    subtype="html")
mail.add_attachment(open(f"{out}/report.docx", "rb").read(), maintype="application",
                    subtype="vnd.openxmlformats-officedocument.wordprocessingml.document",
                    filename="report.docx")
mail.add_attachment(open("report.pdf", "rb").read(), maintype="application", subtype="pdf",
                    filename="report.pdf")
mail.add_attachment(forwarded)
with open(f"{out}/quarterly-with-attachments.eml", "wb") as f:
    f.write(bytes(mail))
PY
# LibreOffice's own writers, for the pre-parse floors (tests/unit/guard/test_floors.py):
# a deck re-saved by Impress, books exported by Writer, a DOCX converted from RTF by
# Writer, and a workbook of 3,000 rows from CSV by Calc (too long for the attachment
# preset, refused before it is parsed).
mkdir -p "$out/libreoffice"
python3 - <<'PY'
rows = "\n".join(f"vessel {n},berth north quay,{n},arrived on the morning tide"
                 for n in range(3000))
open("manifest.csv", "w").write("vessel,berth,number,note\n" + rows + "\n")
PY
lo() { soffice --headless "-env:UserInstallation=file://$work/profile" --convert-to "$1" \
         --outdir "$out/libreoffice" "${@:2}" >/dev/null; }
lo "pptx:Impress MS PowerPoint 2007 XML" "$out/slides.pptx"
lo epub "$out/report.docx" "$out/annual-review.docx"
lo "docx:MS Word 2007 XML" "$out/report.rtf"
lo "xlsx:Calc MS Excel 2007 XML" manifest.csv
# Legacy Office and OpenDocument files, written by LibreOffice's own filters from the
# OOXML files above (tests/hostile/test_office.py, tests/unit/guard/test_office_formats.py);
# a DOCX under a .doc name, as eng_spa_mult.doc is; and an Outlook message with two
# attachments, written by tests/hostile/_cfb.py (nothing on PyPI writes .msg).
mkdir -p "$out/legacy"
lo doc "$out/report.docx"; lo xls "$out/berths.xlsx"; lo ppt "$out/slides.pptx"
lo odt "$out/report.docx"; lo ods "$out/berths.xlsx"; lo odp "$out/slides.pptx"
for name in report.doc berths.xls slides.ppt report.odt berths.ods slides.odp; do
  mv "$out/libreoffice/$name" "$out/legacy/$name"
done
cp "$out/report.docx" "$out/legacy/docx-named.doc"
(cd "$here/../.." && python3 - "$out" <<'PY'
import sys
from tests.hostile._cfb import outlook_message
out = sys.argv[1]
docx = open(f"{out}/report.docx", "rb").read()
message = outlook_message(
    "Berth schedule", "The north berth opens on Monday.\nThe report is attached.",
    "ops@northwind.example",
    [("berths.csv", "text/csv", b"Berth,Vessels\nNorth,142\nSouth,97\n"),
     ("report.docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
      docx)])
open(f"{out}/legacy/berth-schedule.msg", "wb").write(message)
PY
)
ls -la "$out"
