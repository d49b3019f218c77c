"""The one root of DataDojo's own errors, so that callers (the CLI above all) can tell them from bugs.

Every exception DataDojo raises on purpose -- bad input, a missing file it names, an unknown registry
name, a backend that refused -- derives from :class:`DataDojoError`. Subclasses also keep the built-in
base they always had (``ValueError``, ``RuntimeError``, ``KeyError``), so ``except ValueError`` in user
code keeps working. The ``datadojo`` command catches :class:`DataDojoError` in one place
(:mod:`datadojo.cli.app`) and prints its message on one line with exit status 2; anything else is a bug
and shows its traceback.

The exit status comes from the error: :class:`ExitCode` is the one table of the command's exit statuses, and
each class says which of them it ends with (:attr:`DataDojoError.exit_code`, 2 unless a subclass says
otherwise), so that a model server that cannot be reached ends every command with 3, whichever raised it.
"""

from __future__ import annotations

import enum

__all__ = [
    "DataDojoError",
    "ExitCode",
    "MissingExtraError",
    "ResumeError",
    "UnknownNameError",
    "require_extra",
]


class ExitCode(enum.IntEnum):
    """The exit statuses of the ``datadojo`` command (docs/reliability.md, "Exit statuses")."""

    OK = 0
    BUG = 1  # an exception that is not a DataDojoError: a bug, shown with its traceback
    BAD_INPUT = 2  # bad input or usage: a file, flag or setting the message names
    MODEL_SERVER = 3  # the model server could not be reached (down, wrong URL or model name)
    SANDBOX = 4  # the sandbox could not run code (isolation unavailable, worker died at start)
    NOTHING_KEPT = 5  # the run finished, but produced nothing usable (e.g. every trajectory filtered out)
    INTERRUPTED = 130  # Ctrl-C; rerun the same command to resume


class DataDojoError(Exception):
    """Root of the errors DataDojo raises on purpose; the message says what to fix.

    ``exit_code`` is the status the ``datadojo`` command ends with when this error reaches it.
    """

    exit_code: ExitCode = ExitCode.BAD_INPUT


class UnknownNameError(DataDojoError, KeyError, ValueError):
    """A registry has no entry under the asked name; the message lists the known names.

    A ``KeyError`` and a ``ValueError`` too, so the ``except`` clauses written for either kind of registry
    keep working; unlike a plain ``KeyError`` its ``str()`` is the message itself, not its ``repr`` in quotes.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()


class MissingExtraError(DataDojoError, ImportError):
    """A feature needs an optional extra that is not installed; the message is the ``pip install`` line.

    An ``ImportError`` too, so code that tries a feature and falls back on ``ImportError`` keeps working; at
    the command it is one line, exit 2, instead of a traceback ending in ``No module named 'torch'``.
    """


def require_extra(extra: str, what: str, *modules: str) -> None:
    """Raise :class:`MissingExtraError` unless every one of ``modules`` can be found (not imported: cheap).

    ``what`` names the feature (``"the hf backend"``, ``"datadojo train sft"``) for the message.
    """
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingExtraError(
            f"{what} needs {', '.join(missing)}, not installed here: pip install 'datadojo[{extra}]'"
        )


class ResumeError(DataDojoError, ValueError):
    """A run folder holds a run made with other settings: resuming it would mix two runs' outputs.

    The message names the folder and each setting that differs (was / now), so the user can rerun with the
    same settings or choose another folder. Raised by :class:`datadojo.runs.RunFolder`.
    """
