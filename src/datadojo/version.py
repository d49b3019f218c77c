"""DataDojo's version, in a module of its own: a trajectory's provenance records it
(:class:`datadojo.types.Provenance`) and the package's ``__init__`` re-exports the data model, so the
version sits below both (a leaf: it imports nothing). Keep it equal to ``version`` in ``pyproject.toml``."""

__version__ = "0.1.0"
