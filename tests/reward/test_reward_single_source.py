"""Only the reward registry chooses or computes a reward (issue 37, item 5).

Four consumers used to pick a reward with their own ``if task.answer_kind == "envlunch"`` and build their
own DataMind scorer; they drifted apart. This scan of ``src/datadojo`` fails when a module outside
``datadojo/reward`` does any of that again:

* constructs :class:`~datadojo.reward.datamind.DataMindReward`, or an ``LLMJudge`` (outside the benchmark
  that owns its official judge, :data:`JUDGE_OWNERS`);
* calls one of the reward's pieces (:data:`REWARD_PIECES`: DataMind's format / length / composite, EnvLunch's
  Eq. 4 and its trajectory scoring);
* compares a task's ``answer_kind`` (or anything named ``kind`` / ``reward``) with ``"envlunch"``: the
  dispatch the registry's :func:`~datadojo.reward.registry.choose_reward_name` does.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "datadojo"

REWARD_PIECES = frozenset(
    {
        "composite_reward",
        "format_reward",
        "length_reward",
        "score_trajectories",
        "envlunch_reward",
        "datamind_reward_fn",
        "envlunch_reward_fn",
        "make_reward_fn",
    }
)
REWARD_CLASSES = frozenset({"DataMindReward", "LLMJudge"})
#: The benchmark scored by an LLM judge builds its own (its official rule, not a training reward).
JUDGE_OWNERS = frozenset({"bench/judged.py", "compare/judge.py"})
DISPATCH_NAMES = ("answer_kind", "kind", "reward")


def _called_name(node: ast.Call) -> str | None:
    f = node.func
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        return f.attr
    return None


def _names_a_kind(node: ast.expr) -> bool:
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return any(name == n or name.endswith("_" + n) for n in DISPATCH_NAMES)


def _is_envlunch(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant) and node.value == "envlunch":
        return True
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_is_envlunch(e) for e in node.elts)
    return False


def violations(root: Path) -> list[str]:
    """``path:line: what`` for every reward choice or computation outside ``root/reward``."""
    out: list[tuple[str, int, str]] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("reward/"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = _called_name(node)
                if name in REWARD_PIECES:
                    out.append((rel, node.lineno, f"calls {name}"))
                elif name in REWARD_CLASSES and not (name == "LLMJudge" and rel in JUDGE_OWNERS):
                    out.append((rel, node.lineno, f"constructs {name}"))
            elif isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if any(_is_envlunch(s) for s in sides) and any(_names_a_kind(s) for s in sides):
                    out.append((rel, node.lineno, "chooses a reward by kind (== 'envlunch')"))
    return [f"{rel}:{line}: {what}" for rel, line, what in sorted(out)]


def test_no_module_outside_the_registry_chooses_or_computes_a_reward() -> None:
    found = violations(SRC)
    assert not found, "reward chosen or computed outside datadojo.reward:\n" + "\n".join(found)


def test_the_scan_sees_each_kind_of_violation(tmp_path: Path) -> None:
    (tmp_path / "reward").mkdir()
    (tmp_path / "reward" / "ok.py").write_text("x = composite_reward(1, 1, 1)\n")  # the registry may
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "judged.py").write_text("j = LLMJudge(backend)\n")  # the official judge may
    (tmp_path / "consumer.py").write_text(
        "from datadojo.reward import DataMindReward, format_reward\n"
        "def score(task, traj, info):\n"
        "    if task.answer_kind == 'envlunch':\n"
        "        return score_trajectories(info, [traj], ex)\n"
        "    kind = 'envlunch' if task.answer_kind == 'envlunch' else 'datamind'\n"
        "    if kind in ('envlunch',):\n"
        "        pass\n"
        "    r = DataMindReward().score(traj, task)\n"
        "    judge = m.LLMJudge(backend)\n"
        "    return format_reward(traj)\n"
        "preset_ok = preset in ('datamind', 'envlunch')\n"  # a preset name is not a reward dispatch
    )
    assert violations(tmp_path) == [
        "consumer.py:3: chooses a reward by kind (== 'envlunch')",
        "consumer.py:4: calls score_trajectories",
        "consumer.py:5: chooses a reward by kind (== 'envlunch')",
        "consumer.py:6: chooses a reward by kind (== 'envlunch')",
        "consumer.py:8: constructs DataMindReward",
        "consumer.py:9: constructs LLMJudge",
        "consumer.py:10: calls format_reward",
    ]
