"""DataMind's data synthesis pipeline (DataMind §3.2, Figure 4): taxonomy queries, easy→hard composition,
knowledge-augmented sampling with self-consistency and reflection, rule filters and curation.

Entry points: :class:`DataMindRun` with :func:`run_pipeline` or the stage functions, and the CLI
``datadojo synth datamind``. See ``docs/datamind.md``.
"""

from typing import TYPE_CHECKING

from datadojo.lazy import lazy_exports

if TYPE_CHECKING:
    from datadojo.synth.datamind.config import STRATEGIES, DataMindConfig
    from datadojo.synth.datamind.pipeline import (
        DataMindRun,
        run_pipeline,
        stage_compose,
        stage_curate,
        stage_judge,
        stage_queries,
        stage_sample,
    )
    from datadojo.synth.datamind.taxonomy import CATEGORY_NAMES, Category, Taxonomy, load_taxonomy

__all__ = [
    "CATEGORY_NAMES",
    "STRATEGIES",
    "Category",
    "DataMindConfig",
    "DataMindRun",
    "Taxonomy",
    "load_taxonomy",
    "run_pipeline",
    "stage_compose",
    "stage_curate",
    "stage_judge",
    "stage_queries",
    "stage_sample",
]

_WHERE = {
    "STRATEGIES": "config",
    "DataMindConfig": "config",
    "DataMindRun": "pipeline",
    "run_pipeline": "pipeline",
    "stage_compose": "pipeline",
    "stage_curate": "pipeline",
    "stage_judge": "pipeline",
    "stage_queries": "pipeline",
    "stage_sample": "pipeline",
    "CATEGORY_NAMES": "taxonomy",
    "Category": "taxonomy",
    "Taxonomy": "taxonomy",
    "load_taxonomy": "taxonomy",
}

# Imported on first use: the CLI reads DataMindConfig's fields at start-up, and the pipeline loads pandas.
__getattr__, __dir__ = lazy_exports("datadojo.synth.datamind", _WHERE, globals())
