"""The one place that chooses and computes a trajectory's reward: rewards by name, built from weighted parts.

Why one registry: the eval harness, ``train rl``, the recipes, the verl agent loop and TRL's ``rollout_func``
each used to pick a reward with their own ``if task.answer_kind == "envlunch"``, so a reward could differ by
consumer. Now every consumer calls :func:`score_pairs` (or :func:`reward_for_task`), and
``scripts/parity_table.py`` checks that they all give the same number to 1e-9.

**A reward** is a :class:`Reward` registered by name (:func:`register_reward`, case-insensitive, like
benchmarks, losses and dialects): ``await reward.score(pairs)`` gives one :class:`RewardResult` per
``(task, trajectory)`` pair. Its ``total`` is the sum of named, weighted parts,
``total = Σ_p weight_p · value_p``, and ``parts`` holds each weighted contribution, so a user sees which
part moved; ``details`` keeps the quantities the parts came from (r_format, m_min, t, …).

**Built-ins** (:mod:`datadojo.reward.builtin`):

* ``datamind`` — DataMind §4 as a sum: ``answer`` (weight 1, r_answer), ``length`` (weight 1,
  r_answer·(r_length − 1), the length penalty of a correct answer) and ``format`` (weight 0.1,
  −(1 − r_answer)(1 − r_format): the −0.1 of a wrong, malformed trajectory). The sum is the paper's R. The
  answer part is decided by the task's benchmark's official rule when the task names one (the
  prediction as ``datadojo eval`` reads it, :func:`~datadojo.reward.answers.predicted_answer`), else by
  the tolerant matcher;
* ``judge`` — ``datamind`` with an LLM judge deciding the answer part (``RewardSpec.judge``);
* ``scientific`` — ``datamind`` with SciDataSailor's scientific QA matcher deciding the answer part;
* ``benchmark`` — one part, ``benchmark`` (weight 1): the credit the task's benchmark's official rule gives;
* ``envlunch`` — EnvLunch Eq. 4 as a sum: ``agreement`` (weight 1, min_k m) and ``brevity`` (weight w,
  (1 − t/t_max)·min_k m); w is the task's (0.5, the paper's).

**The choice** (:func:`reward_for_task`): ``RewardSpec.name`` when set; otherwise an EnvLunch task
(``answer_kind == "envlunch"``) gets ``envlunch``, a spec with a judge gets ``judge``, any other task
``datamind``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from datadojo.registry import Registry
from datadojo.reward.base import Reward, RewardResult, RewardSpec, WeightedPart, weighted_result
from datadojo.reward.builtin import (
    DATAMIND_PARTS,
    ENVLUNCH_PARTS,
    AnswerPartReward,
    BenchmarkRuleReward,
    EnvLunchAgreementReward,
    judge_for,
    official_check,
    scientific_check,
)
from datadojo.types import Task, Trajectory

if TYPE_CHECKING:
    from datadojo.reward.envlunch import ScoreRecord

__all__ = [
    "BUILTIN_PARTS",
    "Reward",
    "RewardFactory",
    "RewardResult",
    "RewardSpec",
    "WeightedPart",
    "aclose_rewards",
    "choose_reward_name",
    "envlunch_records",
    "register_reward",
    "reward_for_task",
    "reward_names",
    "reward_problems",
    "score_pairs",
    "score_pairs_sync",
    "spec_for_cli",
    "weighted_result",
]


RewardFactory = Callable[[RewardSpec], Reward]

#: The built-in rewards' part names, in a fixed order (per-part means in ``train rl``'s metrics).
BUILTIN_PARTS: tuple[str, ...] = (*DATAMIND_PARTS, *ENVLUNCH_PARTS, "benchmark")

_REWARDS: Registry[RewardFactory] = Registry("reward", listing="known")
_BUILT: dict[tuple[str, str, int], tuple[Any, Reward]] = {}


def register_reward(name: str, factory: RewardFactory, *, replace: bool = False) -> None:
    """Register ``factory`` (a :class:`RewardSpec` → :class:`Reward`) as ``name``."""
    _REWARDS.register(name, factory, replace=replace)
    for key in [k for k in _BUILT if k[0] == _REWARDS.key(name)]:
        del _BUILT[key]


def reward_names() -> list[str]:
    """Registered reward names, sorted."""
    return _REWARDS.names()


def choose_reward_name(task: Task, spec: RewardSpec | None = None) -> str:
    """The name of the reward ``task`` gets under ``spec`` (module docstring, "The choice")."""
    spec = spec or RewardSpec()
    if spec.name:
        return spec.name
    if task.answer_kind == "envlunch":
        return "envlunch"
    if spec.judge:
        return "judge"
    return "datamind"


def reward_for_task(task: Task, spec: RewardSpec | None = None) -> Reward:
    """THE one place that chooses a task's reward: the registered reward :func:`choose_reward_name` names,
    built from ``spec`` (built once per spec and reused, so a judge's backend and an EnvLunch task cache
    live until :func:`aclose_rewards` closes them)."""
    spec = spec or RewardSpec()
    name = choose_reward_name(task, spec)
    factory = _REWARDS.get(name)
    key = (_REWARDS.key(name), spec.model_dump_json(), id(spec.benchmark))
    built = _BUILT.get(key)
    if built is None:
        built = (spec.benchmark, factory(spec))
        _BUILT[key] = built
    return built[1]


async def aclose_rewards(spec: RewardSpec | None = None) -> None:
    """Close what the rewards built for ``spec`` opened — a judge's model backend (an HTTP client session)
    — and forget them, so that the next use builds them afresh. Called by whoever scored under a spec when
    it is done (:meth:`DataEnv.aclose <datadojo.env.DataEnv.aclose>`, :func:`score_pairs_sync` on its own
    loop): a session outlives neither its event loop nor its user. Rewards that hold nothing to close
    (no ``aclose``) stay built. A consumer still scoring under the same spec gets a fresh judge.
    """
    spec = spec or RewardSpec()
    built_for = (spec.model_dump_json(), id(spec.benchmark))
    for key in [k for k in _BUILT if k[1:] == built_for]:
        close = getattr(_BUILT[key][1], "aclose", None)
        if close is not None:
            del _BUILT[key]
            await close()


async def score_pairs(
    pairs: Sequence[tuple[Task, Trajectory]], spec: RewardSpec | None = None
) -> list[RewardResult]:
    """The reward of every ``(task, trajectory)`` pair, in order: each pair is scored by the reward
    :func:`reward_for_task` chooses for its task, batched per reward."""
    for i, (task, traj) in enumerate(pairs):
        if traj.task_id != task.id:
            raise ValueError(f"pair {i}: trajectory of task {traj.task_id!r} scored against task {task.id!r}")
    groups: dict[int, tuple[Reward, list[int]]] = {}
    for i, (task, _) in enumerate(pairs):
        reward = reward_for_task(task, spec)
        groups.setdefault(id(reward), (reward, []))[1].append(i)
    out: list[RewardResult | None] = [None] * len(pairs)
    scored = await asyncio.gather(*(r.score([pairs[i] for i in idx]) for r, idx in groups.values()))
    for (reward, idx), results in zip(groups.values(), scored, strict=True):
        if len(results) != len(idx):
            raise ValueError(f"reward {reward.name} returned {len(results)} results for {len(idx)} pairs")
        for i, r in zip(idx, results, strict=True):
            out[i] = r
    return [r for r in out if r is not None]


def score_pairs_sync(
    pairs: Sequence[tuple[Task, Trajectory]], spec: RewardSpec | None = None
) -> list[RewardResult]:
    """:func:`score_pairs` for synchronous callers (runs its own event loop; refused inside a running one,
    where the caller must ``await score_pairs``)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_score_then_close(pairs, spec))
    raise RuntimeError("score_pairs_sync was called inside a running event loop; await score_pairs instead")


async def _score_then_close(
    pairs: Sequence[tuple[Task, Trajectory]], spec: RewardSpec | None
) -> list[RewardResult]:
    try:
        return await score_pairs(pairs, spec)
    finally:  # a judge session opened on this loop would be dead (and unclosed) once it ends
        await aclose_rewards(spec)


def reward_problems(tasks: Sequence[Task], spec: RewardSpec | None = None) -> list[str]:
    """What would stop the chosen reward from scoring each task, found before any episode runs: an
    answer-checked reward on a task without a reference answer, the envlunch reward without the task file
    its copies lie beside. One line per task at fault."""
    spec = spec or RewardSpec()
    out = []
    for task in tasks:
        reward = reward_for_task(task, spec)
        if isinstance(reward, EnvLunchAgreementReward):
            try:
                reward.info(task)
            except ValueError as exc:  # ConfigError too
                out.append(f"{task.id}: {exc}")
        elif isinstance(reward, AnswerPartReward | BenchmarkRuleReward) and task.answer is None:
            out.append(f"{task.id}: no answer to reward against (reward {reward.name})")
    return out


def envlunch_records(
    pairs: Sequence[tuple[Task, Trajectory]], spec: RewardSpec | None = None, *, executor: Any = None
) -> list[ScoreRecord]:
    """The envlunch reward's per-submission records (agreement in each copy, t, errors) for the warm-up
    reports: the same scoring :func:`score_pairs` does, with the detail a report shows. ``executor``
    replaces the spec's (a progress-counting one)."""
    if not pairs:
        return []
    reward = reward_for_task(pairs[0][0], (spec or RewardSpec()).replace(name="envlunch"))
    assert isinstance(reward, EnvLunchAgreementReward), reward
    return reward.records(pairs, executor=executor)


def spec_for_cli(
    name: str | None,
    *,
    judge: str | None = None,
    tasks_path: str | Path | None = None,
    cache_dir: str | Path | None = None,
) -> RewardSpec:
    """The spec the CLI builds from ``--reward NAME --judge SPEC`` and the task file (``auto`` or ``None``:
    chosen per task); an unknown name is the registry's one-line error here, before anything runs."""
    if name is None or name.lower() == "auto":
        name = None
    else:
        _REWARDS.get(name)
    return RewardSpec(
        name=name,
        judge=judge,
        tasks_path=str(tasks_path) if tasks_path is not None else None,
        cache_dir=str(cache_dir) if cache_dir is not None else None,
    )


register_reward("datamind", lambda spec: AnswerPartReward("datamind", spec, official_check(spec.benchmark)))
register_reward(
    "judge",
    lambda spec: AnswerPartReward("judge", spec, official_check(spec.benchmark), judge=judge_for(spec)),
)
register_reward("scientific", lambda spec: AnswerPartReward("scientific", spec, scientific_check))
register_reward("benchmark", BenchmarkRuleReward)
register_reward("envlunch", EnvLunchAgreementReward)
