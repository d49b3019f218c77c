"""Rewards and answer checking: DataMind's reward, the tolerant matcher, the LLM judge, judge agreement.

* :mod:`~datadojo.reward.datamind`: r_format, r_answer, r_length and the composite R (DataMind §4);
* :mod:`~datadojo.reward.matchers`: the deterministic tolerant matcher for synthesised tasks;
* :mod:`~datadojo.reward.scientific`: SciDataSailor's QA matcher (numbers with units, categorical values),
  over the unit parser :mod:`~datadojo.reward.units`;
* :mod:`~datadojo.reward.tables`: DataMind's table comparison (BIRD-style result tables);
* :mod:`~datadojo.reward.judge`: the LLM judge (DataMind rules, SciDataSailor rubrics), cached;
* :mod:`~datadojo.reward.agreement`: agreement between two judges, with ROUGE-L alongside;
* :mod:`~datadojo.reward.text`: normalisation, ROUGE-L and number parsing shared by all scorers.

The official benchmark scorers live in :mod:`datadojo.bench`; ``docs/scoring.md`` describes every rule.
"""

from datadojo.compare.matchers import MatchConfig, MatchResult, match_answer, match_task
from datadojo.compare.tables import TableMatch, compare_tables
from datadojo.compare.text import normalize_text, parse_number, rouge_l
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
from datadojo.reward.judge import JudgeCache, JudgeError, JudgeVerdict, LLMJudge
from datadojo.reward.scientific import ScientificConfig, ScientificMatch, match_scientific
from datadojo.reward.units import Unit, parse_unit

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
