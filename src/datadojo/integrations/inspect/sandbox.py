"""DataDojo's confined sandbox as an inspect_ai sandbox environment (``sandbox="datadojo"``).

One DataDojo :class:`~datadojo.sandbox.Sandbox` per sample: ``sample_init`` starts it with the task's data
files (from the sample's metadata, :mod:`datadojo.integrations.inspect.samples`) and the
:class:`~datadojo.sandbox.SandboxConfig` given as the sandbox's config; ``sample_cleanup`` closes it.

What inspect's interface maps to:

* ``exec(["python3", "-c", CODE])``, ``exec(["python3"], input=CODE)`` (inspect's ``python()`` tool) run
  ``CODE`` as a cell of the sandbox's interpreter — the same confinement, limits and policy as the agent's
  cells, and the same state: in ``persistent`` mode variables live on between calls, in ``chunked`` mode the
  successful cells are replayed before the next one (DataMind §4). ``exec(["sqlite3", DB, SQL])`` runs one
  SQL statement. Any other command is answered with exit code 127 and a message saying what runs here:
  there is no shell in DataDojo's sandbox, by design.
* ``read_file`` / ``write_file`` go through :meth:`datadojo.sandbox.Sandbox.read_file` /
  :meth:`~datadojo.sandbox.Sandbox.write_file`: confined to the working directory and the read-only inputs,
  whatever symlinks the agent made.
* ``cwd``, ``env`` and ``user`` cannot be chosen: a cell runs in the working directory, with the sandbox's
  environment, as the sandbox's uid. A call that asks for them fails with a message saying so.
"""

from __future__ import annotations

import functools
import posixpath
from typing import Any

from datadojo.errors import require_extra
from datadojo.integrations.inspect.samples import task_from_metadata
from datadojo.sandbox.config import Limits, SandboxConfig
from datadojo.sandbox.policy import PolicyConfig
from datadojo.sandbox.session import Sandbox

__all__ = ["SANDBOX_NAME", "cell_for_command", "sandbox_config_from_dict", "sandbox_environment_class"]

#: The name inspect knows the sandbox by (``Task(sandbox="datadojo")``, ``--sandbox datadojo``).
SANDBOX_NAME = "datadojo"
_PYTHONS = {"python", "python3"}


def cell_for_command(cmd: list[str], input: str | bytes | None) -> tuple[str, str, str | None] | str:
    """``(language, code, db)`` for a command DataDojo's sandbox runs, else the message saying why not."""
    if not cmd:
        return "an empty command"
    program = posixpath.basename(cmd[0])
    stdin = input.decode("utf-8") if isinstance(input, bytes) else input
    if program in _PYTHONS or program.startswith("python3."):
        args = cmd[1:]
        if len(args) >= 2 and args[0] == "-c":
            return "python", args[1], None
        if (not args or args == ["-"]) and stdin is not None:
            return "python", stdin, None
        return f"{cmd[0]} {' '.join(args)}: only `python3 -c CODE` and code on standard input run here"
    if program == "sqlite3":
        if len(cmd) == 3:
            return "sql", cmd[2], cmd[1]
        if len(cmd) == 2 and stdin is not None:
            return "sql", stdin, cmd[1]
        return "sqlite3: give the database and one statement (sqlite3 DB 'SELECT ...')"
    return (
        f"{cmd[0]}: DataDojo's sandbox has no shell and runs no programs; it runs Python "
        "(python3 -c CODE, or code on standard input) and SQL (sqlite3 DB STATEMENT)"
    )


def sandbox_config_from_dict(data: dict[str, Any]) -> SandboxConfig:
    """A :class:`SandboxConfig` back from its JSON form (inspect's log stores the sandbox's config so).

    ``SandboxConfig`` takes its ``limits`` and ``policy`` as objects, never as dicts (a typo in a dict
    would be a silently weaker sandbox); here they were written by ``SandboxConfig`` itself.
    """
    fields = dict(data)
    if isinstance(fields.get("limits"), dict):
        fields["limits"] = Limits.model_validate(fields["limits"])
    if isinstance(fields.get("policy"), dict):
        fields["policy"] = PolicyConfig.model_validate(fields["policy"])
    return SandboxConfig.model_validate(fields)


@functools.cache
def sandbox_environment_class() -> type[Any]:
    """The ``SandboxEnvironment`` subclass, registered with inspect as ``datadojo`` (once per process)."""
    require_extra("inspect", "the inspect_ai integration", "inspect_ai")
    from inspect_ai.util import ExecResult, SandboxEnvironment, sandboxenv
    from inspect_ai.util._sandbox.environment import SandboxUserUnsupportedError
    from pydantic import BaseModel

    @sandboxenv(name=SANDBOX_NAME)
    class DataDojoSandboxEnvironment(SandboxEnvironment):
        """A DataDojo sandbox for one sample (its ``session`` is the :class:`~datadojo.sandbox.Sandbox`)."""

        def __init__(self, session: Sandbox) -> None:
            super().__init__()
            self.session = session

        @classmethod
        def config_deserialize(cls, config: dict[str, Any]) -> BaseModel:
            return sandbox_config_from_dict(config)

        @classmethod
        async def sample_init(
            cls, task_name: str, config: Any, metadata: dict[str, str]
        ) -> dict[str, SandboxEnvironment]:
            task = task_from_metadata(metadata)
            if config is None:
                sb_config = SandboxConfig()
            elif isinstance(config, SandboxConfig):
                sb_config = config
            elif isinstance(config, dict):
                sb_config = sandbox_config_from_dict(config)
            else:
                raise TypeError(
                    f"the datadojo sandbox takes a datadojo SandboxConfig as config, got {type(config).__name__}"
                )
            session = await Sandbox.create(task.files, sb_config)
            return {"default": cls(session)}

        @classmethod
        async def sample_cleanup(
            cls,
            task_name: str,
            config: Any,
            environments: dict[str, SandboxEnvironment],
            interrupted: bool,
        ) -> None:
            for env in environments.values():
                await env.as_type(cls).session.close()

        async def exec(
            self,
            cmd: list[str],
            input: str | bytes | None = None,
            cwd: str | None = None,
            env: dict[str, str] | None = None,
            user: str | None = None,
            timeout: int | None = None,
            timeout_retry: bool = True,
            concurrency: bool = True,
        ) -> ExecResult[str]:
            if user is not None:
                raise SandboxUserUnsupportedError(
                    f"the datadojo sandbox runs every cell as its own uid; it cannot run as {user!r}"
                )
            refused = None
            if cwd not in (None, ".", self.session.code_workspace):
                refused = f"cwd {cwd!r}: cells run in the working directory ({self.session.code_workspace})"
            elif env:
                refused = "env: cells run with the sandbox's own environment; set variables in the code"
            cell = cell_for_command(cmd, input) if refused is None else refused
            if isinstance(cell, str):
                return ExecResult(success=False, returncode=127, stdout="", stderr=cell)
            language, code, db = cell
            # The sandbox's own limits (SandboxConfig.limits) bound the cell; inspect's timeout is not a
            # second, different one.
            result = await self.session.run(code, language=language, db=db)  # type: ignore[arg-type]
            if result.status == "ok":
                return ExecResult(success=True, returncode=0, stdout=result.output, stderr="")
            if result.timed_out:
                raise TimeoutError(result.output)
            return ExecResult(success=False, returncode=1, stdout="", stderr=result.output)

        async def write_file(self, file: str, contents: str | bytes) -> None:
            data = contents.encode("utf-8") if isinstance(contents, str) else contents
            await self.session.write_file(file, data)

        async def read_file(self, file: str, text: bool = True) -> Any:
            from inspect_ai.util._sandbox.limits import SandboxEnvironmentLimits

            data = await self.session.read_file(file, max_bytes=SandboxEnvironmentLimits.MAX_READ_FILE_SIZE)
            return data.decode("utf-8") if text else data

    return DataDojoSandboxEnvironment
