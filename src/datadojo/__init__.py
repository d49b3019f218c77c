"""DataDojo: build, train and evaluate data-analytic LLM agents.

The public data model lives in :mod:`datadojo.types`; see ``docs/architecture.md`` for how the stages fit.
"""

__version__ = "0.1.0"

from datadojo.types import Action, DataFile, Observation, Task, Trajectory, Turn

__all__ = ["Action", "DataFile", "Observation", "Task", "Trajectory", "Turn", "__version__"]
