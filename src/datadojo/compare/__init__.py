"""Answer comparison: the leaf that benchmark scorers (:mod:`datadojo.bench`) and rewards
(:mod:`datadojo.reward`) both build on, so neither imports the other for it.

* :mod:`~datadojo.compare.core`: the one comparison core (numbers, percent, magnitude, units, entities,
  hedges, inclusive tolerance, certainty) behind the matcher, the scientific matcher and DataMind's
  consistency pre-check;
* :mod:`~datadojo.compare.content`: what an answer says besides its numbers (dates, content and direction
  words, list items), so the core decides only what it fully read;
* :mod:`~datadojo.compare.text`: SQuAD normalization, ROUGE-L and number parsing;
* :mod:`~datadojo.compare.tables`: DataMind's table comparison and order-insensitive denotation equality;
* :mod:`~datadojo.compare.matchers`: the deterministic tolerant matcher for synthesized tasks;
* :mod:`~datadojo.compare.units`, :mod:`~datadojo.compare.scientific`: numbers with units and the
  SciDataSailor-Bench QA matcher;
* :mod:`~datadojo.compare.judge`, :mod:`~datadojo.compare.judge_prompts`: the LLM judge and its rubrics.

It builds on :mod:`datadojo.types`, :mod:`datadojo.protocol` (to unwrap ``\\boxed{}``), :mod:`datadojo.llm`
and :mod:`datadojo.jsonl` (the judge's cache), never on bench or reward. The old paths
``datadojo.reward.{text,tables,matchers,judge,judge_prompts,scientific,units}`` remain importable as
aliases of these modules.
"""

from datadojo.compare.core import Verdict, compare_answers
from datadojo.compare.matchers import MatchConfig, MatchResult, match_answer, match_task
from datadojo.compare.tables import TableMatch, compare_tables, denotations_equal
from datadojo.compare.text import normalize_text, parse_number, rouge_l

__all__ = [
    "MatchConfig",
    "MatchResult",
    "TableMatch",
    "Verdict",
    "compare_answers",
    "compare_tables",
    "denotations_equal",
    "match_answer",
    "match_task",
    "normalize_text",
    "parse_number",
    "rouge_l",
]
