"""Helpers of the recipe tests: a small taxonomy, recipe files, and the per-pipeline fake teachers.

The fake teachers are the pipelines' own test doubles, one per pipeline in :mod:`datadojo.testing`
(:mod:`datadojo.testing.datamind_teacher`, :class:`datadojo.testing.sailor_teacher.FakeSailor`), served by
the loopback server.
"""

from __future__ import annotations

import json
from pathlib import Path

from datadojo.testing import datamind_teacher

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

#: Three categories: one answered consistently, one rescued by reflection, one inconsistent forever.
CATEGORIES = ("Aggregation", "Counting", "Comparison")


def small_taxonomy(path: Path) -> Path:
    from datadojo.synth.datamind.taxonomy import load_taxonomy  # noqa: F401  (the bundled file's reader)

    bundled = (
        Path(__file__).resolve().parents[2] / "src" / "datadojo" / "synth" / "datamind" / "taxonomy.json"
    )
    data = json.loads(bundled.read_text(encoding="utf-8"))
    data["categories"] = [c for c in data["categories"] if c["name"] in CATEGORIES]
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def teacher(req):
    return datamind_teacher.teacher(req)


def judge(req):
    return datamind_teacher.judge(req)


write_csv = datamind_teacher.write_csv


#: The smallest real training and eval settings: two SFT steps, one RL step of 2 tasks × 2 rollouts, one
#: turn of a few tokens per episode (the toy model writes noise; the links between stages are what is tested).
TRAIN = """
[stages.sft]
max_steps = 2
batch_size = 1
max_length = 4096
save_every = 0

[stages.rl]
total_steps = 1
tasks_per_step = 2
group_size = 2
updates_per_step = 1
max_turns = 1
max_new_tokens = 6
concurrency = 2
max_length = 4096
save_every = 0

[stages.eval]
concurrency = 2

[[benchmarks]]
bench = "shop-sql"
data = "{examples}/data/shop.sqlite"
limit = 2
n_trials = 1
max_turns = 1
max_tokens = 8
"""


#: The toy student's 4,096-token window cannot hold the first prompts of these tasks (the data profiles alone
#: are longer in its byte-level tokens), so its RL rollouts and eval trials end at ``context_limit``: the
#: stages say they did nothing useful, which would stop the recipe. These configs test the links between
#: stages, not learning, so they allow it (``allow_empty``), and test_recipes_ci checks that it is flagged.
ALLOW_EMPTY = "allow_empty = true\n"


def write_recipe(
    kind: str,
    root: Path,
    student: Path,
    *,
    teacher: str = "",
    judge: str = "",
    extra: str = "",
    allow_empty: bool = True,
) -> Path:
    """A recipe file of ``kind`` over small inputs under ``root`` (created here)."""
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    if kind == "datamind":
        write_csv(data / "orders.csv")
        tax = small_taxonomy(root / "taxonomy.json")
        head = f'''
recipe = "datamind"
inputs = ["data"]
[models]
teacher = "{teacher}"
judge = "{judge}"
student = "{student}"
[stages.synthesis]
taxonomy = "{tax}"
chains_per_file = 1
min_chain = 2
max_chain = 2
concurrency = 4
near_duplicate = 0.95
[stages.curation]
strategy = "con-select"
'''
    elif kind == "envlunch":
        head = f'''
recipe = "envlunch"
inputs = ["{EXAMPLES}/data/shop.sqlite", "{EXAMPLES}/data/sales.csv"]
[models]
student = "{student}"
[stages.synthesis]
n = 8
seed = 0
[stages.curation]
max_candidates = 400
concurrency = 2
'''
    else:
        head = f'''
recipe = "sailor"
inputs = ["{EXAMPLES}/data/station_survey"]
[models]
teacher = "{teacher}"
student = "{student}"
[stages.synthesis]
seeds = ["L0-map"]
max_nodes = 5
max_depth = 3
min_depth = 2
trajectories_per_seed = 2
k_max = 2
logprobs = false
'''
    path = root / f"{kind}.toml"
    top = ALLOW_EMPTY if allow_empty else ""
    path.write_text(top + head.lstrip("\n") + extra + TRAIN.format(examples=EXAMPLES), encoding="utf-8")
    return path
