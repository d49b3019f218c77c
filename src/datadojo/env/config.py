"""Settings of an environment episode (the ReAct loop's), with the papers' defaults.

:data:`EnvConfig` is the environment's name for :class:`AgentConfig`: one settings class, so an evaluation,
an RL rollout and an adapter that loads the environment run episodes under the same rules.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from datadojo.config import Settings
from datadojo.llm.base import SamplingParams

__all__ = ["AgentConfig", "EnvConfig"]


class AgentConfig(Settings):
    """How one agent episode runs.

    * ``max_turns`` — the turn budget T: DataMind stops after T = 10 rounds (§3.1, "Problem
      Formalization"); SciDataSailor evaluates with ReAct-step budgets of 12 and 24 (§5.1).
    * ``dialect`` — the tag protocol (``datamind`` or ``sailor``, see :mod:`datadojo.protocol`).
    * ``reserve_final_turn`` — when one turn is left, tell the model to answer now. Off by default (DataMind
      does not do it); SciDataSailor's case study (App. C.1) shows agents spending the whole budget
      exploring and never answering, which this prevents.
    * ``max_invalid_turns`` — stop with ``invalid`` after this many *consecutive* malformed turns (each one
      gets a corrective message first). Our choice; the papers do not say.
    * ``sampling`` — temperature / top-p / max tokens per request. DataMind evaluates at temperature 0.7,
      top-p 0.95 (§5.1); SciDataSailor at 0.6 / 0.95 (§5.1).
    * ``language`` — how unfenced code blocks are read: ``python``, ``sql`` or ``auto`` (SQL only for
      tasks whose data are all SQLite, see :func:`datadojo.protocol.default_language_for_task`).
    * ``strict_parse`` — parse turns with the strict parser (text outside tags is an error) instead of the
      lenient one (tolerated and recorded as a warning).
    * ``profile_chars`` — budget for the data description in the system prompt.
    * ``system_template`` — a path to a prompt template overriding the dialect's default (see
      ``env/prompts/*.md``; placeholders ``{{files}}``, ``{{description}}``, ``{{tools}}``,
      ``{{code_note}}``, ``{{max_turns}}``, ``{{answer_format}}``).
    """

    max_turns: int = Field(
        10, description="turn budget T (DataMind §3.1: 10; SciDataSailor §5.1 evaluates with 12 and 24)"
    )
    dialect: str = Field("datamind", description="tag protocol: datamind or sailor")
    reserve_final_turn: bool = Field(
        False,
        description="tell the model to answer when one turn is left (SciDataSailor App. C.1: agents that "
        "never reserve a step for the answer end with nothing to score)",
    )
    max_invalid_turns: int = Field(
        3,
        description="stop with invalid after this many consecutive malformed turns (each gets a corrective message first)",
    )
    sampling: SamplingParams = Field(
        default_factory=lambda: SamplingParams(temperature=0.7, top_p=0.95),
        description="temperature / top-p / max tokens per request (DataMind §5.1: 0.7 / 0.95)",
    )
    language: Literal["auto", "python", "sql"] | None = Field(
        None,
        description="how unfenced code blocks are read: python, sql, or auto (SQL only for tasks whose data are all SQLite)",
    )
    strict_parse: bool = Field(
        False,
        description="parse turns strictly (text outside tags is an error) instead of leniently (a recorded warning)",
    )
    profile_chars: int = Field(
        6000, description="budget, in characters, of the data description in the system prompt"
    )
    system_template: str | None = Field(
        None,
        description="a prompt template file replacing the dialect's system prompt (see env/prompts/*.md)",
    )

    @model_validator(mode="after")
    def _check(self) -> AgentConfig:
        if self.max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {self.max_turns}")
        if self.max_invalid_turns < 1:
            raise ValueError(f"max_invalid_turns must be >= 1, got {self.max_invalid_turns}")
        if self.profile_chars < 0:
            raise ValueError(f"profile_chars must be >= 0, got {self.profile_chars}")
        return self

    def to_dict(self, *, json: bool = True) -> dict[str, Any]:
        """The settings as JSON types (sampling's tuples as lists), as run records store them."""
        return super().to_dict(json=json)


#: The environment's settings (:mod:`datadojo.env`): the same class, under the name the environment uses.
EnvConfig = AgentConfig
