"""From what supervision saw (:class:`.supervisor.CellOutcome`) to the ``result`` frame the harness gets.

The verdict is the first rule of :data:`_RULES` that applies — a limit the worker enforced (wall clock,
CPU, output, processes), then the status the code reported, then how the process ended — and each rule
names the note the model reads (``[timeout: …]``, ``[memory limit: …]``). The output is decoded, cut to
the observation budget, and the notes follow it.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from datadojo.sandbox.cells import (
    Part,
    decode_output,
    render_parts,
    truncate_head_tail_parts,
    truncate_observation_parts,
)
from datadojo.sandbox.worker.supervisor import CellOutcome

__all__ = ["build_reply"]


@dataclass(frozen=True)
class _Verdict:
    result: str  # "ok" | "error" | "timeout" | "killed"
    note: str | None = None
    timed_out: bool = False
    killed: bool = False
    truncated: bool = False
    missing: str | None = None


#: A rule: ``(outcome, reported status or None, limits) -> verdict``, or ``None`` when it does not apply.
_Rule = Callable[[CellOutcome, "dict[str, Any] | None", "dict[str, Any]"], "_Verdict | None"]


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _killed_by(outcome: CellOutcome) -> int | None:
    """The signal that ended the process, if one did."""
    ws = outcome.wait_status
    return os.WTERMSIG(ws) if ws is not None and os.WIFSIGNALED(ws) else None


def _wall(outcome: CellOutcome, status: dict[str, Any] | None, lim: dict[str, Any]) -> _Verdict | None:
    if outcome.reason != "wall":
        return None
    note = f"[timeout: the cell ran longer than the wall-clock limit of {lim['wall_s']:g} s and was stopped]"
    return _Verdict("timeout", note, timed_out=True)


def _cpu(outcome: CellOutcome, status: dict[str, Any] | None, lim: dict[str, Any]) -> _Verdict | None:
    if outcome.reason != "cpu" and _killed_by(outcome) != signal.SIGXCPU:
        return None
    note = f"[timeout: the cell used more than its CPU limit of {lim['cpu_s']:g} s and was stopped]"
    return _Verdict("timeout", note, timed_out=True)


def _output(outcome: CellOutcome, status: dict[str, Any] | None, lim: dict[str, Any]) -> _Verdict | None:
    if outcome.reason != "output":
        return None
    note = f"[output limit: the cell wrote more than {lim['max_output_bytes']} bytes and was stopped]"
    return _Verdict("killed", note, killed=True, truncated=True)


def _procs(outcome: CellOutcome, status: dict[str, Any] | None, lim: dict[str, Any]) -> _Verdict | None:
    if outcome.reason != "procs":
        return None
    note = f"[process limit: the cell started more than {lim['max_procs']} processes and was stopped]"
    return _Verdict("killed", note, killed=True)


def _reported(outcome: CellOutcome, status: dict[str, Any] | None, lim: dict[str, Any]) -> _Verdict | None:
    if status is None:
        return None
    if status.get("ok"):
        return _Verdict("ok")
    if status.get("exc") == "MemoryError":
        note = f"[memory limit: the cell ran out of its {lim['memory_mb']} MB address space]"
        return _Verdict("killed", note, killed=True)
    return _Verdict("error", missing=status.get("missing"))


def _signalled(outcome: CellOutcome, status: dict[str, Any] | None, lim: dict[str, Any]) -> _Verdict | None:
    sig = _killed_by(outcome)
    if sig is None:
        return None
    if sig == signal.SIGKILL:
        note = "[killed: the process was killed (SIGKILL), e.g. for running out of memory]"
    elif sig == signal.SIGXFSZ:
        note = f"[file size limit: the cell wrote a file larger than {lim['max_file_mb']} MB]"
    else:
        note = f"[killed: the process died from {_signal_name(sig)}]"
    return _Verdict("killed", note, killed=True)


def _exited_early(
    outcome: CellOutcome, status: dict[str, Any] | None, lim: dict[str, Any]
) -> _Verdict | None:
    ws = outcome.wait_status
    if ws is None or not os.WIFEXITED(ws):
        return None
    note = f"[the process exited with status {os.WEXITSTATUS(ws)} before the cell finished (os._exit?)]"
    return _Verdict("error", note)


def _vanished(outcome: CellOutcome, status: dict[str, Any] | None, lim: dict[str, Any]) -> _Verdict:
    return _Verdict("killed", "[killed: the process ended without reporting a result]", killed=True)


#: In this order; the last always applies.
_RULES: tuple[_Rule, ...] = (_wall, _cpu, _output, _procs, _reported, _signalled, _exited_early, _vanished)

_RESTARTED = "[the interpreter was restarted: variables and imports from earlier cells are lost]"


def _verdict(outcome: CellOutcome, status: dict[str, Any] | None, lim: dict[str, Any]) -> _Verdict:
    for rule in _RULES:
        verdict = rule(outcome, status, lim)
        if verdict is not None:
            return verdict
    raise AssertionError("the last rule always applies")  # pragma: no cover


def build_reply(
    outcome: CellOutcome, *, limits: dict[str, Any], restarted: bool, persistent: bool
) -> dict[str, Any]:
    """The ``result`` frame for ``outcome``: status, observation text with its notes, flags, duration.

    ``restarted`` with ``persistent``: the kernel was replaced, so the observation says its state is lost.
    """
    lim = limits
    status = outcome.status if isinstance(outcome.status, dict) else None
    verdict = _verdict(outcome, status, lim)
    notes = [verdict.note] if verdict.note is not None else []
    if restarted and persistent:
        notes.append(_RESTARTED)
    raw = bytes(outcome.output[: lim["max_output_bytes"]])
    text = decode_output(raw)
    note_text = "\n".join(notes)
    parts: list[Part] = []
    replay_note = status.get("replay_note") if status else None
    if isinstance(replay_note, str) and replay_note:
        parts.append(("harness", replay_note))  # said before the cell's own output, as it ran first
    if lim.get("observation_head_chars") is not None:
        body, cut = truncate_head_tail_parts(
            text, int(lim["observation_head_chars"]), int(lim["observation_tail_chars"])
        )
    else:
        budget = int(lim["max_observation_chars"]) - (len(note_text) + 1 if notes else 0)
        body, cut = truncate_observation_parts(text, max(budget, 64))
    parts += [p for p in body if p[1]]
    if notes:
        ends_open = bool(parts) and not parts[-1][1].endswith("\n")
        parts.append(("harness", ("\n" if ends_open else "") + note_text))
    return {
        "op": "result",
        "status": verdict.result,
        # what the model reads (cell parts escaped, see cells.render_parts) and where each piece came from
        "output": render_parts(parts),
        "parts": [list(p) for p in parts],
        "truncated": verdict.truncated or cut,
        "timed_out": verdict.timed_out,
        "killed": verdict.killed,
        "restarted": restarted,
        "missing_module": verdict.missing,
        "replay_failed": list(status.get("replay_failed", [])) if status else [],
        "duration_s": outcome.duration_s,
    }
