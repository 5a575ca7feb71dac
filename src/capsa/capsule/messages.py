"""Neutral records for a conversation: messages, their parts, and the evidence they carry.

The capsule core never sees a framework's message class. Adapters translate
LangChain or LlamaIndex messages into these records, call the core, and translate
the result back; a record the core did not change comes back as the very same
object, so an adapter can hand its original message through untouched.

Every record is a frozen pydantic model, so sharing one between the input and
the output of `compact` is safe: nothing downstream can change it in place.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CitationRef",
    "Evidence",
    "ImagePart",
    "Message",
    "OtherPart",
    "Part",
    "Role",
    "TextPart",
    "ToolCall",
]

_CONFIG = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

Role = Literal["system", "user", "assistant", "tool"]
"""Who a message is from: the host's instructions, the user, the model, or a tool."""


class Evidence(BaseModel):
    """One retrieved chunk, as an evidence tool returned it to the model.

    Examples:
        >>> Evidence(chunk_id="c1", content="Hotels: EUR 230 a night.", document_id="travel")
        Evidence(chunk_id='c1', content='Hotels: EUR 230 a night.', document_id='travel', \
title=None, uri=None, collection=None, picture_refs=(), page=None)
    """

    model_config = _CONFIG

    chunk_id: str = Field(min_length=1)
    """The chunk's identifier; the id the model cites."""
    content: str
    """The exact text the model was shown for this chunk."""
    document_id: str
    """The document the chunk belongs to; pictures are addressed within it."""
    title: str | None = None
    """The document's human title, used to name the source in the capsule."""
    uri: str | None = None
    """Where the document lives (path or URL); shown only when it differs from the title."""
    collection: str | None = None
    """The index or collection the chunk came from, when the host searches several."""
    picture_refs: tuple[str, ...] = ()
    """References of pictures inside the document that this chunk covers (``#/pictures/0``)."""
    page: str | None = None
    """The page of the document the chunk is on (``"12"``), shown beside its source so
    an answer can cite it; None when the document has no pages or did not say."""


class CitationRef(BaseModel):
    """A citation as a framework reported it, before it is matched to a chunk.

    A cite tool reports chunk ids; a model with native citations reports the quoted
    text and the source's url or title. `capsa.capsule.resolve_citations` matches
    either kind against the evidence the model could see.
    """

    model_config = _CONFIG

    chunk_id: str | None = None
    """The cited chunk's id, when the reporter knew it."""
    cited_text: str | None = None
    """The span of source text the answer rests on (native citation annotations)."""
    url: str | None = None
    """The cited source's url, compared with `Evidence.uri`."""
    title: str | None = None
    """The cited source's title, compared with `Evidence.title`."""


class TextPart(BaseModel):
    """Text inside a message."""

    model_config = _CONFIG

    type: Literal["text"] = "text"
    text: str
    """The text itself."""


class ImagePart(BaseModel):
    """A picture inside a message, inline as base64 or by url."""

    model_config = _CONFIG

    type: Literal["image"] = "image"
    base64: str | None = None
    """The picture's bytes, base64-encoded; None when it is given by url."""
    url: str | None = None
    """Where the picture can be fetched; None when it is inline."""
    mime_type: str | None = None
    """The picture's media type (``image/png``), when known."""


class OtherPart(BaseModel):
    """A content block the core does not interpret (a file, audio, reasoning, ...).

    Compaction never rewrites a message that holds one, except a return of an
    evidence tool, whose content is replaced whole.
    """

    model_config = _CONFIG

    type: Literal["other"] = "other"
    kind: str
    """The framework's name for the block type, for diagnostics."""


Part = Annotated[TextPart | ImagePart | OtherPart, Field(discriminator="type")]
"""Any part of a message's content."""


class ToolCall(BaseModel):
    """A tool call the model made; its return arrives as a ``tool`` message with the same id."""

    model_config = _CONFIG

    id: str
    """The call's id, repeated by the tool message that returns its result."""
    name: str
    """The called tool's name."""
    args: dict[str, Any] = Field(default_factory=dict)
    """The arguments the model passed."""


class Message(BaseModel):
    """One message of a conversation in framework-neutral form.

    Examples:
        >>> m = Message(role="tool", parts=(TextPart(text="[c1] ..."),),
        ...             tool_call_id="call-1", tool_name="search")
        >>> m.text
        '[c1] ...'
    """

    model_config = _CONFIG

    role: Role
    """Who the message is from."""
    parts: tuple[Part, ...] = ()
    """The message's content, in order."""
    tool_calls: tuple[ToolCall, ...] = ()
    """Tool calls an assistant message makes."""
    tool_call_id: str | None = None
    """For a tool message: the id of the call it answers."""
    tool_name: str | None = None
    """For a tool message: the tool's name; when None it is looked up from the call."""
    evidence: tuple[Evidence, ...] | None = None
    """For an evidence tool's return: the chunks it returned; None when not known."""
    citations: tuple[CitationRef, ...] = ()
    """Citations this message declares (a cite tool's acknowledgement, native annotations)."""
    key: str | None = None
    """The host's handle for the message, carried through compaction unchanged so an
    adapter can map results back to its own objects; None on messages compaction adds."""

    @property
    def text(self) -> str:
        """The message's text parts, joined by newlines."""
        return "\n".join(part.text for part in self.parts if isinstance(part, TextPart))
