"""The error a DataMind synthesis run reports to its user (taxonomy files have their own ``TaxonomyError``)."""

from __future__ import annotations

from datadojo.errors import DataDojoError

__all__ = ["DataMindError"]


class DataMindError(DataDojoError, ValueError):
    """A stage that cannot run: its input stage has not run in this ``--out`` folder, a run folder made with
    other settings, an unknown curation strategy, a tokenizer that cannot be loaded; the message names it."""
