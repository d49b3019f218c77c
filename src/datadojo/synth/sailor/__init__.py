"""SciDataSailor synthesis (arXiv 2607.28098 §4.1–4.2): MCTS exploration of dataset folders with DF-FPU,
hierarchical strategy→tool actions and entropy-adaptive branching; step-verified trajectories, QA pairs and
merged meta references. ``datadojo synth sailor`` is the command; :func:`run_sailor` the library call.

Modules: :mod:`~.seeds` (intents, data file), :mod:`~.config`, :mod:`~.mcts` (the rules, pure),
:mod:`~.strategies` (catalog, structured replies, tool identity), :mod:`~.env` (persistent sandbox with path
replay), :mod:`~.explore` (the search), :mod:`~.qc` (§4.2), :mod:`~.synthesis` (trajectories, QA, meta),
:mod:`~.pipeline` (units, output files, resume), :mod:`~.report` (HTML trees).
"""

from datadojo.synth.sailor.config import SailorConfig
from datadojo.synth.sailor.mcts import (
    Node,
    Tree,
    branching_width,
    calibrated_value,
    prior_entropy,
    token_entropy,
    uct_df_fpu,
)
from datadojo.synth.sailor.pipeline import SailorRun, run_sailor
from datadojo.synth.sailor.seeds import LEVELS, Seed, load_seeds
from datadojo.synth.sailor.strategies import STRATEGIES

__all__ = [
    "LEVELS",
    "STRATEGIES",
    "Node",
    "SailorConfig",
    "SailorRun",
    "Seed",
    "Tree",
    "branching_width",
    "calibrated_value",
    "load_seeds",
    "prior_entropy",
    "run_sailor",
    "token_entropy",
    "uct_df_fpu",
]
