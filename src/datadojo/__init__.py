"""DataDojo: build, train and evaluate data-analytic LLM agents.

The public data model lives in :mod:`datadojo.types`; see ``docs/architecture.md`` for how the stages fit.
Its names are re-exported lazily (PEP 562): importing any ``datadojo.*`` module runs this file, and the
``datadojo`` command's top-level help should not pay for pydantic models it does not use.
"""

from datadojo.lazy import lazy_exports
from datadojo.version import __version__

__all__ = ["Action", "DataFile", "Observation", "Task", "Trajectory", "Turn", "__version__"]

# ``load_environment``: verifiers finds an environment by its id by importing the module of that name and
# calling its ``load_environment`` — ``vf-eval datadojo`` (datadojo.integrations.verifiers; docs/environment.md).
__getattr__, __dir__ = lazy_exports(
    "datadojo",
    {
        **{name: "types" for name in __all__ if name != "__version__"},
        "load_environment": "integrations.verifiers",
    },
    globals(),
)
