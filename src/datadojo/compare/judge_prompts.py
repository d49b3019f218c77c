"""Prompts of the LLM judge: DataMind's answer-correctness rules and SciDataSailor's rubrics (App. B.2).

Kept apart from :mod:`datadojo.compare.judge` so the wording can be read and diffed on its own.

* ``datamind``: DataMind §4 "Answer reward" (and the consistency judge of §3.2 it mirrors): numbers within
  3% of the ground truth with units converted, semantic equivalence for descriptive answers, completeness
  of every part of the question. The paper's own prompt (App. I.4) is not reproduced in the material we
  have; this wording states those three criteria, plus the verbosity rule behind DataMind's length control
  (§3.2: an answer must not win by listing alternatives until one hits).
* ``sailor_meta`` / ``sailor_qa``: SciDataSailor App. B.2.2 (system prompt and user template) with the
  B.2.3 rubric for meta-information summaries or scientific dataset QA, verbatim.

Every template asks for strict JSON ``{"score": 0 or 1, "reason": "..."}``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["JUDGE_RUBRICS", "JudgeRubric", "get_rubric"]

JSON_INSTRUCTION = (
    'Return JSON exactly in this schema: {"score": 0 or 1, "reason": "short reason"}. '
    "Keep reason under 60 words. Do not output any extra text."
)

_DATAMIND_SYSTEM = (
    "You are a strict but fair judge of data-analysis answers. Compare a candidate answer with the "
    "ground-truth answer to the same question and decide whether the candidate is correct.\n"
    "1. Numerical answers: the candidate is correct when every number the question asks for is within 3% "
    "of the ground truth. Convert units (and percentages versus fractions) before comparing.\n"
    "2. Descriptive answers: the candidate is correct when it is semantically equivalent to the ground "
    "truth; wording, ordering and formatting may differ.\n"
    "3. Completeness: the candidate must answer every part of the question that the ground truth answers, "
    "including implicit sub-questions. A missing or contradicted part makes it incorrect.\n"
    "4. Length does not help: a candidate that hedges, lists several alternative answers, or buries the "
    "right value among wrong ones is incorrect.\n"
    "Return strict JSON only. Do not include markdown, explanations outside the JSON object, or additional keys."
)
_DATAMIND_USER = (
    "Question: {question}\n\nGround-truth answer: {reference}\n\nCandidate answer: {prediction}\n\n"
    + JSON_INSTRUCTION
)

# SciDataSailor App. B.2.2, verbatim.
_SAILOR_SYSTEM = (
    "You are a strict but fair evaluator for scientific dataset exploration tasks. Your job is to compare a "
    "candidate answer against a reference answer for the same question or seed task. Judge semantic "
    "correctness, not surface form. Equivalent wording, ordering, and formatting are acceptable. Extra "
    "details are acceptable only when they do not contradict the reference. Penalize answers that contain "
    "major factual errors, unsupported numerical claims, wrong units, wrong dataset objects, or omissions of "
    "central reference facts. For numerical answers, allow scientifically reasonable rounding, equivalent "
    "units, and formatting differences. Do not require exact string matching when the quantity is clearly "
    "the same. However, mark the answer incorrect if the numerical value, sign, scale, unit, or target "
    "entity is materially wrong. For meta-information summaries, focus on whether the answer captures the "
    "core dataset-level evidence: organization, file formats, schemas, metadata fields, key counts/sizes, "
    "and storage or processing logic. Do not require every minor detail, but central facts in the reference "
    "must not be omitted or contradicted. Return strict JSON only. Do not include markdown, explanations "
    "outside the JSON object, chain-of-thought, or additional keys."
)
_SAILOR_USER = (
    "Task type: {task_type}\nRubric: {rubric}\nQuestion or task: {question}\nReference answer: {reference}\n"
    "Candidate answer: {prediction}\n" + JSON_INSTRUCTION
)
# SciDataSailor App. B.2.3, verbatim.
_SAILOR_META_RUBRIC = (
    "Score 1 if the candidate captures the core metadata summary in the reference. The answer should cover "
    "the main dataset organization, major file formats, important schema or metadata fields, key counts or "
    "sizes when present, and the intended storage or processing logic. Equivalent wording, reordered "
    "sections, and additional correct details are acceptable. The candidate does not need to reproduce every "
    "minor field or every number if the main metadata summary is faithful. Score 0 if the candidate makes "
    "major factual errors, contradicts important reference facts, hallucinates unsupported counts or file "
    "structures, uses the wrong dataset, omits central schema/format information, or misses the main "
    "scientific usage constraints described in the reference."
)
_SAILOR_QA_RUBRIC = (
    "Score 1 if the candidate answers the scientific dataset QA question with the same factual or numerical "
    "answer as the reference. Equivalent units, rounding, significant figures, and wording are acceptable "
    "when scientifically consistent. If the reference answer contains multiple required values, all central "
    "values must be present and matched. Score 0 if the candidate gives the wrong value, wrong unit, wrong "
    "entity, wrong comparison target, or a vague answer that does not resolve the question. Also score 0 "
    "when the answer is unsupported by the dataset evidence or contradicts the reference."
)


_SLOT = re.compile(r"\{(question|reference|prediction|task_type|rubric)\}")


@dataclass(frozen=True)
class JudgeRubric:
    """A system prompt and a user template with ``{question}``, ``{reference}``, ``{prediction}`` slots."""

    name: str
    system: str
    user_template: str
    task_type: str = ""
    rubric: str = ""

    def render(self, question: str, reference: str, prediction: str) -> list[dict[str, str]]:
        """The chat messages asking for one verdict.

        Slots are filled in one pass (not ``str.format``): the templates contain the JSON schema's literal
        braces, and a question that itself contains ``{reference}`` must not be expanded again.
        """
        values = {
            "question": question,
            "reference": reference,
            "prediction": prediction,
            "task_type": self.task_type,
            "rubric": self.rubric,
        }
        user = _SLOT.sub(lambda m: values[m.group(1)], self.user_template)
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]


JUDGE_RUBRICS: dict[str, JudgeRubric] = {
    "datamind": JudgeRubric("datamind", _DATAMIND_SYSTEM, _DATAMIND_USER),
    "sailor_meta": JudgeRubric(
        "sailor_meta", _SAILOR_SYSTEM, _SAILOR_USER, "meta-information summary", _SAILOR_META_RUBRIC
    ),
    "sailor_qa": JudgeRubric(
        "sailor_qa", _SAILOR_SYSTEM, _SAILOR_USER, "scientific dataset QA", _SAILOR_QA_RUBRIC
    ),
}


def get_rubric(name: str | JudgeRubric) -> JudgeRubric:
    """A rubric by name (``datamind``, ``sailor_meta``, ``sailor_qa``) or the rubric itself."""
    if isinstance(name, JudgeRubric):
        return name
    try:
        return JUDGE_RUBRICS[name]
    except KeyError:
        raise ValueError(f"unknown judge rubric {name!r}; known: {', '.join(JUDGE_RUBRICS)}") from None
