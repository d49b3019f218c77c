"""Adversarial answer pairs: what real models write, with the verdict a careful grader gives.

Every rule that compares answers (the DataMind matcher, the SciDataSailor QA matcher, the DataMind
self-consistency pre-check; :mod:`datadojo.compare.core` behind all three) is tested against this table,
and ``benchmarks/scoring_rules.py`` rewrites real references the same ways. Each pair records:

* ``prediction`` / ``reference``: the two answers (the reference as a dataset's answer file holds it);
* ``correct``: the careful grader's verdict under the papers' criteria — DataMind §3.2 and App. I.4
  (numbers within 3 % of each other after unit conversion, semantic equivalence, completeness) and
  SciDataSailor App. B.2.3 (a wrong entity scores 0);
* ``decided``: whether a rule can be certain of it (``False``: a judge must look — a hedge, a range, a
  missing name, a percent against a bare figure read as points);
* ``consistent``: what the self-consistency pre-check must answer for the pair as two samples:
  ``True`` (consistent, no judge) only for a certain match whose answers differ in the number's form
  alone; ``None`` (ask the judge) for everything else — the rule never calls readable answers inconsistent;
* ``section``: the rule of the papers (or of DataDojo, named as such) the verdict follows;
* ``kind``: the way of writing it exercises (``percent``, ``tolerance``, ``context``, ``hedge``,
  ``magnitude``, ``sign``, ``locale``, ``units``, ``entity``, ``rounding``; issue 39: ``label``,
  ``direction``, ``date``, ``signed change``, ``list``, ``yes-no``, ``filler``, ``negation``);
* ``question``: the question, where the verdict depends on it (its words account for the reference's,
  it asks for an order); ``None`` for a pair graded without one.

Tolerance for the table: 3 % (DataMind's); the scientific matcher is run at the same tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ANSWER_PAIRS", "TOLERANCE", "AnswerPair", "careful_verdict"]

#: The relative tolerance every rule is run at on this table (DataMind §3.2).
TOLERANCE = 0.03

_DM = "DataMind §3.2 / App. I.4 judge: numbers within 3% after unit conversion"
_DM_SEM = "DataMind App. I.4 judge: semantic equivalence and completeness"
_SDS = "SciDataSailor App. B.2.3 rubric: a wrong entity scores 0"


@dataclass(frozen=True)
class AnswerPair:
    """One adversarial pair (module docstring)."""

    prediction: str
    reference: str
    correct: bool
    decided: bool
    consistent: bool | None
    section: str
    kind: str
    question: str | None = None


def _p(
    prediction: str,
    reference: str,
    correct: bool,
    decided: bool,
    kind: str,
    section: str = _DM,
    consistent: bool | None = None,
    question: str | None = None,
) -> AnswerPair:
    return AnswerPair(prediction, reference, correct, decided, consistent, section, kind, question)


ANSWER_PAIRS: tuple[AnswerPair, ...] = (
    # percent: against a percent as percents, against a bare figure as a fraction
    _p("0.125%", "12.5%", False, True, "percent"),
    _p("125%", "12.5%", False, True, "percent"),
    _p("12.5%", "0.125", True, True, "percent", consistent=True),
    _p("0.125", "12.5%", True, True, "percent", consistent=True),
    _p("12.50 %", "12.5%", True, True, "percent", consistent=True),
    _p("5%", "5", True, False, "percent", "DataMind App. I.4 (percent vs points: the question decides)"),
    # the tolerance boundary is inclusive (1.03 - 1.0 = 0.030000000000000027 in floats)
    _p("1.03", "1.0", True, True, "tolerance", consistent=True),
    _p("0.97", "1.0", True, True, "tolerance", consistent=True),
    _p("1.031", "1.0", False, True, "tolerance"),
    _p("45.27", "45.3", True, True, "rounding", consistent=True),
    _p("45", "45.3", True, True, "rounding", consistent=True),
    # the number that answers, not a count, sample size, row number, year or aside
    _p("The mean is 45.3 (n=100)", "45.3", True, True, "context"),
    _p("Row 17 has the maximum, 98.6", "98.6", True, True, "context"),
    _p("There are 120 rows; the median is 7.5", "7.5", True, True, "context"),
    _p("In 2020 the total was 1,204", "1204", True, True, "context"),
    _p("45.3 (95% CI 40.1 to 50.2)", "45.3", True, True, "context"),
    _p("The mean over 12 groups is 3.3", "12", False, True, "context"),
    # hedges, ranges, alternatives and bounds that merely contain the value
    _p("Between 40 and 46", "46", False, False, "hedge", _DM_SEM),
    _p("40-46", "46", False, False, "hedge", _DM_SEM),
    _p("45.3 or 50", "45.3", False, False, "hedge", _DM_SEM),
    _p("around 45, or maybe 46", "46", False, False, "hedge", _DM_SEM),
    _p("at least 46", "46", False, False, "hedge", _DM_SEM),
    # magnitudes
    _p("1.2M", "1200000", True, True, "magnitude", consistent=True),
    _p("1.2 million", "1,200,000", True, True, "magnitude", consistent=True),
    _p("$3.4bn", "3400000000", True, True, "magnitude", consistent=True),
    _p("5k", "5000", True, True, "magnitude", consistent=True),
    _p("1.2M", "1.2", False, True, "magnitude"),
    # signs and exponents
    _p("-5", "5", False, True, "sign"),
    _p("−0.82", "-0.82", True, True, "sign", consistent=True),
    _p("0.8 (strong positive correlation)", "-0.8 (strong negative correlation)", False, True, "sign"),
    _p("3.14e-2", "0.0314", True, True, "sign", consistent=True),
    _p("3.14e2", "3.14e-2", False, True, "sign"),
    _p("1.5", "15", False, True, "sign"),
    # thousands separators and decimal commas of other locales
    _p("1.234,5", "1234.5", True, True, "locale", consistent=True),
    _p("1,234.5", "1234.5", True, True, "locale", consistent=True),
    _p("1\u202f234,5", "1234.5", True, True, "locale", consistent=True),
    _p("0,125", "0.125", True, True, "locale", consistent=True),
    # units restated and converted
    _p("45.30 kg", "45.3 kg", True, True, "units", consistent=True),
    _p("45300 g", "45.3 kg", True, True, "units", consistent=True),
    _p("45.3 m", "45.3 kg", False, True, "units"),
    # names beside the right number
    _p("Q1: 50.2", "Q3: 50.2", False, True, "entity", _SDS),
    _p("Q3 has the highest sales: 50.2", "Q3: 50.2", True, True, "entity", _SDS),
    _p("Store_7 ranks first with 830", "Store_12 ranks first with 830", False, True, "entity", _SDS),
    _p("Site_3: 12.4 mg/L", "Site_7: 12.4 mg/L", False, True, "entity", _SDS),
    _p("b.csv", "a.csv", False, True, "entity", _SDS),
    _p(
        "The warmest month is July with 25.3 °C",
        "The warmest month is January with 25.3 °C",
        False,
        True,
        "entity",
        _SDS,
    ),
    _p("25.3 °C", "January, 25.3 °C", False, False, "entity", _DM_SEM),
    # the reference's own range or score is not a hedge; a list glued by commas is still its items
    # (TableBench references, benchmarks/scoring_rules.py)
    _p("The answer is nicosia (cyp), 3 - 0.", "nicosia (cyp), 3 - 0", True, True, "hedge", _DM_SEM),
    _p("The answer is 1982,Limerick.", "1982,Limerick", True, True, "context", _DM_SEM),
    # --- issue 39: a rule decides only what it fully read --------------------------------------------
    # labels of any kind beside the right number: a complementary label is certain, an open name is not
    _p("France, with 1,200 customers", "Germany: 1200", False, False, "label", _SDS),
    _p("Male passengers had a higher survival rate: 0.74", "female: 0.74", False, True, "label", _SDS),
    _p("Product B sold 340 units", "Product A: 340", False, True, "label", _SDS),
    _p("Germany has 1,200 customers", "Germany: 1200", True, True, "label", _SDS),
    _p("Women: 0.74", "female: 0.74", True, True, "label", _DM_SEM),
    _p("1200", "Germany: 1200", True, True, "label", _SDS, question="How many customers does Germany have?"),
    _p("1200", "Germany: 1200", False, False, "label", _DM_SEM),
    _p("The median is 3.2 and the mean is 3.0", "mean 3.2, median 3.0", False, False, "label", _DM_SEM),
    _p("The mean is 3.2 and the median is 3.0", "mean 3.2, median 3.0", True, True, "label", _DM_SEM),
    _p("Males", "male", True, True, "label", _DM_SEM),
    _p("Germany: 1200 orders", "Germany: 1200 customers", False, False, "label", _DM_SEM),
    _p("The answer is Paris, France.", "Paris", True, False, "label", _DM_SEM),
    # direction and polarity words
    _p("Sales increased in 2020.", "Sales decreased in 2020.", False, True, "direction", _DM_SEM),
    _p("Sales rose in 2020", "Sales increased in 2020", True, True, "direction", _DM_SEM),
    _p("Revenue is higher in Q2 than in Q1", "Revenue is lower in Q2 than in Q1", False, True, "direction", _DM_SEM),
    _p("Women were more likely to survive", "Women were less likely to survive", False, True, "direction", _DM_SEM),
    _p("The correlation is positive", "The correlation is negative", False, True, "direction", _DM_SEM),
    _p("negative correlation (-0.42)", "-0.42", True, True, "direction"),
    _p("Sales did not decrease in 2020", "Sales decreased in 2020", False, False, "negation", _DM_SEM),
    # yes/no, also inside a sentence
    _p("No, it did not", "no", True, True, "yes-no", _DM_SEM),
    _p("Yes.", "yes", True, True, "yes-no", _DM_SEM, consistent=True),
    _p("Yes, the difference is significant (p = 0.003)", "yes", True, True, "yes-no", _DM_SEM),
    _p("There is no significant difference", "yes", False, False, "yes-no", _DM_SEM),
    _p("Yes and no", "yes", False, False, "yes-no", _DM_SEM),
    _p("No significant difference", "Yes, the difference is significant", False, True, "yes-no", _DM_SEM),
    # harmless words around a number stay decided
    _p("The mean is 4.5", "4.5", True, True, "filler"),
    _p("approximately 4.5 units", "4.5", True, True, "filler"),
    # dates in common formats, with a weekday; day/month order ambiguous when both are at most 12
    _p("2021-03-15", "March 15, 2021", True, True, "date", _DM_SEM, consistent=True),
    _p("March 15, 2021", "2021-03-15", True, True, "date", _DM_SEM, consistent=True),
    _p("15 March 2021", "2021-03-15", True, True, "date", _DM_SEM, consistent=True),
    _p("03/15/2021", "2021-03-15", True, True, "date", _DM_SEM, consistent=True),
    _p("Monday, March 15, 2021", "2021-03-15", True, True, "date", _DM_SEM, consistent=True),
    _p("The peak was on 2021-03-15", "March 15, 2021", True, True, "date", _DM_SEM),
    _p("04/03/2021", "2021-03-04", True, False, "date", _DM_SEM),
    _p("2021-03-16", "March 15, 2021", False, True, "date", _DM_SEM),
    _p("March 2021", "March 15, 2021", False, True, "date", _DM_SEM),
    # signed changes written in words
    _p("Revenue fell by 5.3%.", "-5.3%", True, True, "signed change"),
    _p("down 5.3%", "-5.3%", True, True, "signed change"),
    _p("a decrease of 5.3%", "-5.3%", True, True, "signed change"),
    _p("Sales dropped 5.3%", "-5.3%", True, True, "signed change"),
    _p("Revenue rose by 5.3%", "-5.3%", False, True, "signed change"),
    _p("Revenue fell by 5.3%", "5.3%", True, True, "signed change", question="By how much did revenue fall?"),
    _p("Revenue rose by 5.3%", "5.3%", False, True, "signed change", question="By how much did revenue fall?"),
    _p("Revenue fell by 5.3%", "5.3%", True, False, "signed change"),
    # lists: sets unless the question asks for an order, a preamble set aside, a longer list wrong
    _p("The top 3 products are Apples, Bananas, and Cherries.", "Apples, Bananas, Cherries", True, True, "list", _DM_SEM),
    _p("Cherries, Apples, Bananas", "Apples, Bananas, Cherries", True, True, "list", _DM_SEM),
    _p("1. Apples\n2. Bananas\n3. Cherries", "Apples, Bananas, Cherries", True, True, "list", _DM_SEM),
    _p("Apples, Bananas, Cherries, Dates", "Apples, Bananas, Cherries", False, True, "list", _DM_SEM),
    _p("Apples and Bananas", "Apples, Bananas, Cherries", False, True, "list", _DM_SEM),
    _p(
        "Cherries, Apples, Bananas", "Apples, Bananas, Cherries", False, True, "list", _DM_SEM,
        question="Rank the top 3 products by sales, in order.",
    ),
    _p("3, 5, 7", "3, 5", False, True, "list"),
    # units and percent against a fraction
    _p("1.2 km", "1200 m", True, True, "units", consistent=True),
    _p("3 h", "180 min", True, True, "units", consistent=True),
    _p("98.6 °F", "37 °C", True, True, "units", consistent=True),
    _p("45%", "0.45", True, True, "percent", consistent=True),
)  # fmt: skip


def careful_verdict(prediction: str, reference: str) -> bool | None:
    """The table's verdict on a pair, ``None`` when the pair is not in the table (for judge doubles)."""
    for pair in ANSWER_PAIRS:
        if pair.prediction == prediction and pair.reference == reference:
            return pair.correct
    return None
