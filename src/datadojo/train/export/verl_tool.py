"""A verl multi-turn tool that runs the agent's code in a DataDojo sandbox, one sandbox per trajectory.

How verl drives a tool (``ToolAgentLoop._call_tool``, verl 0.6–0.9): for *every* tool call it calls
``create(create_kwargs=...)`` with the ``create_kwargs`` the parquet row carries in
``extra_info.tools_kwargs.python``, then ``execute(instance_id, arguments, agent_data=...)``, then
``release(instance_id)``. An instance therefore lives for one call, not one trajectory, so the sandbox is
not tied to the instance: it belongs to the *trajectory*, keyed by ``agent_data.request_id`` (the object verl
passes to ``execute``), started at the trajectory's first call with the task's data files, reused by every
later call (Python keeps its variables between calls) and closed when verl drops the trajectory's
``agent_data`` (a ``weakref.finalize`` on it), by :meth:`DataDojoSandboxTool.end_trajectory`, or — as a
bound on live worker processes — when more than ``max_live_trajectories`` are open (least recently used
first). Without ``agent_data`` (verl < 0.6, or a direct caller) the instance *is* the trajectory and
``release`` closes its sandbox, the older life cycle.

``execute`` runs one cell (Python, or read-only SQL against the task's SQLite file) and returns its printed
output. The reward comes at the end of the trajectory from :mod:`datadojo.train.export.verl_reward`, so
``calc_reward`` is 0.

The class subclasses ``verl.tools.base_tool.BaseTool`` when verl is installed and speaks both the current
interface (``create`` → ``(instance_id, ToolResponse)``, ``execute`` → ``(ToolResponse, reward, metrics)``)
and the older one (plain strings); without verl it runs standalone (the unit tests call it that way; the
engine tests in ``tests/engines/test_verl.py`` drive it through verl's own ``ToolAgentLoop._call_tool``).
Configure it in verl with the tool config file ``datadojo export verl`` writes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4

from datadojo.protocol.code import extract_code
from datadojo.types import DataFile

__all__ = ["DEFAULT_MAX_LIVE_TRAJECTORIES", "TOOL_NAME", "TOOL_SCHEMA", "DataDojoSandboxTool"]

log = logging.getLogger(__name__)

TOOL_NAME = "python"

#: Open trajectory sandboxes (one worker process each) a tool object keeps before closing the oldest.
DEFAULT_MAX_LIVE_TRAJECTORIES = 512

#: The OpenAI function schema the model sees (also written into the verl tool config).
TOOL_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": (
            "Run code in the data sandbox and return what it prints (or the error). Python keeps its variables "
            "between calls; SQL runs read-only against the task's SQLite database."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "The code to run."},
                "language": {
                    "type": "string",
                    "description": "python (default) or sql",
                    "enum": ["python", "sql"],
                },
            },
            "required": ["code"],
        },
    },
}

try:  # pragma: no cover - depends on whether verl is installed
    from verl.tools.base_tool import BaseTool as _Base

    try:
        from verl.tools.schemas import ToolResponse as _ToolResponse
    except ImportError:
        _ToolResponse = None
    HAVE_VERL = True
except ImportError:
    HAVE_VERL = False
    _ToolResponse = None

    class _Base:  # type: ignore[no-redef]
        """Stand-in for verl's BaseTool: stores the config and the schema's function name."""

        def __init__(self, config: dict, tool_schema: Any) -> None:
            self.config = config
            self.tool_schema = tool_schema
            fn = tool_schema["function"] if isinstance(tool_schema, dict) else tool_schema.function
            self.name = fn["name"] if isinstance(fn, dict) else fn.name

        def get_openai_tool_schema(self) -> Any:
            return self.tool_schema


def _response(text: str) -> Any:
    return _ToolResponse(text=text) if _ToolResponse is not None else text


def _trajectory_key(agent_data: Any) -> str | None:
    """The trajectory an ``execute`` call belongs to: verl's ``agent_data.request_id`` (or the object itself)."""
    if agent_data is None:
        return None
    request_id = getattr(agent_data, "request_id", None)
    return f"request:{request_id}" if request_id else f"object:{id(agent_data)}"


@dataclass
class _Trajectory:
    """One trajectory's sandbox, its SQLite files and the lock that keeps its calls in order."""

    sandbox: Any
    dbs: list[str]
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    owner: str | None = None  # the instance id whose release closes it (the pre-0.6 life cycle)


class DataDojoSandboxTool(_Base):  # type: ignore[misc, valid-type]
    """verl ``BaseTool`` over :class:`datadojo.sandbox.Sandbox`, one sandbox per trajectory (module docstring).

    ``config`` keys (all optional): ``sandbox`` — a dict of :class:`~datadojo.sandbox.SandboxConfig` fields
    (e.g. ``{"mode": "persistent"}``); ``max_output_chars`` — cut longer outputs (default: the sandbox's own
    observation limit); ``max_live_trajectories`` — open sandboxes kept at once (default
    :data:`DEFAULT_MAX_LIVE_TRAJECTORIES`; the least recently used is closed beyond it).
    """

    def __init__(self, config: dict | None = None, tool_schema: Any = None) -> None:
        schema = tool_schema if tool_schema is not None else TOOL_SCHEMA
        if HAVE_VERL and isinstance(schema, dict):  # verl's BaseTool reads schema.function.name
            from verl.tools.schemas import OpenAIFunctionToolSchema

            schema = OpenAIFunctionToolSchema.model_validate(schema)
        super().__init__(config or {}, schema)
        self._instances: dict[str, list[DataFile]] = {}
        self._trajectories: OrderedDict[str, _Trajectory] = OrderedDict()
        self._starting: dict[str, asyncio.Future[_Trajectory]] = {}
        self._closing: set[asyncio.Task[None]] = set()

    def _sandbox_config(self) -> Any:
        from datadojo.sandbox import SandboxConfig

        return SandboxConfig(**dict(self.config.get("sandbox", {})))

    @property
    def live_trajectories(self) -> list[str]:
        """Keys of the trajectories whose sandbox is open (oldest use first)."""
        return list(self._trajectories)

    async def create(
        self,
        instance_id: str | None = None,
        create_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        """Record the task's data files for one instance (``create_kwargs["files_json"]``: DataFile records).

        verl 0.6–0.9 pass ``create_kwargs={...}``; older verl passed the same keys as keyword arguments,
        which are accepted too. No sandbox starts here: the trajectory's sandbox starts at its first call.
        """
        instance_id = instance_id or str(uuid4())
        merged = {**kwargs, **(create_kwargs or {})}
        files_json, files = merged.get("files_json"), merged.get("files")
        try:
            specs = json.loads(files_json) if files_json else (files or [])
            if not isinstance(specs, list):
                raise ValueError(f"expected a list of data-file records, got {type(specs).__name__}")
            data_files = [DataFile.model_validate(f) for f in specs]
        except ValueError as exc:
            raise ValueError(
                f"tool instance {instance_id}: bad data-file record in files_json: {exc}"
            ) from None
        self._instances[instance_id] = data_files
        return (instance_id, _response("")) if _ToolResponse is not None else instance_id

    async def _trajectory(self, key: str, files: list[DataFile], owner: str | None) -> _Trajectory:
        """The trajectory's sandbox, started (once, even under concurrent calls) with ``files``."""
        traj = self._trajectories.get(key)
        if traj is not None:
            self._trajectories.move_to_end(key)
            return traj
        pending = self._starting.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        from datadojo.sandbox import Sandbox

        future: asyncio.Future[_Trajectory] = asyncio.get_running_loop().create_future()
        self._starting[key] = future
        try:
            sandbox = await Sandbox.create(files, self._sandbox_config())
            traj = _Trajectory(sandbox, [f.visible_name for f in files if f.kind == "sqlite"], owner=owner)
            self._trajectories[key] = traj
            future.set_result(traj)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: a failure with no concurrent waiter is not "never retrieved"
            raise
        finally:
            self._starting.pop(key, None)
        await self._evict()
        return traj

    async def _evict(self) -> None:
        limit = self.config.get("max_live_trajectories", DEFAULT_MAX_LIVE_TRAJECTORIES)
        while isinstance(limit, int) and 0 < limit < len(self._trajectories):
            key = next(iter(self._trajectories))
            log.warning(
                "closing the sandbox of trajectory %s: more than %d trajectories are open", key, limit
            )
            await self.end_trajectory(key)

    def _watch(self, agent_data: Any, key: str) -> None:
        """Close the trajectory's sandbox when verl drops its ``agent_data`` (the trajectory has ended)."""
        loop = asyncio.get_running_loop()
        this = weakref.ref(self)

        def ended() -> None:
            tool = this()
            if tool is None or loop.is_closed():
                return
            loop.call_soon_threadsafe(tool._end_soon, key)

        try:
            weakref.finalize(agent_data, ended)
        except TypeError:  # not weak-referenceable: the LRU bound and end_trajectory still close it
            pass

    def _end_soon(self, key: str) -> None:
        task = asyncio.ensure_future(self.end_trajectory(key))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def execute(
        self, instance_id: str, parameters: dict[str, Any] | str, agent_data: Any = None, **kwargs: Any
    ) -> tuple[Any, float, dict]:
        """Run one cell in the trajectory's sandbox; ``(output, 0.0, {"status": ...})``.

        The output is verl's ``ToolResponse`` when verl is installed. ``agent_data`` (verl ≥ 0.6) names the
        trajectory; without it the instance is the trajectory.
        """
        files = self._instances.get(instance_id)
        if files is None:
            raise KeyError(f"no tool instance {instance_id!r} (create it first, or it was released)")
        if isinstance(parameters, str):
            try:
                parameters = json.loads(parameters)
            except json.JSONDecodeError:
                parameters = {}
        if not isinstance(parameters, dict):
            parameters = {}
        code = parameters.get("code")
        if not isinstance(code, str) or not code.strip():
            return (
                _response("Error: the tool needs a non-empty 'code' argument."),
                0.0,
                {"status": "feedback"},
            )
        language = parameters.get("language")
        extracted = extract_code(
            code,
            tag=TOOL_NAME,
            allowed=("python", "sql"),
            default_language=language or "python",
            strict=False,
        )
        if extracted.errors:
            return _response("Error: " + "; ".join(extracted.errors)), 0.0, {"status": "feedback"}
        key = _trajectory_key(agent_data)
        fresh = key is not None and key not in self._trajectories and key not in self._starting
        traj = await self._trajectory(
            key or f"instance:{instance_id}", files, None if key is not None else instance_id
        )
        if fresh:
            self._watch(agent_data, key)  # type: ignore[arg-type]
        lang = language if language in ("python", "sql") else (extracted.language or "python")
        if lang == "sql" and not traj.dbs:
            return (
                _response("SQL needs a database and this task has none: use Python."),
                0.0,
                {"status": "feedback"},
            )
        async with traj.lock:
            result = await traj.sandbox.run(
                extracted.code, language=lang, db=traj.dbs[0] if lang == "sql" else None
            )
        text = result.output
        limit = self.config.get("max_output_chars")
        if isinstance(limit, int) and limit > 0 and len(text) > limit:
            text = text[:limit] + "\n[output truncated]"
        return _response(text), 0.0, {"status": result.status}

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        """0: the trajectory's reward is computed at the end by ``verl_reward.compute_score``."""
        return 0.0

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        """Forget the instance; close its sandbox only when the instance was its trajectory (no ``agent_data``)."""
        self._instances.pop(instance_id, None)
        key = f"instance:{instance_id}"
        if key in self._trajectories:
            await self.end_trajectory(key)

    async def end_trajectory(self, key: str) -> None:
        """Close one trajectory's sandbox (idempotent); ``key`` as in :attr:`live_trajectories`."""
        traj = self._trajectories.pop(key, None)
        if traj is not None:
            await traj.sandbox.close()

    async def wait_ended(self) -> None:
        """Wait until the sandboxes of the trajectories verl has dropped are closed (the closes run as tasks)."""
        await asyncio.sleep(0)  # a finalizer's call_soon_threadsafe callback schedules its close task
        while self._closing:
            await asyncio.gather(*list(self._closing), return_exceptions=True)

    async def close_all(self) -> None:
        """Close every open sandbox (e.g. at the end of a run or a test)."""
        for key in list(self._trajectories):
            await self.end_trajectory(key)
