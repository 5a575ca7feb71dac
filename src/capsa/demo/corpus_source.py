"""Ground truth for the sample corpus: what each file says and questions it answers.

The corpus in `capsa/demo/corpus/` describes the policies of a made-up company,
Northwind Harbor Logistics. `scripts/make_corpus.py` renders every document below
into its file format (PDF, DOCX, XLSX, HTML, e-mail, PNG, Markdown), so this module
is the one place the prose lives: tests compare what an extractor returns with
`SourceDocument.text`, and demos ask `QUESTIONS` whose answers are known.

Conventions the renderer relies on:

- `text` is plain ASCII. Blocks are separated by a blank line; the first block is
  the title, and a short block without closing punctuation is a section heading.
- Formats that reflow text (PDF lines, the PNG's lines) may break lines anywhere,
  so compare extracted text with `text` after collapsing runs of whitespace.
- The spreadsheet's `text` is its table: one line per row, cells separated by tabs.
- The Markdown file's bytes are `text` itself, markup included.
- Every `SampleQuestion.answer` occurs verbatim in its own document's `text` and in
  no other document's.

Examples:
    >>> [d.name for d in DOCUMENTS if d.kind == "png"]
    ['office-notice.png']
    >>> q = QUESTIONS[0]
    >>> q.answer in document(q.document_name).text
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CORPUS_DIR",
    "DOCUMENTS",
    "HOSTILE_FILES",
    "QUESTIONS",
    "HostileFile",
    "SampleQuestion",
    "SourceDocument",
    "document",
]

CORPUS_DIR = Path(__file__).parent / "corpus"
"""Directory holding the generated corpus files (and their README.md)."""


@dataclass(frozen=True)
class SourceDocument:
    """One good file of the corpus and the exact prose it carries."""

    name: str
    """File name inside `CORPUS_DIR`, e.g. ``"travel-policy.pdf"``."""
    title: str
    """Human title; the PDF/DOCX/HTML title, the e-mail subject, the sheet's title."""
    kind: str
    """File format by extension: pdf, docx, xlsx, html, eml, png or md."""
    text: str
    """The prose the file carries (see the module docstring for the conventions)."""


@dataclass(frozen=True)
class SampleQuestion:
    """A question answered by one short span of one document."""

    question: str
    """The question as a user would ask it."""
    answer: str
    """A short span occurring verbatim in exactly one document's text."""
    document_name: str
    """`SourceDocument.name` of the document holding the answer."""


@dataclass(frozen=True)
class HostileFile:
    """A corpus file built to be refused; it carries no prose to extract."""

    name: str
    """File name inside `CORPUS_DIR`."""
    claimed_kind: str
    """The kind its extension claims."""
    actual_kind: str
    """The kind its bytes really are."""
    why: str
    """What makes it hostile and which guard should refuse it."""


def _prose(source: str) -> str:
    """Join soft-wrapped source lines into paragraphs, keeping blank-line breaks."""
    blocks = source.strip().split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in b.splitlines()) for b in blocks)


_TRAVEL = _prose("""
Travel and Expense Policy

Policy NHL-POL-007, version 4.2, effective 1 February 2025. Owner: Daniel Whitcombe,
Chief Financial Officer, Northwind Harbor Logistics.

Scope and approval

This policy applies to every employee, contractor and board member who travels on
company business. Any trip that involves an overnight stay must be booked through the
TripDesk portal and approved in advance by the traveller's department head. Trips
outside Europe, or longer than five nights, also need written approval from the Chief
Financial Officer before tickets are bought.

Air and rail

Flights are booked in economy class. Premium economy is allowed when the scheduled
flight time exceeds six hours, and business class only with the personal approval of
the Chief Financial Officer. Rail travel is booked in standard class; first class may
be used when a single rail journey is longer than four hours. Tickets should be bought
at least 14 days before departure whenever the trip is known that far ahead.

Hotels

The nightly hotel cap is EUR 165 including taxes. In high-cost cities, namely London,
Oslo, Zurich and New York, the cap is EUR 230. Travellers should choose hotels from the
preferred list in TripDesk, where Northwind Harbor has negotiated corporate rates with
the Meridian Quay and Saltmarsh hotel groups.

Meals and per diem

Instead of itemised meal receipts, travellers receive a daily meal allowance of EUR 55
for domestic trips and EUR 70 for international trips. The allowance is reduced by half
on days when breakfast and dinner are provided by a host or a conference. Alcohol,
minibar charges, in-room films and laundry on trips shorter than five nights are never
reimbursed.

Mileage and ground transport

Employees who use a private car for business travel are paid EUR 0.32 per kilometre,
plus parking and tolls against receipts. Taxis are reimbursed when public transport is
unavailable, when travelling between 22:00 and 06:00, or when carrying heavy sample
equipment.

Claims and receipts

Expense claims are submitted in TripDesk within 30 days of returning from the trip. A
receipt is required for every item above EUR 25. Claims submitted more than 90 days
after the trip are rejected unless the Chief Financial Officer grants an exception.
Approved claims are paid with the next monthly payroll run.

Corporate card

Frequent travellers receive a corporate card with a monthly limit of EUR 5,000. The card
is for business expenses only, and cash withdrawals are limited to EUR 200 per trip. A
lost or stolen card must be reported within 24 hours to the finance helpline on
extension 4410.
""")

_RETENTION = _prose("""
Data Retention Schedule

Policy NHL-POL-012, approved on 14 January 2025 by Owen Castellanos, Records Manager.
This schedule tells every department how long Northwind Harbor Logistics keeps each
class of record and how the record is destroyed at the end of its life.

General rules

Records are kept for the period listed below, counted from the end of the calendar
year in which the record was closed. A record may not be destroyed early, and it may
not be kept longer without a documented business reason approved by the Records
Manager. Personal data is minimised: if a field is not needed for the purpose it was
collected for, it is not stored.

Operational records

Customer shipping manifests and bills of lading are kept for 7 years. Customs
declarations and import licences are kept for 10 years, because customs authorities in
several ports can audit a declaration for that long. Temperature logs from refrigerated
containers are kept for 3 years. CCTV footage from the warehouses and the container
yard is overwritten after 31 days unless security has exported a clip for an
investigation.

People records

Payroll and pension records are kept for 8 years after the employee leaves. Personnel
files are kept for 6 years after employment ends. Records of unsuccessful job
applicants, including CVs and interview notes, are deleted 6 months after the hiring
decision. The mailbox of a departing employee is retained for 180 days and then
deleted, after the line manager has moved any business records into the document
archive.

Legal holds

When litigation, a regulatory inquiry or an insurance claim is expected, the General
Counsel, Renata Duarte, issues a litigation hold. A hold suspends all deletion for the
records it names until the General Counsel releases it in writing, whatever this
schedule says.

Destruction

Paper records are destroyed by Greyfell Shredding, which collects locked consoles from
each site every second Thursday and issues a certificate of destruction for every
collection. Electronic records are deleted from live systems and expire from backups
when the backup media are overwritten on a 35-day rotation. Certificates of destruction
are themselves kept for 10 years.

Review

The Records Manager reviews this schedule every November and publishes any changes
before 1 December.
""")

# fmt: off
_EQUIPMENT_ROWS: tuple[tuple[str, ...], ...] = (
    ("Item code", "Item", "Category", "Supplier", "Unit price (EUR)",
     "Replacement cycle (months)", "Approver"),
    ("NW-LT-14", "Standard laptop, 14-inch", "Computing", "Brightline Systems", "1249", "48",
     "Line manager"),
    ("NW-LT-16", "Engineering laptop, 16-inch", "Computing", "Brightline Systems", "2180", "48",
     "IT director"),
    ("NW-MN-27", "Monitor, 27-inch", "Peripherals", "Ostrava Displays", "329", "72",
     "Line manager"),
    ("NW-DK-01", "USB-C docking station", "Peripherals", "Brightline Systems", "214", "60",
     "Line manager"),
    ("NW-HS-02", "Noise-cancelling headset", "Peripherals", "Calloway Audio", "189", "36",
     "Line manager"),
    ("NW-PH-11", "Company smartphone", "Mobile", "Tern Mobile", "699", "36",
     "Department head"),
    ("NW-SC-05", "Handheld barcode scanner", "Warehouse", "Quayside Instruments", "1475", "60",
     "Site manager"),
    ("NW-PR-09", "Thermal label printer", "Warehouse", "Quayside Instruments", "612", "60",
     "Site manager"),
    ("NW-RT-03", "Rugged tablet", "Warehouse", "Tern Mobile", "1890", "48", "Site manager"),
    ("NW-CH-07", "Ergonomic office chair", "Furniture", "Linden Workspace", "545", "96",
     "Facilities"),
    ("NW-DS-08", "Sit-stand desk", "Furniture", "Linden Workspace", "760", "120",
     "Facilities"),
    ("NW-HM-04", "Home-office starter kit", "Remote work", "Linden Workspace", "400", "48",
     "Line manager"),
    ("NW-SK-12", "Hardware security key", "Security", "Vantor Security", "58", "60",
     "IT director"),
    ("NW-FW-06", "Branch firewall appliance", "Network", "Vantor Security", "3340", "60",
     "IT director"),
)
# fmt: on
_EQUIPMENT = "\n".join("\t".join(row) for row in _EQUIPMENT_ROWS)

_HANDBOOK = _prose("""
Employee Handbook, Chapter 6: Security Incident Response

This chapter explains what every Northwind Harbor Logistics employee does when
something looks wrong with our systems, data or premises. It was last revised on
9 December 2024 by Tomasz Reyes, Chief Information Security Officer.

What counts as an incident

A security incident is any event that could harm the confidentiality, integrity or
availability of company or customer information. Examples are a laptop left on a
train, a password typed into a fake login page, a ransom note on a screen, a tailgater
at the Brenmouth warehouse gate, or customer manifests sent to the wrong shipping
agent.

Report first, investigate later

Report a suspected incident to the Security Operations Desk within 15 minutes of
noticing it, by calling extension 7000 or writing to soc@northwindharbor.example. Do
not investigate on your own, do not delete anything, and do not switch off an affected
computer. Unplug the network cable or turn off Wi-Fi instead, and leave the machine
running so that the evidence in its memory is preserved. Suspicious e-mails are
forwarded as attachments to phish@northwindharbor.example and then deleted from the
inbox.

Severity levels

The Security Operations Desk assigns a severity within one hour. SEV-1 means customer
data has been exposed or port operations have stopped; the Chief Information Security
Officer and the Chief Executive, Marguerite Okafor, are called at any hour. SEV-2 means
a contained compromise of one system or account, handled during extended business
hours. SEV-3 covers attacks that failed, such as blocked phishing, and is reviewed
weekly.

Notifying others

If personal data is involved, the Data Protection Officer decides whether the
supervisory authority must be told. A notifiable personal data breach is reported to
the regulator within 72 hours of the company becoming aware of it. Customers are
informed by their account manager, using wording approved by the General Counsel.
Employees never talk to journalists or post on social media about an incident.

After the incident

Every SEV-1 and SEV-2 incident gets a blameless post-incident review within 10 working
days. Its findings and follow-up actions are recorded in the Harbor Ledger risk
register. Each October the security team runs a tabletop exercise in which a simulated
ransomware attack on the Brenmouth terminal systems is handled from the first report to
the final review.
""")

_BOARD_EMAIL = _prose("""
Dear colleagues,

At its meeting on 27 February 2025 the Board of Northwind Harbor Logistics approved two
policy changes that take effect on 1 April 2025. I am writing to explain them before
the detailed policies are republished.

First, the Sustainable Travel Rule. From 1 April, a business trip may not be made by
air when the same journey can be made by rail in under five hours. The Travel and
Expense Policy will be amended to say so, and TripDesk will block such flights unless
the Chief Financial Officer approves an exception for an operational emergency, such as
a vessel held at berth. The Board adopted the rule by a vote of 7 to 1 after reviewing
last year's travel emissions, which reached 412 tonnes of CO2 equivalent.

Second, version 3 of the Remote Work Policy. Office-based staff may now work remotely
up to three days a week, and every team keeps Tuesday as its common office day. The
full policy is on the intranet, and your line manager will confirm your arrangement
before the end of March.

To support both changes, the Board has created the Harbor Green Fund with EUR 250,000
for the 2025 financial year. The fund pays for rail upgrades on long journeys, video
conferencing rooms at the Brenmouth and Kestrel Point sites, and electric vans for the
container yard. Teams can apply through the Finance office from 15 April.

Questions can be sent to the Board secretary, Jonas Elmqvist, at
board.secretary@northwindharbor.example.

With best regards,

Ingrid Salvesen, Chair of the Board, Northwind Harbor Logistics
""")

_NOTICE = "\n".join(
    (
        "NORTHWIND HARBOR LOGISTICS",
        "Office Notice: Holiday Closures 2025",
        "The Port Ellery headquarters will be closed on the following days:",
        "Friday 18 April (Good Friday)",
        "Monday 5 May (Early May Bank Holiday)",
        "Monday 26 May (Spring Bank Holiday)",
        "Monday 25 August (Summer Bank Holiday)",
        "Wednesday 24 December to Thursday 1 January (winter shutdown)",
        "The Brenmouth warehouse stays open on all of these days with a reduced crew of 12 staff.",
        "Staff who need to enter the headquarters during the winter shutdown must request a "
        "building pass from reception by 5 December.",
        "Leave for the bridge day on Friday 2 January must be approved by 28 November.",
        "During the shutdown the heating runs in frost protection mode and the car park "
        "barrier stays closed.",
        "For urgent shipments during a closure, call the duty manager on 0800 555 0142.",
        "Questions about this notice go to Agnes Moreau, Facilities Coordinator.",
        "Posted on 6 January 2025 by the Facilities team.",
    )
)

_REMOTE = """\
# Remote Work Policy

Version 3, approved by the Board on 27 February 2025 and effective from 1 April 2025.
Policy owner: Priya Lindqvist, HR Director.

## Who is eligible

Office-based employees become eligible for remote work once they have completed their
three-month probation period. Warehouse, dock, crane and yard roles are site-based and
are not covered by this policy, although their supervisors may agree occasional remote
days for training or administrative work.

## How much remote work

- Office-based staff may work remotely up to three days a week.
- Tuesday is the anchor day: every team works from its assigned office on Tuesdays.
- Core collaboration hours are 10:00 to 15:00 local office time; meetings outside them
  need the consent of everyone invited.
- Each arrangement is recorded in the HR portal and reviewed by the line manager every
  six months.

## Working from abroad

Employees may work from another country for up to 20 working days per calendar year, and
only from the approved countries: the European Economic Area, the United Kingdom and
Switzerland. A request reaches the HR Director at least two weeks before the first day
abroad, because tax and social security rules must be checked for every trip.

## Equipment and allowances

- A one-off home-office allowance of EUR 350 is paid with the first salary after the
  arrangement starts.
- Remote workers may order the home-office starter kit, item NW-HM-04 on the equipment
  price list, through the IT service desk.
- A monthly internet stipend of EUR 30 is paid to anyone who works remotely at least one
  day a week.

## Security at home

- Connect through the HarborLink VPN whenever you work outside a company site.
- Devices lock automatically after 5 minutes without input; lock the screen yourself
  whenever you step away.
- Never print customer manifests at home; printed manifests stay on company premises.
- Report lost equipment to the Security Operations Desk as chapter 6 of the employee
  handbook describes.

## Ending an arrangement

Either the employee or the line manager may end a remote work arrangement with four
weeks' notice in writing. Where performance or security concerns arise, HR may suspend
an arrangement at once while the concern is reviewed.
"""

DOCUMENTS: tuple[SourceDocument, ...] = (
    SourceDocument("travel-policy.pdf", "Travel and Expense Policy", "pdf", _TRAVEL),
    SourceDocument("data-retention.docx", "Data Retention Schedule", "docx", _RETENTION),
    SourceDocument("equipment-prices.xlsx", "Equipment Price List 2025", "xlsx", _EQUIPMENT),
    SourceDocument(
        "handbook.html",
        "Employee Handbook, Chapter 6: Security Incident Response",
        "html",
        _HANDBOOK,
    ),
    SourceDocument(
        "policy-change.eml",
        "Board decision: new travel and remote work rules from 1 April 2025",
        "eml",
        _BOARD_EMAIL,
    ),
    SourceDocument("office-notice.png", "Office Notice: Holiday Closures 2025", "png", _NOTICE),
    SourceDocument("remote-work.md", "Remote Work Policy", "md", _REMOTE),
)
"""The good files, one per format, in the order the README lists them."""

HOSTILE_FILES: tuple[HostileFile, ...] = (
    HostileFile(
        "quarterly-report.docx",
        "docx",
        "docx",
        "A valid OOXML zip whose word/document.xml inflates from about 25 KB to 24 MiB "
        "(ratio over 1000): over the uncompressed-size and ratio ceilings, refused from "
        "the central directory before any parser runs.",
    ),
    HostileFile(
        "invoice.pdf",
        "pdf",
        "png",
        "A PNG image named and declared as a PDF: the sniffed kind contradicts the "
        "declared one, so it is refused as a type mismatch.",
    ),
)
"""Files the guard must omit, each with the reason it should give."""

QUESTIONS: tuple[SampleQuestion, ...] = (
    SampleQuestion(
        "What is the nightly hotel cap in high-cost cities such as London or Oslo?",
        "EUR 230",
        "travel-policy.pdf",
    ),
    SampleQuestion(
        "What mileage rate is paid for business trips in a private car?",
        "EUR 0.32 per kilometre",
        "travel-policy.pdf",
    ),
    SampleQuestion(
        "Which extension do I call to report a lost corporate card?",
        "extension 4410",
        "travel-policy.pdf",
    ),
    SampleQuestion(
        "How long is warehouse CCTV footage kept before it is overwritten?",
        "31 days",
        "data-retention.docx",
    ),
    SampleQuestion(
        "Who issues a litigation hold?",
        "Renata Duarte",
        "data-retention.docx",
    ),
    SampleQuestion(
        "What is the unit price in euros of the handheld barcode scanner?",
        "1475",
        "equipment-prices.xlsx",
    ),
    SampleQuestion(
        "Which supplier provides the thermal label printer?",
        "Quayside Instruments",
        "equipment-prices.xlsx",
    ),
    SampleQuestion(
        "Within how many hours must a notifiable personal data breach reach the regulator?",
        "72 hours",
        "handbook.html",
    ),
    SampleQuestion(
        "Where should suspicious e-mails be forwarded?",
        "phish@northwindharbor.example",
        "handbook.html",
    ),
    SampleQuestion(
        "How much money did the board put into the Harbor Green Fund?",
        "EUR 250,000",
        "policy-change.eml",
    ),
    SampleQuestion(
        "By what vote did the board adopt the Sustainable Travel Rule?",
        "7 to 1",
        "policy-change.eml",
    ),
    SampleQuestion(
        "Who should questions about the holiday closures notice go to?",
        "Agnes Moreau",
        "office-notice.png",
    ),
    SampleQuestion(
        "By when must staff request a building pass for the winter shutdown?",
        "5 December",
        "office-notice.png",
    ),
    SampleQuestion(
        "For how many working days a year may an employee work from abroad?",
        "20 working days",
        "remote-work.md",
    ),
    SampleQuestion(
        "How much is the monthly internet stipend for remote workers?",
        "EUR 30",
        "remote-work.md",
    ),
)
"""Questions with short verbatim answers, spread over every good document."""


def document(name: str) -> SourceDocument:
    """Return the document called `name`.

    Raises:
        KeyError: no good document has that file name.

    Examples:
        >>> document("remote-work.md").kind
        'md'
    """
    for doc in DOCUMENTS:
        if doc.name == name:
            return doc
    raise KeyError(name)
