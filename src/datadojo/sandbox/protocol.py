"""Length-prefixed JSON messages between the harness and a sandbox worker (and inside the worker).

A frame is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON. Framing rather than
newline-delimited JSON because a pipe read can split or merge lines, and because the worker side must be
able to tell a truncated message (a crashed peer) from a complete one. Frames are capped so that a
misbehaving peer cannot make the harness allocate without bound.
"""

from __future__ import annotations

import asyncio
import json
import os
import struct
from typing import Any

from datadojo.errors import DataDojoError

__all__ = [
    "MAX_FRAME",
    "ProtocolError",
    "decode_frame",
    "encode_frame",
    "read_frame_async",
    "read_frame_fd",
    "write_frame_fd",
]

#: The largest message either side accepts (observations are truncated long before this).
MAX_FRAME = 64 * 1024 * 1024
_HEADER = struct.Struct(">I")
#: Bound at import: a cell runs in the process that reports its status, and a cell that replaces
#: ``json.dumps`` (a monkey-patch an agent may well try) must not silence that report (on main the cell
#: then ran into its wall-clock limit).
_ENCODE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


class ProtocolError(DataDojoError, RuntimeError):
    """The peer closed the channel mid-message or sent something that is not a framed JSON object."""


def encode_frame(message: dict[str, Any]) -> bytes:
    body = _ENCODE(message).encode("utf-8", "surrogatepass")
    if len(body) > MAX_FRAME:
        raise ProtocolError(f"message of {len(body)} bytes exceeds the {MAX_FRAME}-byte frame limit")
    return _HEADER.pack(len(body)) + body


def decode_frame(body: bytes) -> dict[str, Any]:
    try:
        message = json.loads(body.decode("utf-8", "surrogatepass"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"malformed message: {exc}") from None
    if not isinstance(message, dict):
        raise ProtocolError(f"expected a JSON object, got {type(message).__name__}")
    return message


def _read_exact_fd(fd: int, n: int) -> bytes | None:
    """Read exactly ``n`` bytes from a blocking fd; ``None`` on EOF before the first byte."""
    chunks: list[bytes] = []
    got = 0
    while got < n:
        data = os.read(fd, n - got)
        if not data:
            if got == 0:
                return None
            raise ProtocolError(f"channel closed after {got} of {n} bytes")
        chunks.append(data)
        got += len(data)
    return b"".join(chunks)


def read_frame_fd(fd: int) -> dict[str, Any] | None:
    """Read one message from a blocking fd; ``None`` when the peer closed the channel cleanly."""
    header = _read_exact_fd(fd, _HEADER.size)
    if header is None:
        return None
    (length,) = _HEADER.unpack(header)
    if length > MAX_FRAME:
        raise ProtocolError(f"frame of {length} bytes exceeds the {MAX_FRAME}-byte limit")
    body = _read_exact_fd(fd, length) if length else b""
    if body is None:
        raise ProtocolError("channel closed between a frame header and its body")
    return decode_frame(body)


def write_frame_fd(fd: int, message: dict[str, Any]) -> None:
    """Write one message to a blocking fd (looping over partial writes)."""
    view = memoryview(encode_frame(message))
    while view:
        written = os.write(fd, view)
        view = view[written:]


async def read_frame_async(reader: asyncio.StreamReader) -> dict[str, Any]:
    """Read one message from an asyncio stream; raises :class:`ProtocolError` on EOF or garbage."""
    try:
        header = await reader.readexactly(_HEADER.size)
    except asyncio.IncompleteReadError as exc:
        raise ProtocolError("the worker closed its channel") from exc
    (length,) = _HEADER.unpack(header)
    if length > MAX_FRAME:
        raise ProtocolError(f"frame of {length} bytes exceeds the {MAX_FRAME}-byte limit")
    try:
        body = await reader.readexactly(length)
    except asyncio.IncompleteReadError as exc:
        raise ProtocolError("the worker closed its channel mid-message") from exc
    return decode_frame(body)
