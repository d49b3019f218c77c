"""verl (0.9.1) Hydra configs for DataMind §5.1 (``datamind``) and EnvLunch §4 (``envlunch``); pass
``--config-path`` :data:`DIR` ``--config-name datamind`` to ``python -m verl.trainer.main_ppo``."""

from __future__ import annotations

from pathlib import Path

DIR = str(Path(__file__).resolve().parent)
NAMES = ("datamind", "envlunch")
