from __future__ import annotations

import pytest
from pydantic import ValidationError

from capsa.capsule import Evidence, ImagePart, Message, OtherPart, TextPart


def test_message_text_joins_text_parts_only():
    message = Message(
        role="user",
        parts=(TextPart(text="one"), ImagePart(url="http://x/p.png"), TextPart(text="two")),
    )
    assert message.text == "one\ntwo"


def test_message_is_frozen():
    message = Message(role="user", parts=(TextPart(text="hi"),))
    with pytest.raises(ValidationError):
        message.role = "assistant"  # type: ignore[misc]


def test_message_rejects_unknown_fields_and_roles():
    with pytest.raises(ValidationError):
        Message(role="user", colour="red")  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        Message(role="robot")  # type: ignore[arg-type]


def test_message_parts_are_chosen_by_type_from_plain_data():
    message = Message.model_validate(
        {
            "role": "user",
            "parts": [
                {"type": "text", "text": "hi"},
                {"type": "image", "url": "http://x/p.png"},
                {"type": "other", "kind": "file"},
            ],
        }
    )
    assert [type(p) for p in message.parts] == [TextPart, ImagePart, OtherPart]


def test_evidence_requires_a_chunk_id():
    with pytest.raises(ValidationError):
        Evidence(chunk_id="", content="x", document_id="d")
