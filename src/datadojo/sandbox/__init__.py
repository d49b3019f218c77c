"""Isolated execution of agent code: per-trajectory workspaces, a pre-warmed worker, an async API and a pool.

Public names (imported lazily, so that the worker process inside the sandbox does not pay for the
harness-side modules)::

    Sandbox, SandboxPool, SandboxError, run_cells      async API and the sync helper
    SandboxConfig, Limits                              configuration
    ExecResult                                         what one execution produced
    PolicyConfig, PolicyViolation, check_code          the static policy

See ``docs/sandbox.md`` for the isolation model, the limits and benchmark figures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from datadojo.lazy import lazy_exports

if TYPE_CHECKING:
    from datadojo.sandbox.config import Limits, SandboxConfig
    from datadojo.sandbox.policy import PolicyConfig, PolicyViolation, check_code
    from datadojo.sandbox.pool import SandboxPool
    from datadojo.sandbox.result import ExecResult
    from datadojo.sandbox.session import Sandbox, SandboxError, run_cells

__all__ = [
    "ExecResult",
    "Limits",
    "PolicyConfig",
    "PolicyViolation",
    "Sandbox",
    "SandboxConfig",
    "SandboxError",
    "SandboxPool",
    "check_code",
    "run_cells",
]

_WHERE = {
    "ExecResult": "result",
    "Limits": "config",
    "SandboxConfig": "config",
    "PolicyConfig": "policy",
    "PolicyViolation": "policy",
    "check_code": "policy",
    "Sandbox": "session",
    "SandboxError": "session",
    "run_cells": "session",
    "SandboxPool": "pool",
}


__getattr__, __dir__ = lazy_exports("datadojo.sandbox", _WHERE, globals())
