"""Checkpoints a run can resume from, written so that a crash never leaves a half checkpoint behind.

A checkpoint is a folder ``<run>/checkpoints/step_NNNNNN`` holding accelerate's full training state
(model, optimizer, learning-rate scheduler, RNG states: ``Accelerator.save_state``), a loadable Hugging
Face checkpoint in ``model/`` (weights + tokenizer, for evaluation or ``hf:PATH``), and
``trainer_state.json`` (the step and whatever the trainer needs to continue its data order). It is written
under a ``.tmp`` name and renamed into place once complete; only the newest ``keep`` are kept.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

__all__ = ["CheckpointManager", "save_hf_model"]

_STEP_DIR = re.compile(r"^step_(\d+)$")
STATE_FILE = "trainer_state.json"


def save_hf_model(accelerator: Any, model: Any, tokenizer: Any, path: str | Path) -> Path:
    """Save ``model`` (unwrapped, full state dict gathered from DDP / FSDP / DeepSpeed) and ``tokenizer``.

    Written to ``path.tmp`` by the main process and renamed into place, so a reader never sees half a model.
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    state = accelerator.get_state_dict(model)
    if accelerator.is_main_process:
        if tmp.exists():
            shutil.rmtree(tmp)
        accelerator.unwrap_model(model).save_pretrained(tmp, state_dict=state, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    accelerator.wait_for_everyone()
    return path


class CheckpointManager:
    """Save / find / load the checkpoints of one run folder."""

    def __init__(self, run_dir: str | Path, *, keep: int = 2) -> None:
        if keep < 1:
            raise ValueError(f"keep must be >= 1, got {keep}")
        self.root = Path(run_dir) / "checkpoints"
        self.keep = keep

    def path(self, step: int) -> Path:
        return self.root / f"step_{step:06d}"

    def list(self) -> list[tuple[int, Path]]:
        """Complete checkpoints, oldest first."""
        if not self.root.is_dir():
            return []
        out = []
        for p in self.root.iterdir():
            m = _STEP_DIR.match(p.name)
            if m and p.is_dir() and (p / STATE_FILE).exists():
                out.append((int(m.group(1)), p))
        return sorted(out)

    def latest(self) -> tuple[Path, dict[str, Any]] | None:
        """The newest complete checkpoint and its trainer state, or ``None``."""
        items = self.list()
        if not items:
            return None
        path = items[-1][1]
        return path, json.loads((path / STATE_FILE).read_text(encoding="utf-8"))

    def save(self, accelerator: Any, model: Any, tokenizer: Any, step: int, state: dict[str, Any]) -> Path:
        """Write checkpoint ``step`` (all processes must call this; the main process writes files)."""
        final = self.path(step)
        tmp = final.with_name(final.name + ".tmp")
        if accelerator.is_main_process and tmp.exists():
            shutil.rmtree(tmp)
        accelerator.wait_for_everyone()
        accelerator.save_state(str(tmp))
        save_hf_model(accelerator, model, tokenizer, tmp / "model")
        if accelerator.is_main_process:
            (tmp / STATE_FILE).write_text(json.dumps({**state, "step": step}, indent=1), encoding="utf-8")
            if final.exists():
                shutil.rmtree(final)
            os.replace(tmp, final)
            for _, old in self.list()[: -self.keep]:
                shutil.rmtree(old, ignore_errors=True)
        accelerator.wait_for_everyone()
        return final

    def load(self, accelerator: Any, path: str | Path) -> dict[str, Any]:
        """Restore the training state saved in ``path`` and return its trainer state."""
        path = Path(path)
        accelerator.load_state(str(path))
        return json.loads((path / STATE_FILE).read_text(encoding="utf-8"))
