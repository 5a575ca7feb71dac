"""capsa.guard.extractors.mail: limits on the parsed message, attachments handed back."""

from __future__ import annotations

from email.message import EmailMessage

import pytest

from capsa.errors import IngestionRejected
from capsa.guard import Attachment, Extracted, Omission, extract_all, extract_attachment
from capsa.guard.extractors import PlainTextExtractor, Router, UnstructuredExtractor
from capsa.guard.extractors.mail import read_mail
from capsa.guard.limits import INGESTION_LIMITS

pytestmark = pytest.mark.slow


def _mail(body: str = "The report is attached.") -> EmailMessage:
    mail = EmailMessage()
    mail["From"], mail["To"], mail["Subject"] = "a@example.com", "b@example.com", "Report"
    mail.set_content(body + "\n")
    return mail


def _router() -> Router:
    return Router([PlainTextExtractor(), UnstructuredExtractor()])


def test_read_mail_returns_attachments_in_order_with_their_bytes() -> None:
    mail = _mail()
    mail.add_attachment(b"first note", maintype="text", subtype="plain", filename="a.txt")
    mail.add_attachment(b"%PDF-1.4 not really", maintype="application", subtype="pdf",
                        filename="b.pdf")

    found = read_mail(bytes(mail)).embedded

    assert [(f.name, f.media_type, f.payload) for f in found] == [
        ("a.txt", "text/plain", b"first note"),
        ("b.pdf", "application/pdf", b"%PDF-1.4 not really")]


def test_read_mail_hands_back_an_embedded_message_whole() -> None:
    inner = _mail("Forwarded words.")
    outer = _mail()
    outer.add_attachment(inner)

    (found,) = read_mail(bytes(outer)).embedded

    assert (found.name, found.media_type) == ("Report.eml", "message/rfc822")
    assert b"Forwarded words." in found.payload


def test_read_mail_treats_message_global_as_an_embedded_message() -> None:
    payload = (b'From: a@x\nTo: b@x\nMIME-Version: 1.0\nContent-Type: multipart/mixed; '
               b'boundary="b"\n\n--b\nContent-Type: text/plain\n\nouter\n--b\n'
               b"Content-Type: message/global\n\nFrom: c@x\nSubject: Inner\n\ninner words\n"
               b"--b--\n")

    (found,) = read_mail(payload).embedded

    assert (found.name, found.media_type) == ("Inner.eml", "message/rfc822")
    assert b"inner words" in found.payload


def test_read_mail_refuses_a_pgp_mime_message_as_encrypted() -> None:
    payload = (b'From: a@x\nTo: b@x\nMIME-Version: 1.0\nContent-Type: multipart/encrypted; '
               b'protocol="application/pgp-encrypted"; boundary="b"\n\n--b\n'
               b"Content-Type: application/pgp-encrypted\n\nVersion: 1\n--b\n"
               b"Content-Type: application/octet-stream\n\n-----BEGIN PGP MESSAGE-----\nx\n"
               b"-----END PGP MESSAGE-----\n--b--\n")

    with pytest.raises(IngestionRejected) as caught:
        read_mail(payload)

    assert caught.value.reason == "encrypted"


def test_read_mail_refuses_an_inline_pgp_body_as_encrypted() -> None:
    payload = bytes(_mail("-----BEGIN PGP MESSAGE-----\n\nhQEMA\n-----END PGP MESSAGE-----"))

    with pytest.raises(IngestionRejected) as caught:
        read_mail(payload)

    assert caught.value.reason == "encrypted"


def test_read_mail_refuses_an_smime_enveloped_message_as_encrypted() -> None:
    payload = (b"From: a@x\nTo: b@x\nMIME-Version: 1.0\nContent-Type: application/pkcs7-mime;"
               b' smime-type=enveloped-data; name="smime.p7m"\n'
               b"Content-Transfer-Encoding: base64\n\nMIAGCSqGSIb3DQEHA6CAMIACAQAx\n")

    with pytest.raises(IngestionRejected) as caught:
        read_mail(payload)

    assert caught.value.reason == "encrypted"


def test_read_mail_accepts_a_signed_message() -> None:
    payload = (b'From: a@x\nTo: b@x\nMIME-Version: 1.0\nContent-Type: multipart/signed; '
               b'protocol="application/pgp-signature"; boundary="b"\n\n--b\n'
               b"Content-Type: text/plain\n\nsigned words\n--b\n"
               b"Content-Type: application/pgp-signature\n\n-----BEGIN PGP SIGNATURE-----\n"
               b"--b--\n")

    assert [f.media_type for f in read_mail(payload).embedded] == ["application/pgp-signature"]


def test_extract_attachment_extracts_each_mail_attachment_through_the_guard() -> None:
    mail = _mail()
    mail.add_attachment(b"invoice total 42", maintype="text", subtype="plain",
                        filename="../../invoice.txt")
    mail.add_attachment(b"\x89PNG\r\n\x1a\n", maintype="application", subtype="pdf",
                        filename="fake.pdf")

    item = extract_attachment(Attachment(label="mail.eml", payload=bytes(mail)), _router())

    invoice, fake = item.attachments
    assert isinstance(invoice, Extracted) and isinstance(fake, Omission)
    assert (invoice.label, invoice.parent, invoice.text) == (
        "mail.eml/invoice.txt", "mail.eml", "invoice total 42")
    assert (fake.label, fake.stage, fake.reason) == ("mail.eml/fake.pdf", "sniff",
                                                     "type_mismatch")
    assert "- invoice.txt (16 bytes, text/plain; extracted separately)" in item.text
    assert "- fake.pdf (8 bytes, application/pdf; not extracted: type_mismatch)" in item.text


def test_extract_attachment_refuses_attachments_nested_past_the_limit() -> None:
    inner = _mail("Forwarded.")
    inner.add_attachment(b"deep note", maintype="text", subtype="plain", filename="n.txt")
    outer = _mail()
    outer.add_attachment(inner)

    item = extract_attachment(Attachment(label="m.eml", payload=bytes(outer)), _router())

    (forwarded,) = item.attachments
    assert isinstance(forwarded, Extracted)
    (note,) = forwarded.attachments
    assert isinstance(note, Omission)
    assert (note.label, note.reason) == ("m.eml/Report.eml/n.txt", "nested_too_deep")
    assert "over the limit of 1 (max_nesting_depth)" in note.detail


def test_extract_all_lists_attachments_after_their_parent_under_the_set_ceiling() -> None:
    mail = _mail()
    mail.add_attachment(b"x" * 30, maintype="text", subtype="plain", filename="big.txt")
    limits = INGESTION_LIMITS.model_copy(update={"max_total_chars": 200})

    result = extract_all([Attachment(label="m.eml", payload=bytes(mail))], _router(), limits)

    assert [f.label for f in result.extracted] == ["m.eml", "m.eml/big.txt"]
    assert result.extracted[0].attachments == ()
    tight = limits.model_copy(update={"max_total_chars": len(result.extracted[0].text) + 5})
    squeezed = extract_all([Attachment(label="m.eml", payload=bytes(mail))], _router(), tight)
    assert [(o.label, o.reason) for o in squeezed.omitted] == [("m.eml/big.txt", "set_ceiling")]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le"])
def test_extract_attachment_reads_a_utf16_mail_as_a_message_not_its_source(
        encoding: str) -> None:
    payload = bytes(_mail("Wide body text.")).decode().encode(encoding)

    item = extract_attachment(Attachment(label="wide.eml", payload=payload), _router())

    assert item.kind == "eml"
    assert item.text == "Wide body text."
