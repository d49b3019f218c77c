"""DataDojo tasks as Harbor task folders (``datadojo export harbor TASKS --out DIR``).

One folder per task, in the layout Harbor's task loader reads (``harbor.models.task.task.Task``)::

    <id>/instruction.md          the question, the data files, where to write the answer
    <id>/task.toml               Harbor's task config (timeouts, resources) + DataDojo's metadata
    <id>/environment/Dockerfile  a Python image with DataDojo installed and the data files at /app/data
    <id>/environment/data/...    copies of the task's data files
    <id>/tests/test.sh           runs DataDojo's verifier: the reward registry's reward of /app/answer.txt,
                                 written to /logs/verifier/reward.json (datadojo.integrations.harbor.verify)
    <id>/tests/task.json         the task (data paths by visible name), its dialect and reward name
    <id>/solution/solve.sh       the reference solution: writes the gold answer (only where there is one)

DataDojo must be installable inside the image, and the verifier there must be the DataDojo that exported
(the same reward code): by default the running DataDojo's package is copied into each ``environment/``
(``datadojo-src/``, about 3 MB, installed with its declared dependencies); ``install`` replaces it with a
pip requirement (``datadojo @ git+https://...``) or the path of a wheel, copied into each folder.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import shlex
import shutil
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datadojo.errors import DataDojoError
from datadojo.fs import write_json_atomic, write_text_atomic
from datadojo.reward.registry import RewardSpec, choose_reward_name, reward_problems
from datadojo.types import Task
from datadojo.version import __version__

__all__ = [
    "ANSWER_FILE",
    "DATA_DIR",
    "SOURCE_DIR",
    "HarborExport",
    "export_harbor",
    "folder_name",
    "reference_answer",
]

#: Where the agent finds the data and writes its answer, inside the task's container.
DATA_DIR = "/app/data"
ANSWER_FILE = "/app/answer.txt"
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass
class HarborExport:
    """What an export wrote: one folder per task, and the tasks without a reference solution."""

    out: Path
    folders: list[Path] = field(default_factory=list)
    without_solution: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "out": str(self.out),
            "tasks": len(self.folders),
            "with_solution": len(self.folders) - len(self.without_solution),
            "without_solution": self.without_solution,
        }


def folder_name(task_id: str, taken: set[str]) -> str:
    """A folder (and Harbor task) name for ``task_id``: safe characters, lower case, unique in ``taken``."""
    base = _SAFE.sub("-", task_id).strip("-.").lower() or "task"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    taken.add(name)
    return name


def reference_answer(task: Task) -> str | None:
    """The gold answer as the text an agent would write (``None``: the task has no reference answer)."""
    if task.answer is None:
        return None
    if isinstance(task.answer, str):
        return task.answer
    return json.dumps(task.answer, ensure_ascii=False)


def _toml_str(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string


def _task_toml(task: Task, reward: str | None, agent_timeout_s: float, verifier_timeout_s: float) -> str:
    meta = {
        "datadojo_task_id": task.id,
        "datadojo_reward": reward or "per task (reward_for_task)",
        "datadojo_version": __version__,
    }
    for key in ("answer_kind", "source", "category"):
        value = getattr(task, key)
        if value is not None:
            meta[key] = str(value)
    lines = [
        '# Written by `datadojo export harbor` (docs/environment.md, "Harbor").',
        'source = "datadojo"',
        "",
        "[metadata]",
        *(f"{k} = {_toml_str(v)}" for k, v in meta.items()),
        "",
        "[verifier]",
        f"timeout_sec = {float(verifier_timeout_s)}",
        "",
        "[agent]",
        f"timeout_sec = {float(agent_timeout_s)}",
        "",
        "[environment]",
        "build_timeout_sec = 900.0",
        "cpus = 1",
        "memory_mb = 4096",
        "",
    ]
    return "\n".join(lines)


def _instruction(task: Task) -> str:
    files = "\n".join(f"- `{DATA_DIR}/{f.visible_name}` ({f.kind})" for f in task.files) or "- (none)"
    fmt = task.extra.get("answer_format")
    parts = [task.question.strip(), ""]
    if task.description:
        parts += [task.description.strip(), ""]
    parts += [
        "## Data",
        "",
        f"The task's data files are in `{DATA_DIR}/` (read them; do not change them):",
        "",
        files,
        "",
        "## Your answer",
        "",
        f"Write your final answer, and nothing else, to `{ANSWER_FILE}`.",
    ]
    if fmt:
        parts += ["", f"Answer format: {fmt}"]
    return "\n".join(parts) + "\n"


def _dockerfile(install: str | None, copied: str | None) -> str:
    """``copied``: a wheel file or source folder in the build context; else ``install`` is a requirement."""
    lines = [
        "# Written by `datadojo export harbor`: DataDojo (for the verifier) and the task's data files.",
        "FROM python:3.11-slim",
    ]
    if copied:
        lines += [
            f"COPY {copied} /tmp/{copied}",
            f"RUN pip install --no-cache-dir /tmp/{copied} && rm -rf /tmp/{copied}",
        ]
    else:
        lines += [f"RUN pip install --no-cache-dir {shlex.quote(str(install))}"]
    lines += ["WORKDIR /app", f"COPY data/ {DATA_DIR}/", ""]
    return "\n".join(lines)


TEST_SH = """#!/usr/bin/env bash
# Written by `datadojo export harbor`: DataDojo's reward (its registry) of the agent's answer, written as
# Harbor's reward file. Outside a container: DATADOJO_TASK_ROOT (default /app: data/ and answer.txt),
# DATADOJO_VERIFIER_LOGS (default /logs/verifier) and DATADOJO_PYTHON (default python3) say where things are.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="${DATADOJO_TASK_ROOT:-/app}"
LOGS="${DATADOJO_VERIFIER_LOGS:-/logs/verifier}"
mkdir -p "$LOGS"
exec "${DATADOJO_PYTHON:-python3}" -m datadojo.integrations.harbor.verify --task "$HERE/task.json" \\
  --answer "$ROOT/answer.txt" --data-dir "$ROOT/data" --out "$LOGS/reward.json"
"""


def _solve_sh(answer: str) -> str:
    delim = "DATADOJO_ANSWER"
    while delim in answer:
        delim += "_"
    return (
        "#!/usr/bin/env bash\n"
        "# Written by `datadojo export harbor`: the reference solution writes the task's gold answer.\n"
        "set -euo pipefail\n"
        'ROOT="${DATADOJO_TASK_ROOT:-/app}"\n'
        f"cat > \"$ROOT/answer.txt\" <<'{delim}'\n{answer}\n{delim}\n"
    )


def _copy_data(task: Task, data_dir: Path) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    for f in task.files:
        source = Path(f.path)
        target = data_dir / f.visible_name
        if not source.exists():
            raise DataDojoError(f"task {task.id}: data file {f.path} does not exist")
        if target.exists():
            raise DataDojoError(f"task {task.id}: two data files are named {f.visible_name!r}")
        if source.is_dir():
            shutil.copytree(source, target)
        else:
            shutil.copyfile(source, target)


#: The running DataDojo, copied into an image (``_vendor_source``).
SOURCE_DIR = "datadojo-src"


def _declared_dependencies(package: Path) -> list[str]:
    """DataDojo's declared dependencies: from its installed metadata, else from the source checkout's
    pyproject.toml when it runs from one (``PYTHONPATH=src``)."""
    try:
        return importlib.metadata.requires("datadojo") or []
    except importlib.metadata.PackageNotFoundError:
        pyproject = package.parent.parent / "pyproject.toml"
        if pyproject.is_file():
            project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
            if project.get("name") == "datadojo":
                return list(project.get("dependencies", []))
    raise DataDojoError(
        "export harbor: DataDojo is neither installed as a package here nor run from its source checkout, so "
        "it cannot be copied into the images; pass --install (a wheel or a pip requirement)"
    )


def _vendor_source(target: Path) -> None:
    """Copy the running DataDojo package into ``target`` with a pyproject.toml declaring its dependencies."""
    import datadojo

    package = Path(datadojo.__file__).resolve().parent
    requires = _declared_dependencies(package)
    deps = [r for r in requires if "extra ==" not in r]
    shutil.copytree(package, target / "datadojo", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    pyproject = (
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n\n'
        f'[project]\nname = "datadojo"\nversion = "{__version__}"\nrequires-python = ">=3.11"\n'
        f"dependencies = {json.dumps(deps)}\n\n"
        '[tool.setuptools.packages.find]\ninclude = ["datadojo*"]\n\n'
        '[tool.setuptools.package-data]\ndatadojo = ["py.typed", "**/*.json", "**/*.txt", "**/*.md", '
        '"**/*.jinja", "**/*.yaml"]\n'
    )
    write_text_atomic(target / "pyproject.toml", pyproject)


#: Rewards a Harbor verifier cannot compute from the folder alone, and why (docs/environment.md, "Harbor").
UNSUPPORTED_REWARDS = {
    "envlunch": "its reward runs the answer program on counterfactual copies of the database that lie "
    "beside the task file, which a task folder does not carry",
    "judge": "its answer part asks an LLM judge, whose model and key the verifier's container does not have",
}


def _check_rewards(tasks: Sequence[Task], reward: str | None) -> None:
    """Refuse, before writing anything, tasks whose reward (the registry's choice) the verifier cannot give."""
    spec = RewardSpec(name=reward)
    problems = []
    rewardable = []
    for task in tasks:
        name = choose_reward_name(task, spec)
        if name in UNSUPPORTED_REWARDS:
            problems.append(f"{task.id}: reward {name}: {UNSUPPORTED_REWARDS[name]}")
        else:
            rewardable.append(task)
    problems += reward_problems(rewardable, spec)
    if problems:
        head = f"export harbor: {len(problems)} task(s) cannot be verified in a Harbor task folder:\n"
        raise DataDojoError(head + "\n".join(f"  {p}" for p in problems))


def _write_script(path: Path, text: str) -> None:
    write_text_atomic(path, text)
    path.chmod(0o755)


def export_harbor(
    tasks: Sequence[Task],
    out: str | Path,
    *,
    reward: str | None = None,
    dialect: str = "datamind",
    install: str | None = None,
    agent_timeout_s: float = 1800.0,
    verifier_timeout_s: float = 600.0,
) -> HarborExport:
    """Write one Harbor task folder per task under ``out`` (which must not hold those folders yet).

    ``reward``: a registry name for every task (``None``: chosen per task by ``reward_for_task``, as
    everywhere else); ``dialect``: the dialect the verifier's one-turn trajectory is written in.
    """
    tasks = list(tasks)
    if not tasks:
        raise DataDojoError("export harbor: no tasks")
    _check_rewards(tasks, reward)
    out = Path(out)
    wheel_path = Path(install) if install and install.endswith(".whl") else None
    if wheel_path is not None and not wheel_path.is_file():
        raise DataDojoError(f"--install {install}: no such wheel")
    report = HarborExport(out=out)
    taken: set[str] = set()
    for task in tasks:
        folder = out / folder_name(task.id, taken)
        if folder.exists():
            raise DataDojoError(f"{folder} exists: export into an empty folder (task {task.id})")
        env_dir = folder / "environment"
        _copy_data(task, env_dir / "data")
        copied: str | None = None
        if wheel_path is not None:
            shutil.copyfile(wheel_path, env_dir / wheel_path.name)
            copied = wheel_path.name
        elif install is None:
            _vendor_source(env_dir / SOURCE_DIR)
            copied = SOURCE_DIR
        write_text_atomic(env_dir / "Dockerfile", _dockerfile(install, copied))
        write_text_atomic(folder / "instruction.md", _instruction(task))
        write_text_atomic(folder / "task.toml", _task_toml(task, reward, agent_timeout_s, verifier_timeout_s))
        spec = {"task": task.to_dict(), "dialect": dialect, "reward": reward}
        write_json_atomic(folder / "tests" / "task.json", spec)
        _write_script(folder / "tests" / "test.sh", TEST_SH)
        answer = reference_answer(task)
        if answer is None:
            report.without_solution.append(task.id)
        else:
            _write_script(folder / "solution" / "solve.sh", _solve_sh(answer))
        report.folders.append(folder)
    return report
