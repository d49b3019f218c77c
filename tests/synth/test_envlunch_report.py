"""The warm-up's headline figures: one definition, the same text in ``warmup score`` and on the page
(issue 25: the CLI said "mean R 0.669" where the page said "mean credit 47.10%")."""

from __future__ import annotations

from pathlib import Path

import pytest

from datadojo.cli import warmup as warmup_cli
from datadojo.reward.envlunch import ScoreRecord
from datadojo.synth.envlunch.report import headline, headline_rows, write_warmup_report
from datadojo.types import Trajectory


def _records() -> list[ScoreRecord]:
    # task a: two samples, one solved fast (R 1.375), one half right; task b: one sample, wrong
    return [
        ScoreRecord("a", 0, "sql", 1, 1.375, [1.0, 1.0], 4),
        ScoreRecord("a", 1, "sql", 1, 0.6, [0.5, 1.0], 8),
        ScoreRecord("b", 0, "pandas", 2, 0.0, [0.0, 0.0, 1.0], 3),
    ]


def test_headline_averages_per_task_then_over_tasks() -> None:
    h = headline(_records())
    assert h.n_tasks == 2 and h.n_trials == 3
    assert h.pass_at_1 == pytest.approx((0.5 + 0.0) / 2)
    assert h.mean_credit == pytest.approx(((1.0 + 0.5) / 2 + 0.0) / 2)
    assert h.mean_reward == pytest.approx(((1.375 + 0.6) / 2 + 0.0) / 2)
    with pytest.raises(ValueError):
        headline([])


def test_cli_and_page_show_the_same_headline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = _records()
    trajs = [
        Trajectory(task_id=r.task_id, sample=r.sample, stop_reason="answer", final_answer="SELECT 1")
        for r in records
    ]
    _html, md = write_warmup_report(tmp_path / "run", tmp_path / "tasks.jsonl", trajs, records)
    page = md.read_text()
    warmup_cli.console.width = 200
    warmup_cli._show_scores(records)
    printed = capsys.readouterr().out
    rows = headline_rows(headline(records))
    assert [label for label, _ in rows] == [
        "pass@1 (mean over trials)",
        "mean credit",
        "mean EnvLunch reward R (Eq. 4)",
    ]
    for label, text in rows:
        assert f"{label}: {text}" in printed
        line = next(ln for ln in page.splitlines() if label in ln)
        assert text in line, (label, text, line)
