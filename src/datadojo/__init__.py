"""DataDojo: build, train and evaluate data-analytic LLM agents.

The public data model lives in :mod:`datadojo.types`; see ``docs/architecture.md`` for how the stages fit.
"""

from datadojo.types import Action, DataFile, Observation, Task, Trajectory, Turn
from datadojo.version import __version__

__all__ = ["Action", "DataFile", "Observation", "Task", "Trajectory", "Turn", "__version__"]
