"""Limits / SandboxConfig validation, ExecResult conversions and the worker's length-prefixed protocol."""

from __future__ import annotations

import asyncio
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from datadojo.sandbox import ExecResult, Limits, SandboxConfig
from datadojo.sandbox.protocol import (
    ProtocolError,
    encode_frame,
    read_frame_async,
    read_frame_fd,
    write_frame_fd,
)
from datadojo.types import Observation


def test_limits_defaults_and_validation() -> None:
    limits = Limits()
    assert limits.max_observation_chars == 2048 and limits.wall_s == 60.0
    assert limits.to_dict()["memory_mb"] == 4096
    for bad in ({"cpu_s": 0}, {"wall_s": -1}, {"wall_s": float("nan")}, {"memory_mb": 0}, {"max_procs": 1.5},
                {"max_output_bytes": True}, {"max_observation_chars": 10}):  # fmt: skip
        with pytest.raises(ValueError, match=next(iter(bad))):
            Limits(**bad)


def test_head_tail_observation_limits() -> None:
    assert Limits().observation_head_chars is None and Limits().observation_tail_chars is None
    limits = Limits(observation_head_chars=4000, observation_tail_chars=1500)
    assert limits.to_dict()["observation_tail_chars"] == 1500
    with pytest.raises(ValueError, match="set together"):
        Limits(observation_head_chars=4000)
    with pytest.raises(ValueError, match="observation_tail_chars must be a non-negative"):
        Limits(observation_head_chars=4000, observation_tail_chars=-1)
    with pytest.raises(ValueError, match="at least 64"):
        Limits(observation_head_chars=10, observation_tail_chars=10)


def test_config_validation() -> None:
    assert SandboxConfig().mode == "chunked" and SandboxConfig().auto_install is False
    with pytest.raises(ValueError, match="mode"):
        SandboxConfig(mode="jupyter")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="isolation"):
        SandboxConfig(isolation="docker")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="preload"):
        SandboxConfig(preload=("pandas; import os",))
    with pytest.raises(TypeError, match="limits"):
        SandboxConfig(limits={"wall_s": 1})  # type: ignore[arg-type]


def test_exec_result_conversions() -> None:
    ok = ExecResult.make("1\n", "ok", isolation="bwrap")
    assert ok.error is False
    obs = ok.to_observation()
    assert (
        isinstance(obs, Observation) and obs.text == "1\n" and obs.status == "ok" and obs.isolation == "bwrap"
    )
    killed = ExecResult.make("x", "killed", killed=True, truncated=True)
    assert killed.error and killed.to_observation().truncated
    data = killed.to_dict()
    assert data["observation"] == "x" and data["killed"] and data["isolation"] == "reduced"
    assert {"observation", "error", "timed_out", "killed", "isolation"} <= data.keys()
    with pytest.raises(ValueError, match="status"):
        ExecResult.make("", "weird")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.text(max_size=10), json_values, max_size=6))
def test_frames_round_trip_over_a_pipe(message: dict) -> None:
    r, w = os.pipe()
    try:
        write_frame_fd(w, message)
        os.close(w)
        w = -1
        assert read_frame_fd(r) == message
        assert read_frame_fd(r) is None  # clean EOF between frames
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


def test_truncated_and_malformed_frames_are_errors() -> None:
    frame = encode_frame({"a": 1})
    r, w = os.pipe()
    os.write(w, frame[:-2])
    os.close(w)
    with pytest.raises(ProtocolError, match="closed"):
        read_frame_fd(r)
    os.close(r)
    r, w = os.pipe()
    os.write(w, (5).to_bytes(4, "big") + b"[1,2]")
    os.close(w)
    with pytest.raises(ProtocolError, match="JSON object"):
        read_frame_fd(r)
    os.close(r)


async def test_async_reader() -> None:
    reader = asyncio.StreamReader()
    reader.feed_data(encode_frame({"op": "ready", "x": "é"}) + encode_frame({"n": 2})[:3])
    reader.feed_eof()
    assert await read_frame_async(reader) == {"op": "ready", "x": "é"}
    with pytest.raises(ProtocolError):
        await read_frame_async(reader)
