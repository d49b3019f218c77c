"""The tag protocol: how agent turns and environment replies are written, parsed and validated.

* :mod:`~datadojo.protocol.dialect`: :class:`Dialect` (``datamind``, ``sailor``), :class:`ParsedTurn`,
  the registry (:func:`get_dialect`);
* :mod:`~datadojo.protocol.scan`: the tag scanner every parser shares;
* :mod:`~datadojo.protocol.code`: code fences and the Python / SQL decision;
* :mod:`~datadojo.protocol.boxed`: ``\\boxed{…}`` answers;
* :mod:`~datadojo.protocol.validate`: the strict whole-trajectory validator (format reward).

The formats are described with examples in ``docs/formats.md``.
"""

from datadojo.protocol.boxed import find_boxed, unwrap_boxed
from datadojo.protocol.code import default_language_for_task, guess_language
from datadojo.protocol.dialect import (
    DATAMIND,
    SAILOR,
    CodeTag,
    Dialect,
    ParsedTurn,
    dialect_names,
    get_dialect,
    register_dialect,
)
from datadojo.protocol.validate import validate_trajectory

__all__ = [
    "DATAMIND",
    "SAILOR",
    "CodeTag",
    "Dialect",
    "ParsedTurn",
    "default_language_for_task",
    "dialect_names",
    "find_boxed",
    "get_dialect",
    "guess_language",
    "register_dialect",
    "unwrap_boxed",
    "validate_trajectory",
]
