"""γ follows DataMind's cosine schedule 0.9 → 0.05 (with an optional hold at the peak), or stays fixed."""

from __future__ import annotations

import math

import pytest

from datadojo.train.schedules import GAMMA_END, GAMMA_START, GammaSchedule


def test_paper_defaults_and_end_points() -> None:
    g = GammaSchedule(total_steps=101)
    assert (GAMMA_START, GAMMA_END) == (0.9, 0.05)
    assert g(0) == pytest.approx(0.9)
    assert g(100) == pytest.approx(0.05)  # the last step of a 101-step run
    assert g(500) == pytest.approx(0.05)  # stays at the valley afterwards
    assert g(50) == pytest.approx((0.9 + 0.05) / 2)  # cosine crosses the midpoint halfway


def test_cosine_values_by_hand() -> None:
    g = GammaSchedule(total_steps=5)  # progress 0, 1/4, 1/2, 3/4, 1
    for s in range(5):
        expected = 0.05 + 0.85 * 0.5 * (1 + math.cos(math.pi * s / 4))
        assert g(s) == pytest.approx(expected)
    values = [g(s) for s in range(5)]
    assert values == sorted(values, reverse=True)


def test_warmup_holds_the_peak() -> None:
    g = GammaSchedule(total_steps=12, warmup_steps=2)
    assert g(0) == g(1) == g(2) == pytest.approx(0.9)
    assert g(3) < 0.9
    assert g(11) == pytest.approx(0.05)


def test_fixed_and_linear() -> None:
    assert GammaSchedule.fixed(0.2)(0) == GammaSchedule.fixed(0.2)(10_000) == pytest.approx(0.2)
    lin = GammaSchedule(mode="linear", total_steps=3)
    assert [lin(s) for s in range(3)] == pytest.approx([0.9, 0.475, 0.05])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mode": "cosine"}, "total_steps"),
        ({"mode": "fixed"}, "value"),
        ({"mode": "fixed", "value": 1.5}, "value"),
        ({"total_steps": 5, "warmup_steps": 5}, "warmup"),
        ({"total_steps": 5, "start": 1.2}, "start"),
        ({"mode": "exp", "total_steps": 5}, "mode"),
    ],
)
def test_bad_schedules(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        GammaSchedule(**kwargs)


def test_negative_step() -> None:
    with pytest.raises(ValueError, match="step"):
        GammaSchedule(total_steps=3)(-1)
