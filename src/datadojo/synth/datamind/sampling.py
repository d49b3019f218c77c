"""Stage 4 (and the sampling half of stage 6): N trajectories per query through the agent runner.

DataMind §3.2 ("Knowledge-Augmented Trajectory Sampling"): for each query, N = 3 trajectories are sampled
from the expert with the category's procedural knowledge *k* in the prompt, {y_i} ~ π(·|k, x). Reflection
(Eq. 3) samples N more from π(·|k, x, {y_i}, c): the same task with the earlier attempts and the judge's
critique *c* added to the prompt.

Nothing here runs an episode itself: :func:`datadojo.agent.runner.run_rollouts` does (concurrency, sandbox
pool, resume by ``(task_id, sample)``), in this process or on a remote executor (``--executor ray``: each
node builds the teacher's client from its spec string and its own sandbox pool; the round's sample numbers,
``extra.round`` and the retry rule are applied by this process, which alone writes ``trajectories.jsonl``). Round r uses samples ``r·N … r·N + N − 1`` and tags each trajectory
with ``extra.round = r``. *k* goes into ``Task.extra["workflow"]`` and the reflection context into
``Task.extra["feedback"]``; :func:`datadojo.env.prompts.build_prompt` renders both as prompt sections.
``use_workflow = False`` leaves *k* out, so users can measure what it adds (the paper never did).

An episode that failed outside the teacher's answer — the server kept failing (``llm_error``) or no sandbox
could be made (``env_error``) — says nothing about the query: the judge leaves its group alone and the next
run of the stage removes it from ``trajectories.jsonl`` (temporary file + rename) and samples it again, as
the query stage retries failed requests. A finished stage without such failures still sends no request.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from datadojo.agent.runner import RolloutSummary, run_rollouts
from datadojo.env import AgentConfig, SandboxFactory
from datadojo.env.prompts import GUIDANCE_SECTIONS
from datadojo.executor import Executor, ExecutorError, require_spec
from datadojo.llm.base import ChatBackend
from datadojo.runs import UsageLedger
from datadojo.sandbox.config import SandboxConfig
from datadojo.synth.datamind import prompts
from datadojo.synth.datamind.config import DataMindConfig
from datadojo.synth.datamind.store import Paths
from datadojo.synth.datamind.taxonomy import Taxonomy
from datadojo.types import Task, Trajectory

__all__ = [
    "FAILED_STOPS",
    "agent_config",
    "agent_task",
    "check_travel",
    "describe_attempts",
    "plain_prompt",
    "reflection_feedback",
    "sample_round",
]

log = logging.getLogger(__name__)

#: Stop reasons of episodes that failed outside the teacher's answer; a rerun samples them again.
FAILED_STOPS: frozenset[str] = frozenset({"llm_error", "env_error"})


def agent_config(config: DataMindConfig) -> AgentConfig:
    """The agent loop settings of the teacher's episodes (:func:`.prompts.agent_config`)."""
    return prompts.agent_config(config)


def agent_task(query: Task, taxonomy: Taxonomy, config: DataMindConfig, feedback: str | None = None) -> Task:
    """The task the teacher runs for ``query``: :func:`.prompts.sampling_task` (the policy's task plus *k*,
    the answer form and the reflection feedback; no duplicate *d*)."""
    return prompts.sampling_task(query, taxonomy, config, feedback)


def plain_prompt(prompt: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The opening messages without the guidance sections (*k*, reflection feedback) sampling added.

    :func:`datadojo.env.prompts.build_prompt` appends those sections last in the system message, so the
    plain prompt is the system message cut before the first section title. The trained agent is prompted
    without them (DataMind §3.2: *k* steers the teacher during synthesis only).
    """
    out = [dict(m) for m in prompt]
    for m in out:
        if m.get("role") != "system" or not isinstance(m.get("content"), str):
            continue
        cuts = [i for _, title in GUIDANCE_SECTIONS if (i := m["content"].find(f"\n\n{title}\n")) >= 0]
        if cuts:
            m["content"] = m["content"][: min(cuts)].rstrip()
    return out


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def describe_attempts(trajectories: Sequence[Trajectory], budget_chars: int) -> str:
    """The attempts as text for the judge and for reflection: per attempt its steps (code) and answer.

    Each attempt gets ``budget_chars`` for its steps (latest kept when cut, since the last steps lead to the
    answer); the final answer is always shown in full.
    """
    blocks = []
    for i, t in enumerate(trajectories, start=1):
        steps = [
            tr.action.text.strip() for tr in t.turns if tr.action.kind in ("code", "sql") and tr.action.text
        ]
        body = "\n---\n".join(steps)
        if len(body) > budget_chars:
            body = "…" + body[len(body) - budget_chars + 1 :] if budget_chars > 1 else ""
        answer = t.final_answer if t.final_answer is not None else f"(no final answer: {t.stop_reason})"
        parts = [f"### Attempt {i}"]
        if body:
            parts.append(f"Code it ran:\n{body}")
        parts.append(f"Final answer: {answer}")
        blocks.append("\n".join(parts))
    return "\n\n".join(blocks)


def reflection_feedback(previous: Sequence[Trajectory], critique: str, budget_chars: int) -> str:
    """The extra context of a reflection round: the earlier attempts {y_i} and the critique c (Eq. 3)."""
    return (
        f"Earlier attempts at this question disagreed.\n\n{describe_attempts(previous, budget_chars)}\n\n"
        f"### Reviewer's critique\n{_cut(critique.strip() or '(none)', 4000)}\n\n"
        "Solve the question again from the data, check the points the critique raises, and give one final answer."
    )


def check_travel(
    teacher: ChatBackend | str, executor: Executor | None, sandboxes: SandboxFactory | None
) -> ChatBackend | str:
    """``teacher`` as it will be sent: unchanged locally; on a remote executor the spec string, or an
    :class:`~datadojo.executor.ExecutorError` (exit 2) for what cannot travel (a backend object, a sandboxes
    factory of this process). Called before a stage reads or writes anything."""
    if executor is None or not executor.remote:
        return teacher
    if sandboxes is not None:
        raise ExecutorError(
            f"--executor {executor.name}: sampling builds its sandboxes on the nodes; a sandboxes "
            "factory of this process cannot travel (pass sandbox_config)"
        )
    return require_spec(teacher, executor, "teacher")


async def sample_round(
    tasks: Sequence[Task],
    teacher: ChatBackend | str,
    paths: Paths,
    config: DataMindConfig,
    round_: int,
    *,
    sandboxes: SandboxFactory | None = None,
    sandbox_config: SandboxConfig | None = None,
    executor: Executor | None = None,
    on_trajectory: Callable[[Trajectory, RolloutSummary], None] | None = None,
) -> tuple[RolloutSummary, UsageLedger]:
    """Sample N trajectories of every agent task for round ``round_`` into ``trajectories.jsonl`` (resumable).

    ``teacher``: a backend, or a model spec string (loaded by the runner). ``executor``: where the episodes
    run (default: this process, ``config.concurrency`` at a time). A remote one needs the teacher as a spec
    string and no ``sandboxes`` factory (an :class:`~datadojo.executor.ExecutorError`, exit 2, says so):
    every node builds its own client and a pool of ``config.concurrency`` sandboxes with ``sandbox_config``.
    """
    teacher = check_travel(teacher, executor, sandboxes)
    usage = paths.usage_ledger("sample" if round_ == 0 else "reflect")

    def counted(traj: Trajectory, summary: RolloutSummary) -> None:
        # Counted per trajectory as it is written (not from the summary at the end), so that the requests
        # of an interrupted round stay in usage.jsonl beside the trajectories they produced.
        usage.add(
            "teacher",
            requests=len(traj.turns),
            prompt_tokens=sum(t.tokens.prompt for t in traj.turns),
            completion_tokens=sum(t.tokens.completion for t in traj.turns),
            failed=int(traj.stop_reason in ("llm_error", "env_error")),
            check=False,
        )
        if on_trajectory is not None:
            on_trajectory(traj, summary)

    with usage:  # interrupted or failed: what was sent stays counted for the resumed run's totals
        summary = await run_rollouts(
            tasks,
            teacher,
            paths.trajectories,
            n_samples=config.n_samples,
            first_sample=round_ * config.n_samples,
            extra={"round": round_},
            config=agent_config(config),
            concurrency=config.concurrency,
            sandboxes=sandboxes,
            sandbox_config=sandbox_config,
            seed=config.seed,
            on_trajectory=counted,
            executor=executor,
            # this round's failed episodes (server or sandbox, not the teacher's answer) are sampled again
            retry_stop_reasons=FAILED_STOPS,
        )
    return summary, usage
