"""From a grown tree to data: trajectories anchored to the seed, QA pairs, merged meta references (§4.1, B.2.1).

* **Trajectories**: the ``trajectories_per_seed`` best leaves (by Q̂, deep enough for QC first) give root-to-leaf paths; the policy then
  writes the final ``<answer>`` to the *seed intent* (the final answer stays anchored to the seed), and the
  path becomes a :class:`~datadojo.types.Trajectory` in the ``sailor`` dialect, with each step's strategy in
  ``extra["strategies"]`` (action-type supervision) and its tree nodes in ``extra["nodes"]``.
* **QA** (§4.1 "Trajectory selection and QA synthesis"): from a verified trajectory, an evidence target from
  its observations, a question entailed by the seed, and the answer the trajectory supports.
* **Meta references** (B.2.1, in our words): the final answers of a seed's verified trajectories merged into
  one reference; a single candidate is its own reference.

Tasks use the SciDataSailor task format shared with ``datadojo eval scidata`` (``docs/sailor.md``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from datadojo.protocol import SAILOR
from datadojo.synth.sailor.explore import LLMCalls, path_messages, render_steps
from datadojo.synth.sailor.mcts import Node, Tree
from datadojo.synth.sailor.prompts import probe_thought, probe_turn
from datadojo.synth.sailor.seeds import Seed
from datadojo.synth.sailor.strategies import QAPair
from datadojo.types import Action, DataFile, Observation, Provenance, Task, Trajectory, Turn

__all__ = [
    "build_trajectory",
    "choose_leaves",
    "final_answer",
    "folder_digest",
    "merge_reference",
    "meta_task",
    "qa_task",
    "synthesize_qa",
    "task_id",
]


def folder_digest(folder: str | Path) -> str:
    """SHA-256 over every file's relative path and content (sorted; hidden entries and symlinks skipped)."""
    from datadojo.corpus.scan import sha256_file

    base = Path(folder)
    h = hashlib.sha256()
    for p in sorted(base.rglob("*")):
        rel = p.relative_to(base)
        if any(part.startswith(".") for part in rel.parts) or p.is_symlink() or not p.is_file():
            continue
        h.update(rel.as_posix().encode("utf-8") + b"\0" + sha256_file(p).encode() + b"\n")
    return h.hexdigest()


def task_id(digest: str, seed_id: str, question: str) -> str:
    """Stable id: hash of the folder's content digest, the seed id and the question text."""
    blob = f"{digest}\0{seed_id}\0{question}".encode()
    return "sci-" + hashlib.sha256(blob).hexdigest()[:16]


def _task(
    folder: Path,
    digest: str,
    seed: Seed,
    track: str,
    question: str,
    answer: str | None,
    extra: dict[str, Any],
) -> Task:
    """A task in the SciDataSailor format (shared with ``eval scidata``) for the ``qa`` or ``meta`` track."""
    return Task(
        id=task_id(digest, seed.id, question),
        question=question,
        files=[DataFile(path=str(folder.resolve()), kind="dir")],
        answer=answer,
        answer_kind=f"sailor_{track}",
        source="scidata",
        category=track,
        difficulty=seed.level,
        extra={"track": track, "seed_id": seed.id, "intent": seed.intent, **extra},
    )


def meta_task(
    folder: Path, digest: str, seed: Seed, reference: str | None, unit: str, candidates: int = 0
) -> Task:
    """The Meta-track task of a (folder, seed): summarize the seed intent; reference = merged answers."""
    return _task(
        folder, digest, seed, "meta", seed.intent, reference, {"unit": unit, "candidates": candidates}
    )


def qa_task(folder: Path, digest: str, seed: Seed, qa: QAPair, node_id: str, unit: str) -> Task:
    """A QA-track task from a verified trajectory; ``tree_node`` is the step whose observation holds the evidence."""
    extra = {"evidence": list(qa.evidence), "tree_node": node_id, "unit": unit}
    return _task(folder, digest, seed, "qa", qa.question, qa.answer, extra)


def choose_leaves(tree: Tree, k: int, min_depth: int = 0) -> list[Node]:
    """The ``k`` executed leaves to turn into trajectories: those at least ``min_depth`` deep first (a shallower
    one would only be rejected by QC), then by Q̂, then deeper first, then creation order."""
    leaves = tree.leaves()
    order = sorted(
        range(len(leaves)),
        key=lambda i: (
            leaves[i].depth < min_depth,
            -(leaves[i].w / leaves[i].n if leaves[i].n else 0.0),
            -leaves[i].depth,
            i,
        ),
    )
    return [leaves[i] for i in order[:k]]


_FINAL_INSTRUCTION = """Your exploration budget is spent. Now write your final answer to the original request:
"{intent}"
Use only what the observations above showed; say where the evidence is missing or uncertain. Reply with
<think>...</think> followed by <answer>...</answer>."""


async def final_answer(calls: LLMCalls, base: list[dict[str, Any]], nodes: Sequence[Node], seed: Seed) -> str:
    """The policy's final turn (raw text) for the path ``nodes``, anchored to the seed intent."""
    messages = [
        *path_messages(base, list(nodes)),
        {"role": "user", "content": _FINAL_INSTRUCTION.format(intent=seed.intent)},
    ]
    return await calls.text(calls.policy, messages, greedy=False)


def build_trajectory(
    *,
    task: Task,
    sample: int,
    base: list[dict[str, Any]],
    nodes: Sequence[Node],
    final_raw: str,
    seed: Seed,
    unit: str,
    model: str,
    config: dict[str, Any],
) -> Trajectory:
    """A ``sailor``-dialect trajectory: one code turn per probe on the path, then the final answer turn."""
    turns = [
        Turn(
            raw=probe_turn(n.strategy, n.thought, n.code),
            thought=probe_thought(n.strategy, n.thought),
            action=Action(kind="code", text=n.code),
            observation=Observation(
                text=n.observation, status=n.status or "env_error", truncated=n.truncated
            ),  # type: ignore[arg-type]
        )
        for n in nodes
    ]
    parsed = SAILOR.parse_turn(SAILOR.complete_turn(final_raw.strip()))
    turns.append(parsed.to_turn())
    answered = parsed.kind == "answer"
    leaf = nodes[-1] if nodes else None
    from datadojo.types import config_hash

    return Trajectory(
        task_id=task.id,
        sample=sample,
        dialect="sailor",
        prompt=[dict(m) for m in base],
        turns=turns,
        final_answer=parsed.text if answered else None,
        stop_reason="answer" if answered else "invalid",
        error=None if answered else (parsed.error or "the final turn is not an answer"),
        model=model,
        sampling={k: config[k] for k in ("temperature", "top_p", "max_tokens") if k in config},
        provenance=Provenance(config_hash=config_hash(config)),
        extra={
            "unit": unit,
            "seed_id": seed.id,
            "level": seed.level,
            "intent": seed.intent,
            "folder": task.files[0].path,
            "nodes": [n.id for n in nodes],
            "strategies": [n.strategy for n in nodes],
            "q": (leaf.w / leaf.n) if leaf is not None and leaf.n else None,
        },
    )


_QA_INSTRUCTION = """Exploration request (the seed): {intent}

Verified exploration steps:
{steps}

Final answer of the exploration:
{answer}

Build one question-answer pair from this exploration:
1. pick a compact evidence target from the observations (a schema property, a computed statistic, a
   cross-file linkage or a data-quality finding) and quote the observation lines that show it ("evidence");
2. give the number of the step whose observation holds it ("evidence_step");
3. write a self-contained question about the dataset that the request entails and that this evidence answers,
   without revealing the answer;
4. give the short answer the observations support (a value with its unit, a name, a list).
Reply with JSON {{"evidence": [TEXT, ...], "evidence_step": N, "question": TEXT, "answer": TEXT}}."""


async def synthesize_qa(
    calls: LLMCalls, nodes: Sequence[Node], seed: Seed, answer: str
) -> tuple[QAPair | None, str]:
    """One QA pair from a verified trajectory, or ``(None, why)``."""
    prompt = _QA_INSTRUCTION.format(
        intent=seed.intent, steps=render_steps(list(nodes), obs_chars=3000), answer=answer
    )
    result = await calls.structured(calls.policy, [{"role": "user", "content": prompt}], QAPair, greedy=False)
    if result is None:
        return None, "qa_invalid: the QA reply stayed invalid after the repair"
    qa = result.value
    if qa.evidence_step > len(nodes):
        return None, f"qa_invalid: evidence_step {qa.evidence_step} but the trajectory has {len(nodes)} steps"
    if not qa.question.strip() or not qa.answer.strip():
        return None, "qa_invalid: empty question or answer"
    return qa, ""


_MERGE_SYSTEM = """You write reference answers for meta-information tasks about scientific datasets. You get several
candidate final answers written for the same exploration request over the same dataset folder; merge them into
one complete reference answer for later grading. Keep every concrete, checkable fact any candidate states:
the dataset's purpose and domain; directory and file organization; file formats; fields, columns, keys,
variables and dtypes; counts, sizes and numeric ranges; provenance, licence and version notes; caveats,
missing metadata, failed inspections and uncertainty; how the data are meant to be stored, processed and used.
Prefer a detailed, readable answer to a short abstract. Remove only repeated wording, low-level tool traces and
claims no candidate supports. Where candidates disagree, do not invent: prefer the fact more candidates or more
specific evidence support, and mention a material disagreement briefly. Add nothing from outside knowledge.
Reply with the reference answer only: no JSON, no labels, no commentary."""


async def merge_reference(calls: LLMCalls, folder_name: str, seed: Seed, candidates: Sequence[str]) -> str:
    """Merge candidate final answers into one meta reference (B.2.1); one candidate is returned as is."""
    if not candidates:
        raise ValueError("merge_reference needs at least one candidate answer")
    if len(candidates) == 1:
        return candidates[0]
    listing = "\n\n".join(f"[Answer {i}]\n{c}" for i, c in enumerate(candidates, 1))
    user = (
        f"Dataset: {folder_name}\nExploration request: {seed.intent}\n\nCandidate final answers:\n\n{listing}"
    )
    text = await calls.text(
        calls.policy,
        [{"role": "system", "content": _MERGE_SYSTEM}, {"role": "user", "content": user}],
        greedy=True,
    )
    return text.strip() or candidates[0]
