"""How far two judges agree, and how both relate to ROUGE-L (DataMind §5.1, Fig. 5 and App. G.4).

DataMind validates its GPT-4o-mini judge by re-scoring with Qwen-2.5-72B (Pearson r = 0.96 across the
evaluated models, Fig. 5) and by comparing with ROUGE-L on descriptive TableBench answers (App. G.4,
Table 7). :func:`agreement_report` computes both views from per-item verdicts:

* **item level**: the 2×2 confusion matrix of the two judges' 0/1 scores, raw agreement, Cohen's κ and the
  Pearson correlation of the two score vectors (the φ coefficient for binary scores);
* **group level** (when each item names its system/model): the accuracy each judge gives each group, the
  mean ROUGE-L of the group's answers against the references, and the Pearson correlations judge A vs
  judge B and judge A vs ROUGE-L across groups. This is the figure DataMind reports.

A correlation over constant data is undefined and reported as ``None``, never as 0 or NaN.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from datadojo.compare.text import rouge_l

__all__ = ["AgreementReport", "GroupAgreement", "agreement_report", "cohen_kappa", "pearson"]


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson's r of two equally long sequences; ``None`` when fewer than 2 points or a constant side."""
    if len(x) != len(y):
        raise ValueError(f"pearson: sequences differ in length ({len(x)} vs {len(y)})")
    n = len(x)
    if n < 2:
        return None
    mx, my = sum(x) / n, sum(y) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    if sxx == 0 or syy == 0:
        return None
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def cohen_kappa(a: Sequence[int], b: Sequence[int]) -> float | None:
    """Cohen's κ of two 0/1 raters; ``None`` when chance agreement is 1 (both raters constant and equal)."""
    n = len(a)
    if n == 0:
        return None
    po = sum(x == y for x, y in zip(a, b, strict=True)) / n
    pa, pb = sum(a) / n, sum(b) / n
    pe = pa * pb + (1 - pa) * (1 - pb)
    if pe == 1:
        return None
    return (po - pe) / (1 - pe)


@dataclass(frozen=True)
class GroupAgreement:
    """One system's accuracy under each judge and its mean ROUGE-L (``None`` without texts)."""

    group: str
    n: int
    accuracy_a: float
    accuracy_b: float
    rouge_l: float | None


@dataclass(frozen=True)
class AgreementReport:
    """Item-level and group-level agreement between judge A and judge B (module docstring)."""

    n: int
    confusion: dict[str, int]
    agreement: float
    cohen_kappa: float | None
    pearson_items: float | None
    rouge_l_mean: float | None
    groups: list[GroupAgreement] = field(default_factory=list)
    pearson_groups: float | None = None
    pearson_a_vs_rouge: float | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "n": self.n,
            "confusion": dict(self.confusion),
            "agreement": self.agreement,
            "cohen_kappa": self.cohen_kappa,
            "pearson_items": self.pearson_items,
            "rouge_l_mean": self.rouge_l_mean,
            "groups": [g.__dict__ for g in self.groups],
            "pearson_groups": self.pearson_groups,
            "pearson_a_vs_rouge": self.pearson_a_vs_rouge,
        }

    def to_markdown(self, name_a: str = "judge A", name_b: str = "judge B") -> str:
        """A short Markdown summary: the confusion matrix, the statistics, and the per-group table."""

        def f(v: float | None) -> str:
            return "n/a" if v is None else f"{v:.3f}"

        c = self.confusion
        lines = [
            f"Items: {self.n}; agreement {self.agreement:.1%}; Cohen's kappa {f(self.cohen_kappa)}; "
            f"Pearson (items) {f(self.pearson_items)}; mean ROUGE-L {f(self.rouge_l_mean)}",
            "",
            f"| {name_a} \\ {name_b} | 1 | 0 |",
            "|---|---|---|",
            f"| 1 | {c['1/1']} | {c['1/0']} |",
            f"| 0 | {c['0/1']} | {c['0/0']} |",
        ]
        if self.groups:
            lines += [
                "",
                f"| group | n | {name_a} | {name_b} | ROUGE-L |",
                "|---|---|---|---|---|",
                *(
                    f"| {g.group} | {g.n} | {g.accuracy_a:.1%} | {g.accuracy_b:.1%} | {f(g.rouge_l)} |"
                    for g in self.groups
                ),
                "",
                f"Pearson across groups: {name_a} vs {name_b} {f(self.pearson_groups)}; "
                f"{name_a} vs ROUGE-L {f(self.pearson_a_vs_rouge)}",
            ]
        return "\n".join(lines)


def _binary(name: str, scores: Sequence[int]) -> list[int]:
    out = []
    for i, s in enumerate(scores):
        if s not in (0, 1):
            raise ValueError(f"{name}[{i}]: scores must be 0 or 1, got {s!r}")
        out.append(int(s))
    return out


def agreement_report(
    scores_a: Sequence[int],
    scores_b: Sequence[int],
    *,
    groups: Sequence[str] | None = None,
    predictions: Sequence[str | None] | None = None,
    references: Sequence[str] | None = None,
) -> AgreementReport:
    """Agreement between two judges' 0/1 verdicts on the same items (module docstring).

    ``groups`` names each item's system/model for the group-level view; ``predictions`` and
    ``references`` (both or neither) add ROUGE-L. All sequences must have the same length.
    """
    a, b = _binary("scores_a", scores_a), _binary("scores_b", scores_b)
    n = len(a)
    for name, seq in (
        ("scores_b", b),
        ("groups", groups),
        ("predictions", predictions),
        ("references", references),
    ):
        if seq is not None and len(seq) != n:
            raise ValueError(f"{name} has {len(seq)} items, scores_a has {n}")
    if (predictions is None) != (references is None):
        raise ValueError("give both predictions and references (for ROUGE-L) or neither")
    if n == 0:
        raise ValueError("no items to compare")
    confusion = {"1/1": 0, "1/0": 0, "0/1": 0, "0/0": 0}
    for x, y in zip(a, b, strict=True):
        confusion[f"{x}/{y}"] += 1
    rouge: list[float] | None = None
    if predictions is not None and references is not None:
        rouge = [rouge_l(p or "", r) for p, r in zip(predictions, references, strict=True)]
    group_rows: list[GroupAgreement] = []
    if groups is not None:
        order: list[str] = []
        idx: dict[str, list[int]] = {}
        for i, g in enumerate(groups):
            if g not in idx:
                order.append(g)
                idx[g] = []
            idx[g].append(i)
        for g in order:
            ii = idx[g]
            group_rows.append(
                GroupAgreement(
                    group=g,
                    n=len(ii),
                    accuracy_a=sum(a[i] for i in ii) / len(ii),
                    accuracy_b=sum(b[i] for i in ii) / len(ii),
                    rouge_l=None if rouge is None else sum(rouge[i] for i in ii) / len(ii),
                )
            )
    acc_a = [g.accuracy_a for g in group_rows]
    return AgreementReport(
        n=n,
        confusion=confusion,
        agreement=(confusion["1/1"] + confusion["0/0"]) / n,
        cohen_kappa=cohen_kappa(a, b),
        pearson_items=pearson([float(x) for x in a], [float(y) for y in b]),
        rouge_l_mean=None if rouge is None else sum(rouge) / n,
        groups=group_rows,
        pearson_groups=pearson(acc_a, [g.accuracy_b for g in group_rows]) if group_rows else None,
        pearson_a_vs_rouge=(
            pearson(acc_a, [g.rouge_l for g in group_rows if g.rouge_l is not None])
            if group_rows and rouge is not None
            else None
        ),
    )
