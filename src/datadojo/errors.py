"""The one root of DataDojo's own errors, so that callers (the CLI above all) can tell them from bugs.

Every exception DataDojo raises on purpose -- bad input, a missing file it names, an unknown registry
name, a backend that refused -- derives from :class:`DataDojoError`. Subclasses also keep the built-in
base they always had (``ValueError``, ``RuntimeError``, ``KeyError``), so ``except ValueError`` in user
code keeps working. The ``datadojo`` command catches :class:`DataDojoError` in one place
(:mod:`datadojo.cli.app`) and prints its message on one line with exit status 2; anything else is a bug
and shows its traceback.
"""

from __future__ import annotations

__all__ = ["DataDojoError", "UnknownNameError"]


class DataDojoError(Exception):
    """Root of the errors DataDojo raises on purpose; the message says what to fix."""


class UnknownNameError(DataDojoError, KeyError, ValueError):
    """A registry has no entry under the asked name; the message lists the known names.

    A ``KeyError`` and a ``ValueError`` too, so the ``except`` clauses written for either kind of registry
    keep working; unlike a plain ``KeyError`` its ``str()`` is the message itself, not its ``repr`` in quotes.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()
