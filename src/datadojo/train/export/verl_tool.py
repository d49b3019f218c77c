"""A verl multi-turn tool that runs the agent's code in a DataDojo sandbox (one sandbox per trajectory).

verl's tool agent loop calls ``create`` when a rollout starts (with the ``create_kwargs`` the parquet row
carries in ``extra_info.tools_kwargs.python``), ``execute`` for every tool call the model makes,
``calc_reward`` and ``release`` at the end. Here ``create`` starts a :class:`datadojo.sandbox.Sandbox`
holding the task's data files, ``execute`` runs one cell (Python, or read-only SQL against the task's
SQLite file) and returns its printed output, and ``release`` closes the sandbox. The reward comes at the
end of the trajectory from :mod:`datadojo.train.export.verl_reward`, so ``calc_reward`` is 0.

The class subclasses ``verl.tools.base_tool.BaseTool`` when verl is installed and speaks both the current
interface (``create`` → ``(instance_id, ToolResponse)``, ``execute`` → ``(ToolResponse, reward, metrics)``)
and the older one (plain strings); without verl it runs standalone (the tests call it that way).
Configure it in verl with the tool config file ``datadojo export verl`` writes.
"""

from __future__ import annotations

import json
from typing import Any
from uuid import uuid4

from datadojo.protocol.code import extract_code
from datadojo.types import DataFile

__all__ = ["TOOL_NAME", "TOOL_SCHEMA", "DataDojoSandboxTool"]

TOOL_NAME = "python"

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


class DataDojoSandboxTool(_Base):  # type: ignore[misc, valid-type]
    """verl ``BaseTool`` over :class:`datadojo.sandbox.Sandbox` (module docstring).

    ``config`` keys (all optional): ``sandbox`` — a dict of :class:`~datadojo.sandbox.SandboxConfig` fields
    (e.g. ``{"mode": "persistent"}``); ``max_output_chars`` — cut longer outputs (default: the sandbox's own
    observation limit).
    """

    def __init__(self, config: dict | None = None, tool_schema: Any = None) -> None:
        super().__init__(config or {}, tool_schema if tool_schema is not None else TOOL_SCHEMA)
        self._instances: dict[str, Any] = {}
        self._dbs: dict[str, list[str]] = {}

    def _sandbox_config(self) -> Any:
        from datadojo.sandbox import SandboxConfig

        return SandboxConfig(**dict(self.config.get("sandbox", {})))

    async def create(
        self,
        instance_id: str | None = None,
        files_json: str | None = None,
        files: list[dict[str, Any]] | None = None,
        **kwargs: Any,
    ) -> Any:
        """Start a sandbox holding the task's data files (``files_json``: a JSON list of DataFile records)."""
        from datadojo.sandbox import Sandbox

        instance_id = instance_id or str(uuid4())
        specs = json.loads(files_json) if files_json else (files or [])
        try:
            data_files = [DataFile.model_validate(f) for f in specs]
        except ValueError as exc:
            raise ValueError(f"tool instance {instance_id}: bad data-file record: {exc}") from None
        self._instances[instance_id] = await Sandbox.create(data_files, self._sandbox_config())
        self._dbs[instance_id] = [f.visible_name for f in data_files if f.kind == "sqlite"]
        return (instance_id, _response("")) if _ToolResponse is not None else instance_id

    async def execute(
        self, instance_id: str, parameters: dict[str, Any] | str, **kwargs: Any
    ) -> tuple[Any, float, dict]:
        """Run one cell; returns ``(output, 0.0, {"status": ...})`` (the output as verl's ToolResponse when available)."""
        sandbox = self._instances.get(instance_id)
        if sandbox is None:
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
        lang = language if language in ("python", "sql") else (extracted.language or "python")
        dbs = self._dbs.get(instance_id, [])
        if lang == "sql" and not dbs:
            return (
                _response("SQL needs a database and this task has none: use Python."),
                0.0,
                {"status": "feedback"},
            )
        result = await sandbox.run(extracted.code, language=lang, db=dbs[0] if lang == "sql" else None)
        text = result.output
        limit = self.config.get("max_output_chars")
        if isinstance(limit, int) and limit > 0 and len(text) > limit:
            text = text[:limit] + "\n[output truncated]"
        return _response(text), 0.0, {"status": result.status}

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        """0: the trajectory's reward is computed at the end by ``verl_reward.compute_score``."""
        return 0.0

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        """Close the instance's sandbox (idempotent)."""
        sandbox = self._instances.pop(instance_id, None)
        self._dbs.pop(instance_id, None)
        if sandbox is not None:
            await sandbox.close()
