"""Rewards: the registry that chooses and computes every reward, DataMind's reward and judge agreement,
re-exporting the answer comparison they build on.

* :mod:`~datadojo.reward.registry`: rewards by name, built from named weighted parts; ``reward_for_task``
  chooses, ``score_pairs`` scores (every consumer calls it; ``docs/environment.md``, "Rewards");
* :mod:`~datadojo.reward.envlunch` (with ``canon`` and ``programs``): EnvLunch's Eq. 4 over counterfactual copies;
* :mod:`~datadojo.reward.datamind`: r_format, r_answer, r_length and the composite R (DataMind §4);
* :mod:`~datadojo.reward.agreement`: agreement between two judges, with ROUGE-L alongside.

The comparisons themselves (tolerant matcher, table comparison, text normalization, the scientific matcher
and units, the LLM judge) live in :mod:`datadojo.compare`, below both this package and the benchmarks;
the names are re-exported here as before. The official benchmark scorers live in :mod:`datadojo.bench`;
``docs/scoring.md`` describes every rule."""

from datadojo.compare.judge import JudgeCache, JudgeError, JudgeVerdict, LLMJudge
from datadojo.compare.matchers import MatchConfig, MatchResult, match_answer, match_task
from datadojo.compare.scientific import ScientificConfig, ScientificMatch, match_scientific
from datadojo.compare.tables import TableMatch, compare_tables
from datadojo.compare.text import normalize_text, parse_number, rouge_l
from datadojo.compare.units import Unit, parse_unit
from datadojo.reward.agreement import AgreementReport, agreement_report, pearson
from datadojo.reward.datamind import (
    L_MAX,
    L_MIN,
    MALFORMED_PENALTY,
    DataMindReward,
    RewardBreakdown,
    composite_reward,
    default_answer_check,
    format_reward,
    length_reward,
    token_counter,
)

__all__ = [
    "L_MAX",
    "L_MIN",
    "MALFORMED_PENALTY",
    "AgreementReport",
    "DataMindReward",
    "JudgeCache",
    "JudgeError",
    "JudgeVerdict",
    "LLMJudge",
    "MatchConfig",
    "MatchResult",
    "RewardBreakdown",
    "ScientificConfig",
    "ScientificMatch",
    "TableMatch",
    "Unit",
    "agreement_report",
    "compare_tables",
    "composite_reward",
    "default_answer_check",
    "format_reward",
    "length_reward",
    "match_answer",
    "match_scientific",
    "match_task",
    "normalize_text",
    "parse_number",
    "parse_unit",
    "pearson",
    "rouge_l",
    "token_counter",
]
