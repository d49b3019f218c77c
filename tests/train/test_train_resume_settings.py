"""Training resume on the run kit (issue 23): a changed setting is the one ResumeError, naming was/now."""

from __future__ import annotations

import pytest

from datadojo.errors import ResumeError
from datadojo.train.modeling import TrainingError, check_resumable


def test_a_changed_nested_setting_is_a_resume_error_naming_old_and_new_values() -> None:
    # Before: a plain TrainingError that named only the top-level key ("optim"), not what changed in it.
    saved = {"model": "m", "optim": {"lr": 1e-5, "betas": [0.9, 0.95]}, "max_steps": 10}
    now = {"model": "m", "optim": {"lr": 2e-5, "betas": [0.9, 0.95]}, "max_steps": 20}
    with pytest.raises(ResumeError, match=r"in optim \(optim\.lr: was 1e-05, now 2e-05\)") as info:
        check_resumable(saved, now, "runs/sft")
    assert isinstance(info.value, TrainingError)
    check_resumable(saved, {**saved, "max_steps": 99, "save_every": 5}, "runs/sft")  # budgets may change
