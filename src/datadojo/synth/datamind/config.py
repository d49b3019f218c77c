"""Settings of the DataMind synthesis pipeline, with the paper's defaults and our documented choices."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from datadojo.config import Settings
from datadojo.corpus import FilterConfig

__all__ = ["STRATEGIES", "DataMindConfig"]

#: DataMind Figure 4's curation strategies (§5.4): judge's best of a consistent group, a seeded random one,
#: all of them, and one random trajectory per query without the consistency filter.
STRATEGIES: tuple[str, ...] = ("con-select", "random-select", "non-select", "non-con")


class DataMindConfig(Settings):
    """Every knob of ``datadojo synth datamind``. Paper values cite DataMind §3.1–3.2; the rest are ours."""

    taxonomy: str | None = Field(None, description="taxonomy JSON file (default: the bundled one)")
    filters: FilterConfig = Field(
        default_factory=FilterConfig, description="file filters (§3.1: 20-1,000 rows)"
    )
    profile_chars: int = Field(3000, ge=200, description="budget of the profile text d per file")
    # query synthesis (§3.2, Steps 1-2)
    queries_per_category: int = Field(1, ge=1, description="questions asked per (file, category) request")
    max_query_chars: int = Field(600, ge=20, description="longer questions are rejected (too_long)")
    near_duplicate: float = Field(
        0.8,
        gt=0.0,
        le=1.0,
        description="word-set Jaccard similarity at or above which a question is a near-duplicate",
    )
    query_temperature: float = Field(
        0.7, ge=0.0, description="teacher sampling temperature of the query and composition requests"
    )
    query_max_tokens: int = Field(
        1024, ge=16, description="tokens per teacher reply of the query and composition requests"
    )
    # composition (§3.2, Step 3: chains of 2-5 categories)
    chains_per_file: int = Field(
        3, ge=0, description="composition chains started per file (each 2-5 categories long)"
    )
    min_chain: int = Field(2, ge=2, description="shortest chain, in categories (§3.2: 2)")
    max_chain: int = Field(5, ge=2, description="longest chain, in categories (§3.2: 5)")
    # sampling (§3.2: N = 3 trajectories per query, knowledge k in the prompt)
    n_samples: int = Field(3, ge=1, description="trajectories per query (DataMind §3.2: N = 3)")
    use_workflow: bool = Field(True, description="put the category's workflow k in the agent prompt")
    detailed_workflow: Literal["auto", "always", "never"] = Field(
        "auto",
        description="when the step-by-step workflow k is shown instead of the short one: for hard categories "
        "(auto, §3.2: finer instructions where consistency is low), always or never",
    )
    max_turns: int = Field(10, ge=1, description="turn budget T of each episode (DataMind §3.1: 10)")
    temperature: float = Field(0.7, ge=0.0, description="teacher sampling temperature of the trajectories")
    top_p: float = Field(
        0.95, gt=0.0, le=1.0, description="teacher nucleus sampling top-p of the trajectories"
    )
    max_tokens: int | None = Field(None, ge=1, description="tokens per agent turn (None: server default)")
    concurrency: int = Field(32, ge=1, description="episodes / requests in flight")
    # self-consistency and reflection (§3.2, Steps 3-4, Eq. 3)
    tolerance: float = Field(
        0.03, ge=0.0, description="relative tolerance of the numeric pre-check (DataMind App. I.4: within 3%)"
    )
    rounds: int = Field(1, ge=0, description="reflection rounds R for inconsistent queries (0 = none)")
    judge_max_tokens: int = Field(
        1024, ge=16, description="tokens per judge reply (self-consistency verdicts)"
    )
    context_chars: int = Field(
        1500,
        ge=0,
        description="per trajectory: how much of its steps the judge and the reflection prompt see",
    )
    # rule filters (§3.2)
    max_answer_tokens: int = Field(
        1024, ge=1, description="longest final answer kept, in tokens (DataMind §3.2: 1,024)"
    )
    tokenizer: str = Field(
        "approx",
        description="tokenizer of the answer-length filter: approx or a local Hugging Face name/path",
    )
    mixed_script_share: float = Field(
        0.1,
        gt=0.0,
        le=1.0,
        description="minority-script letters at or above this share of prose = intermingled",
    )
    mixed_script_min_letters: int = Field(6, ge=1, description="fewest minority-script letters that count")
    # curation
    sft_prompt: Literal["plain", "as_sampled"] = Field(
        "plain",
        description="SFT examples keep the prompt without k and reflection feedback (the trained agent never "
        "sees them) or exactly as sampled",
    )
    non_con: Literal["all", "one"] = Field(
        "all",
        description="non-con keeps every round-0 trajectory that passed the filters, consistent or not "
        "(DataMind §5.4: 'uses all trajectories including inconsistent ones'), or one seeded random one per "
        "query (one)",
    )
    rule_best: bool = Field(
        False,
        description="when the pre-check finds differing trajectories consistent, take its fewest-turns pick as "
        "the best instead of asking the judge (cheaper; con-select is then not the judge's choice)",
    )
    # LLM I/O
    structured: Literal["auto", "json_schema", "json_object", "off"] = Field(
        "auto", description="how the teacher and the judge are asked for JSON (the response_format mode)"
    )
    seed: int = Field(0, description="seed of composition plans, sampling and random selection")

    @model_validator(mode="after")
    def _check(self) -> DataMindConfig:
        if self.min_chain > self.max_chain:
            raise ValueError(f"min_chain ({self.min_chain}) must be <= max_chain ({self.max_chain})")
        return self
