"""EnvLunch's settings (:class:`SynthConfig`, :class:`BuildConfig`, :class:`SolverConfig`) and the constants
their defaults come from, apart from the synthesis, build and solver code that uses them.

A light module (pydantic and the standard library): ``datadojo warmup`` builds its flags' help from these
fields at start-up, and the modules that use them load pandas. Those modules still export the names.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from datadojo.config import Settings

__all__ = [
    "K_PANDAS",
    "K_SQL",
    "MAX_TARGET_ROWS",
    "SAMPLE_ROWS",
    "SOLVE_CANDIDATES",
    "SOLVE_SAMPLE",
    "BuildConfig",
    "SolverConfig",
    "SynthConfig",
]

#: EnvLunch §3: "We use K=2 copies for SQL and K=3 for pandas."
K_SQL = 2
K_PANDAS = 3

MAX_TARGET_ROWS = 30

#: Rows per table a build keeps of a larger table (``BuildConfig.sample_rows``; ours, docs/envlunch.md).
SAMPLE_ROWS = 2000

#: Tasks of a build the reference solver tries after ``datadojo warmup build`` (the library's default is 0:
#: the recipe's curation stage and the demo solve every task anyway), and its compositions per task (the
#: solver's own default, so the share is what ``warmup solve --time-limit 0`` gives on those tasks). Ours,
#: docs/envlunch.md: about 20 s of CPU on a 2,000-row sample of a BIRD database, 7 s on the example shop.
SOLVE_SAMPLE = 10
SOLVE_CANDIDATES = 400


class SynthConfig(Settings):
    """Synthesis settings; defaults from EnvLunch §3 where it gives them (K, levels), ours otherwise."""

    seed: int = Field(0, description="seed of the environment and task draws")
    k_sql: int = Field(K_SQL, description="copies K of each SQL environment (EnvLunch §3: 2)")
    k_pandas: int = Field(K_PANDAS, description="copies K of each pandas environment (EnvLunch §3: 3)")
    max_target_rows: int = Field(MAX_TARGET_ROWS, description="most rows of a task's target table")
    levels: tuple[int, ...] = Field((1, 2, 3, 4), description="difficulty levels drawn (EnvLunch §3: 1-4)")


class BuildConfig(Settings):
    """How many tasks, from which mix, with how much effort."""

    n: int = Field(1600, description="number of tasks (EnvLunch §4 uses 1,600)")
    seed: int = Field(0, description="everything is reproducible from the seed")
    sql_fraction: float = Field(0.5, description="share of SQL tasks (the rest pandas)")
    attempts: int = Field(25, description="draws per task and environment before moving on")
    max_rounds: int = Field(6, description="rounds of drawing new environments for tasks that found none")
    workers: int = Field(1, description="worker processes")
    sample_rows: int = Field(
        SAMPLE_ROWS,
        ge=0,
        description="tables with more rows are cut, when loaded, to a sample of about this many rows that "
        "keeps every foreign key resolvable (parents keep the rows their kept children reference, even past "
        "it); tasks, copies and the agent's database are that sample, and each task is exact on it. Keeps a "
        "build on BIRD-sized databases fast (queries over 2,000 rows, not 600,000); 0: whole tables, as in "
        "the paper",
    )
    solve_sample: int = Field(
        0,
        ge=0,
        description="tasks (a seeded sample) the reference solver tries after the build, to report the "
        "share it solves in every copy and why it fails on the rest (no program in budget: hard; a program "
        "that matches o* but not a copy: ambiguous; an error: broken); 0: none",
    )
    solve_candidates: int = Field(
        SOLVE_CANDIDATES,
        ge=1,
        description="compositions the solver tries per sampled task (a deterministic budget: no clock, "
        "so the report depends on the seed alone)",
    )
    synth: SynthConfig = Field(default_factory=SynthConfig, description="synthesis settings")

    @model_validator(mode="after")
    def _check(self) -> BuildConfig:
        if self.n < 0:
            raise ValueError(f"n must be >= 0, got {self.n}")
        if not 0.0 <= self.sql_fraction <= 1.0:
            raise ValueError(f"sql_fraction must be in [0, 1], got {self.sql_fraction}")
        if self.workers < 1:
            raise ValueError(f"workers must be >= 1, got {self.workers}")
        return self


class SolverConfig(Settings):
    """Search budget per task: at most ``max_candidates`` compositions and ``time_limit_s`` seconds.

    ``max_candidates`` is the deterministic budget: with ``time_limit_s=None`` the search draws exactly the
    same compositions on any machine, so its result depends only on the seed (tests and reproducible runs
    use that). The wall-clock limit is for users, who want a bound on how long a hard task may take; with
    it, a loaded machine may stop earlier and find fewer programs.
    """

    max_candidates: int = Field(400, description="compositions tried per task (the deterministic budget)")
    time_limit_s: float | None = Field(
        3.0,
        description="wall-clock seconds per task, a bound for users (none, or 0 on the command line: only the "
        "candidate budget bounds the search, so the result is the same on any machine)",
    )
    seed: int = Field(0, description="seed of the search")

    @model_validator(mode="after")
    def _check(self) -> SolverConfig:
        if self.max_candidates < 1:
            raise ValueError(f"max_candidates must be >= 1, got {self.max_candidates}")
        if self.time_limit_s is not None and not self.time_limit_s > 0:
            raise ValueError(f"time_limit_s must be > 0 or None, got {self.time_limit_s}")
        return self

    def budget_text(self) -> str:
        """The budget in words, for reports: ``400 candidates`` or ``400 candidates / 3 s``."""
        text = f"{self.max_candidates} candidates"
        return text if self.time_limit_s is None else f"{text} / {self.time_limit_s:g} s"
