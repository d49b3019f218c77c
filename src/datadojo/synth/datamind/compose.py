"""Stage 3: recursive easy→hard composition — chains of 2–5 categories, each question building on the last.

DataMind §3.2 (Step 3): generate a query q1 of one task type; the output of answering q1 becomes an input of
a query q2 of a (possibly) different type; repeat, chaining 2–5 task types, "progressively amplifying the
difficulty". The paper does not show its composition prompt; ours gives the teacher the previous question
(and the chain so far), the next category with its definition and exemplars, and asks for one new,
self-contained question whose answer requires the previous question's answer.

Per file, ``chains_per_file`` chains are planned from a generator seeded by (``seed``, file hash): a start
question among the file's difficulty-1 queries, a target length drawn from [``min_chain``, ``max_chain``]
(capped by the number of applicable categories) and the next categories (distinct, applicable). Every step
is kept as a query of its own: ``difficulty`` = chain length, ``extra.chain`` = its categories,
``extra.parents`` = the ids of the questions it builds on (q1 … q_{i-1}). A step rejected by the checks of
:class:`~datadojo.synth.datamind.queries.QueryChecker` ends its chain (the rejection is logged).
Files run concurrently; the chains of one file run one after another, so which of two near-duplicate steps
is kept does not depend on server timing. Resumable: each step is marked in ``progress.jsonl`` with the id it produced, so a rerun continues chains
where they stopped and sends no request for finished steps.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pydantic import Field

from datadojo.jsonl import JsonlAppender
from datadojo.llm.base import ChatBackend, LLMError
from datadojo.llm.structured import StructuredOutputError, complete_counted
from datadojo.runs import Rejection, UsageLedger
from datadojo.synth.datamind.config import DataMindConfig
from datadojo.synth.datamind.queries import FileEntry, SynthQuery, file_checkers, load_queries, query_id
from datadojo.synth.datamind.store import Paths
from datadojo.synth.datamind.taxonomy import Category, Taxonomy
from datadojo.types import Task

__all__ = ["ChainPlan", "ComposedQuery", "compose_messages", "compose_queries", "plan_chains"]

log = logging.getLogger(__name__)
STAGE = "compose"


class ComposedQuery(SynthQuery):
    """The reply to one composition step: a question, its columns, and how it uses the previous answer."""

    builds_on: str = Field(description="how the new question uses the previous question's answer")


@dataclass(frozen=True)
class ChainPlan:
    """One planned chain: its index in the file, the start question and the categories to add."""

    file_sha: str
    index: int
    start: Task
    categories: tuple[str, ...]  # the categories of steps 2..L

    @property
    def length(self) -> int:
        return 1 + len(self.categories)


def plan_chains(
    file: FileEntry, base: Sequence[Task], taxonomy: Taxonomy, config: DataMindConfig
) -> list[ChainPlan]:
    """The file's chains (module docstring); deterministic for a given seed, file and set of base queries."""
    if not base or config.chains_per_file == 0:
        return []
    applicable = [c.name for c in file.applicable(taxonomy)]
    rng = random.Random(f"{config.seed}:{file.sha256}:compose")
    starts = sorted(base, key=lambda t: t.id)
    plans = []
    for j in range(config.chains_per_file):
        start = rng.choice(starts)
        others = [c for c in applicable if c != start.category]
        longest = min(config.max_chain, 1 + len(others))
        if longest < config.min_chain:
            break
        length = rng.randint(config.min_chain, longest)
        plans.append(ChainPlan(file.sha256, j, start, tuple(rng.sample(others, length - 1))))
    return plans


_SYSTEM = (
    "You compose harder data-analysis questions from easier ones. You see a description of a data file, a "
    "question about it, and a task category. You write one new question of that category that can only be "
    "answered after answering the given question: the given question's answer is an input of the new one. "
    "The new question must be self-contained (state what must be computed first; never say 'the previous "
    "answer'), have one definite answer, and use the file's column names exactly. Reply with JSON only."
)


def compose_messages(profile: str, chain: Sequence[Task], category: Category) -> list[dict[str, str]]:
    """The request for the next step of a chain (``chain[-1]`` is the question to build on)."""
    prev = chain[-1]
    history = " → ".join(str(t.category) for t in chain)
    exemplars = "\n".join(f"- {e}" for e in category.exemplars)
    user = (
        f"## Data file\n{profile}\n\n"
        f"## Question to build on (chain so far: {history})\n{prev.question}\n\n"
        f"## Category of the new question: {category.name}\n{category.definition}\n"
        f"Example questions of this category (other files):\n{exemplars}\n\n"
        "Write one new question of this category whose answer needs the answer of the question above. "
        'Reply as JSON: {"question": "...", "columns": ["..."], "builds_on": "..."}'
    )
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


async def compose_queries(
    files: Sequence[FileEntry],
    teacher: ChatBackend,
    paths: Paths,
    taxonomy: Taxonomy,
    config: DataMindConfig,
    *,
    on_progress: Callable[[int, int], None] | None = None,
) -> UsageLedger:
    """Run every planned chain step (module docstring); append composed queries to ``queries.jsonl``."""
    usage = paths.usage_ledger(STAGE)
    progress = paths.work_ledger()
    queries = load_queries(paths)
    by_id = {t.id: t for t in queries}
    plans: list[tuple[FileEntry, ChainPlan]] = []
    checkers = file_checkers(files, queries, config)
    for f in files:
        base = [t for t in queries if t.extra.get("file_sha256") == f.sha256 and t.difficulty == 1]
        plans.extend((f, p) for p in plan_chains(f, base, taxonomy, config))
    total = sum(p.length - 1 for _, p in plans)
    state = {"done": 0}
    sem = asyncio.Semaphore(config.concurrency)

    def tick() -> None:
        state["done"] += 1
        if on_progress:
            on_progress(state["done"], total)

    if on_progress:
        on_progress(0, total)

    with usage, progress, paths.rejections() as rejects, JsonlAppender(paths.queries) as sink:

        async def run_chain(f: FileEntry, plan: ChainPlan) -> None:
            chain = [plan.start]
            for depth, cat_name in enumerate(plan.categories, start=2):
                key = f"{plan.file_sha}:{plan.index}:{depth}"
                mark = progress.get(f"{STAGE}:{key}")
                if mark is not None:
                    tick()
                    nxt = by_id.get(str(mark.get("task_id")))
                    if nxt is None:  # the step was rejected: the chain ended there
                        state["done"] += plan.length - depth
                        return
                    chain.append(nxt)
                    continue
                category = taxonomy.get(cat_name)
                try:
                    async with sem:
                        q = await complete_counted(
                            usage,
                            "teacher",
                            teacher,
                            compose_messages(f.profile, chain, category),
                            ComposedQuery,
                            mode=config.structured,
                            temperature=config.query_temperature,
                            max_tokens=config.query_max_tokens,
                        )
                except StructuredOutputError as exc:
                    rejects.add(
                        Rejection(
                            STAGE,
                            key,
                            "invalid_reply",
                            f"invalid reply after one repair: {exc}",
                            {"file": f.path},
                        )
                    )
                    progress.commit(f"{STAGE}:{key}", stage=STAGE, task_id=None)
                    state["done"] += plan.length - depth
                    tick()
                    return
                except LLMError as exc:
                    usage.add("teacher", requests=0, failed=1, check=False)
                    log.warning("composition step %s failed: %s", key, exc)
                    return  # not marked: a rerun tries again
                cats = [str(t.category) for t in chain] + [cat_name]
                task = Task(
                    id=query_id(f.sha256, cats, q.question),
                    question=q.question.strip(),
                    files=plan.start.files,
                    description=plan.start.description,
                    source="datamind",
                    category=cat_name,
                    difficulty=depth,
                    extra={
                        "chain": cats,
                        "parents": [t.id for t in chain],
                        "file_sha256": f.sha256,
                        "columns": q.columns,
                        "builds_on": q.builds_on,
                        "answer_form": category.answer_form,
                    },
                )
                checker = checkers[f.sha256]
                verdict = None if task.id in by_id else checker.check(q.question, q.columns)
                if verdict is not None:
                    rejects.add(
                        Rejection(
                            STAGE, task.id, verdict[0], verdict[1],
                            {"file": f.path, "chain": cats, "question": q.question},
                        )
                    )  # fmt: skip
                    progress.commit(f"{STAGE}:{key}", stage=STAGE, task_id=None)
                    state["done"] += plan.length - depth
                    tick()
                    return
                if task.id not in by_id:
                    checker.keep(q.question)
                    sink.write(task)
                    by_id[task.id] = task
                progress.commit(f"{STAGE}:{key}", stage=STAGE, task_id=task.id)
                tick()
                chain.append(task)

        async def run_file(items: list[tuple[FileEntry, ChainPlan]]) -> None:
            for f, plan in items:  # a file's chains one after another: its duplicate checks see a fixed order
                await run_chain(f, plan)

        per_file: dict[str, list[tuple[FileEntry, ChainPlan]]] = {}
        for f, plan in plans:
            per_file.setdefault(f.sha256, []).append((f, plan))
        await asyncio.gather(*(run_file(items) for items in per_file.values()))
    return usage
