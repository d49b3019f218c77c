"""The random seed of a trajectory's sandbox: reproducible per (task, sample), different between samples.

Agent code that samples rows (``df.sample()``, ``random.choice``, ``np.random``) must draw a stream of its
own in every trajectory: under GRPO the N samples of a task run through one pool, and with one seed per
sandbox they all saw the same "random" rows (issue 38, finding 4). The agent loop derives the seed from
the task id, the sample index and the run's seed and records it in ``Provenance.sandbox_seed``, so a
trajectory can be re-run with the same draws. Standard library only: the agent loop imports it.
"""

from __future__ import annotations

import hashlib
import random

__all__ = ["new_seed", "trajectory_seed"]

#: Seeds are below 2**31: numpy's legacy ``np.random.seed`` takes 32-bit values, ``random.seed`` any int.
SEED_RANGE = 2**31


def new_seed() -> int:
    """A fresh random seed, for a trajectory nobody seeded (different in every trajectory)."""
    return random.SystemRandom().randrange(SEED_RANGE)


def trajectory_seed(task_id: str, sample: int, run_seed: int | None = None) -> int:
    """The sandbox seed of one trajectory, from its task, its sample index and the run's seed.

    A hash, not ``run_seed + sample``: the samples of one task must draw different streams, and so must
    neighbouring tasks with the same sample index. BLAKE2, not ``hash()``, so that it does not depend on
    ``PYTHONHASHSEED``.
    """
    key = f"{'' if run_seed is None else int(run_seed)}\x1f{task_id}\x1f{int(sample)}".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") % SEED_RANGE
