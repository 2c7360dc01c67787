"""Runner-link frames of spec 12 ("Runner link"), shared by the hub and the runner.

One JSON object per WebSocket text frame, each with ``type``. A message whose JSON is
over 256 KiB (a big reply, an artifact in a call) travels as ordered ``chunk`` frames
carrying base64 pieces of that JSON, so no frame is over 1 MiB and heartbeats (and other
calls' frames) keep flowing between the pieces. Both sides parse with
:func:`parse_frame` and put chunks back together with a :class:`Reassembler`, which
refuses anything out of order or oversized instead of guessing.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from mmo_kernel.project_tools.envelope import is_envelope

PROTOCOL: Literal[1] = 1
CHUNK_THRESHOLD_BYTES = 256 * 1024
"""A message whose JSON is longer than this travels as chunk frames."""
CHUNK_DATA_BYTES = 512 * 1024
"""Raw bytes per chunk: base64 makes ~683 KiB, well under the frame limit."""
MAX_FRAME_BYTES = 1024 * 1024
"""No frame, in either direction, is longer than this (UTF-8 bytes)."""
MAX_MESSAGE_BYTES = 384 * 1024 * 1024
"""A reassembled message's bound: a 256 MiB artifact as base64 inside its JSON fits."""
HEARTBEAT_SECS = 15
SILENT_INTERVALS = 3
"""A link that sent nothing for this many heartbeat intervals is dropped."""
RUNNER_WS_PATH = "/api/runners/ws"

CLOSE_PROTOCOL_ERROR = 1002
CLOSE_TOO_BIG = 1009
CLOSE_REVOKED = 4401
CLOSE_WRONG_IDENTITY = 4403
CLOSE_HEARTBEAT_TIMEOUT = 4408
CLOSE_REPLACED = 4409

_ID = r"^[a-z0-9][a-z0-9_-]{0,63}$"
_USERNAME = r"^[a-z0-9][a-z0-9._-]{0,63}$"


class LinkProtocolError(ValueError):
    """A frame or chunk sequence that breaks the link protocol; the message is one line."""


class _Frame(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProjectInfo(BaseModel):
    """A registered project as the server sees it: never its path."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(pattern=_ID)
    name: str
    description: str = ""
    vcs: Literal["git", "none"]


class Hello(_Frame):
    type: Literal["hello"] = "hello"
    protocol: Literal[1] = PROTOCOL
    client_id: str = Field(pattern=_ID)
    owner: str = Field(pattern=_USERNAME)
    version: str
    projects: list[ProjectInfo]
    live_job_ids: list[str] = Field(default_factory=list)


class Welcome(_Frame):
    type: Literal["welcome"] = "welcome"
    heartbeat_secs: int | float = Field(gt=0)


class Ping(_Frame):
    type: Literal["ping"] = "ping"


class Pong(_Frame):
    type: Literal["pong"] = "pong"


class Call(_Frame):
    type: Literal["call"] = "call"
    call_id: str = Field(min_length=1)
    tool: str = Field(min_length=1)
    arguments: dict[str, Any]
    user: str
    session: str | None = None
    deadline_unix_ms: int


class Reply(_Frame):
    type: Literal["reply"] = "reply"
    call_id: str = Field(min_length=1)
    envelope: dict[str, Any]

    @field_validator("envelope")
    @classmethod
    def _is_envelope(cls, value: dict[str, Any]) -> dict[str, Any]:
        if not is_envelope(value):
            raise ValueError("not a tool-result envelope")
        return value


class Chunk(_Frame):
    type: Literal["chunk"] = "chunk"
    call_id: str = Field(min_length=1)
    seq: int = Field(ge=0)
    data_b64: str
    final: bool


class Projects(_Frame):
    type: Literal["projects"] = "projects"
    projects: list[ProjectInfo]


class JobEvent(BaseModel):
    """``{"type": "job_event", "job_id", "status", ...}``: more fields travel as they are."""

    model_config = ConfigDict(extra="allow")
    type: Literal["job_event"] = "job_event"
    job_id: str = Field(min_length=1)
    status: str = Field(min_length=1)


Frame = Annotated[
    Hello | Welcome | Ping | Pong | Call | Reply | Chunk | Projects | JobEvent,
    Field(discriminator="type"),
]
_FRAME = TypeAdapter(Frame)


def _describe(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"][1:]) or "frame"
    return f"{where}: {first['msg']}"


def parse_frame(text: str | bytes) -> Frame:
    """The frame in one WebSocket message; :class:`LinkProtocolError` when it is not one."""
    if isinstance(text, bytes):
        raise LinkProtocolError("binary frames are not part of the runner link")
    if len(text.encode("utf-8")) > MAX_FRAME_BYTES:
        raise LinkProtocolError(f"frame over {MAX_FRAME_BYTES} bytes")
    return _parse_json(text)


def _parse_json(text: str) -> Frame:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise LinkProtocolError(f"frame is not JSON: {exc}") from None
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise LinkProtocolError("frame is not a JSON object with a string type")
    try:
        return _FRAME.validate_python(value)
    except ValidationError as exc:
        raise LinkProtocolError(f"invalid {value['type']} frame: {_describe(exc)}") from None


def dump_frame(message: BaseModel | dict[str, Any]) -> str:
    """Compact JSON text of one frame."""
    value = message.model_dump(mode="json") if isinstance(message, BaseModel) else message
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def encode_frames(message: BaseModel | dict[str, Any]) -> list[str]:
    """The frames that carry ``message``: itself, or ordered chunks when over 256 KiB.

    Only messages with a ``call_id`` (``call``, ``reply``) may be that large.
    """
    text = dump_frame(message)
    data = text.encode("utf-8")
    if len(data) <= CHUNK_THRESHOLD_BYTES:
        return [text]
    value = message.model_dump() if isinstance(message, BaseModel) else message
    call_id = value.get("call_id")
    if not isinstance(call_id, str) or not call_id:
        raise LinkProtocolError(f"a {value.get('type')} frame over {CHUNK_THRESHOLD_BYTES} "
                                "bytes cannot be chunked (no call_id)")
    if len(data) > MAX_MESSAGE_BYTES:
        raise LinkProtocolError(f"message for call {call_id} over {MAX_MESSAGE_BYTES} bytes")
    pieces = range(0, len(data), CHUNK_DATA_BYTES)
    last = len(pieces) - 1
    return [dump_frame(Chunk(call_id=call_id, seq=seq,
                             data_b64=base64.b64encode(data[start:start + CHUNK_DATA_BYTES])
                             .decode("ascii"), final=seq == last))
            for seq, start in enumerate(pieces)]


class Reassembler:
    """Puts chunked messages back together, per ``call_id``, refusing any doubt.

    A chunk out of order, undecodable, or growing a message past ``max_message_bytes``
    raises :class:`LinkProtocolError` and forgets that call's pieces; the final chunk
    yields the parsed frame, whose ``call_id`` must be the chunks' own.
    """

    def __init__(self, max_message_bytes: int = MAX_MESSAGE_BYTES) -> None:
        self.max_message_bytes = max_message_bytes
        self._partial: dict[str, bytearray] = {}
        self._next_seq: dict[str, int] = {}

    @property
    def pending_calls(self) -> list[str]:
        """Calls with pieces buffered but no final chunk yet."""
        return list(self._partial)

    def discard(self, call_id: str) -> None:
        """Forget a call's buffered pieces (its call ended another way)."""
        self._partial.pop(call_id, None)
        self._next_seq.pop(call_id, None)

    def feed(self, chunk: Chunk) -> Frame | None:
        """Add one chunk; the whole message once ``final`` arrives, else None."""
        call_id = chunk.call_id
        expected = self._next_seq.get(call_id, 0)
        if chunk.seq != expected:
            self.discard(call_id)
            raise LinkProtocolError(f"chunk {chunk.seq} of call {call_id} out of order "
                                    f"(expected {expected})")
        try:
            piece = base64.b64decode(chunk.data_b64, validate=True)
        except (binascii.Error, ValueError):
            self.discard(call_id)
            raise LinkProtocolError(f"chunk {chunk.seq} of call {call_id} is not base64") from None
        buffer = self._partial.setdefault(call_id, bytearray())
        if len(buffer) + len(piece) > self.max_message_bytes:
            self.discard(call_id)
            raise LinkProtocolError(f"chunked message of call {call_id} over "
                                    f"{self.max_message_bytes} bytes")
        buffer += piece
        self._next_seq[call_id] = expected + 1
        if not chunk.final:
            return None
        data = bytes(buffer)
        self.discard(call_id)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise LinkProtocolError(f"chunked message of call {call_id} is not UTF-8") from None
        frame = _parse_json(text)
        if not isinstance(frame, Call | Reply) or frame.call_id != call_id:
            raise LinkProtocolError(f"chunked message of call {call_id} is not that call's "
                                    "call or reply")
        return frame
