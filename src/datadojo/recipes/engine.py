"""The stage-graph engine: plan, run (cached, resumable), sweep.

A recipe is a tuple of :class:`Stage` objects in dependency order. For each stage the engine computes a
key (:func:`datadojo.runs.stage_key`) from

* the stage's settings (what :attr:`Stage.settings` takes from the recipe config: its own section, the
  models it calls, the benchmarks it runs);
* the content of the external inputs it reads (:attr:`Stage.inputs`: data files, the base checkpoint);
* the keys of the stages it depends on;
* its code version: the source of the modules it runs (:attr:`Stage.code`; prompts and data files of a
  package count, so an edited prompt reruns the stage that sends it).

A stage whose key is committed in the cache (:class:`datadojo.runs.StageCache` under ``OUT/stages``) is
not run; the others run in their cache folder and are committed when they return. So an edit reruns
exactly the stages below it; a killed run leaves the current stage uncommitted, and the rerun enters the
same folder, where the library stage resumes on its own files (pipelines, eval and trainers all do).

A sweep is several configurations (one per value combination); their stages with equal keys are the same
cache entry, so shared stages run once. ``OUT/plan.json`` keeps each variant's key parts of the last run,
which lets ``--dry-run`` say *why* a stage would rerun (settings, input, upstream or code changed).
"""

from __future__ import annotations

import itertools
import json
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from datadojo.errors import DataDojoError, ExitCode
from datadojo.fs import write_json_atomic
from datadojo.recipes.config import RecipeConfig, parse_value
from datadojo.recipes.problems import Problem, RecipeProblems
from datadojo.runs import (
    CacheEntry,
    ProgressHook,
    RunFolder,
    StageCache,
    code_version,
    content_hash,
    stage_key,
)
from datadojo.runs.progress import null_progress

__all__ = [
    "TIMING_FILE",
    "EmptyStage",
    "EngineConfig",
    "PlanItem",
    "RecipeError",
    "RecipeResult",
    "Stage",
    "StageContext",
    "StudyRunsFailed",
    "Variant",
    "parse_sweeps",
    "plan",
    "run_recipe",
    "same_value",
    "study_sweeps",
    "variants",
]


class EngineConfig(Protocol):
    """What :func:`run_recipe` reads of a configuration without a sweep or a study: a recipe's
    :class:`RecipeConfig`, or another job run as a stage graph (``datadojo demo``'s
    :class:`~datadojo.demo.config.DemoConfig`). Sweeps and studies need a :class:`RecipeConfig`."""

    @property
    def recipe(self) -> str: ...  # the run folder's kind of recipe: a folder of another one is refused

    @property
    def out(self) -> Any: ...  # the run folder (read through ``path``)

    @property
    def study(self) -> Any: ...  # ``None`` outside a recipe's [study]

    def path(self, value: str) -> Path: ...

    def allows_empty(self, stage: str) -> bool: ...


class RecipeError(DataDojoError, ValueError):
    """A recipe that cannot run as configured, or a stage whose input carries nothing; names the stage."""


@dataclass
class StageContext:
    """What a stage's function gets: its folder, the committed outputs of its dependencies, the config."""

    config: RecipeConfig
    stage: Stage
    out: Path
    upstream: dict[str, CacheEntry]
    progress: Callable[[int, int], None]
    executor: Any = None

    def dep(self, name: str) -> dict[str, Any]:
        """The manifest of dependency ``name`` (what its function returned)."""
        return self.upstream[name].manifest


@dataclass(frozen=True)
class Stage:
    """One node of a recipe: ``run(ctx) -> manifest`` (JSON-able; paths as strings)."""

    name: str
    title: str
    run: Callable[[StageContext], dict[str, Any]]
    deps: tuple[str, ...] = ()
    settings: Callable[[RecipeConfig], dict[str, Any]] = lambda cfg: {}
    inputs: Callable[[RecipeConfig], list[Path]] = lambda cfg: []
    code: tuple[str, ...] = ()
    executor: bool = False  # runs its fan-out on --executor ray
    servers: Callable[[RecipeConfig], dict[str, str]] = lambda cfg: {}  # setting → served model it calls
    # what can be known of its run from the stages it reads that are cached (the data it will get): given
    # those entries by name, it returns [] when what it needs is not there yet
    precheck: Callable[[RecipeConfig, dict[str, CacheEntry]], list[Problem]] | None = None


@dataclass
class Variant:
    """One configuration of a sweep: ``label`` (``key=value, ...``; ``base`` without a sweep), and the seed of
    its run when the recipe's ``[study]`` asks for several (``None``: the stages' own seeds)."""

    label: str
    values: dict[str, Any]
    config: RecipeConfig
    seed: int | None = None
    point: str = ""  # the label without the seed: the sweep point this run is a replicate of

    def __post_init__(self) -> None:
        self.point = self.point or self.label


@dataclass
class PlanItem:
    variant: str
    stage: str
    title: str
    key: str
    status: str  # "cached", "run" (never run), "rerun" (ran before under another key), "shared"
    why: list[str] = field(default_factory=list)
    executor: bool = False


@dataclass
class RecipeResult:
    """What a run did: the plan it followed and, per variant, each stage's committed entry; ``failed`` the
    replicate runs of a seeded study that failed (variant label → ``stage NAME: error``)."""

    out: Path
    items: list[PlanItem]
    entries: dict[str, dict[str, CacheEntry]]
    elapsed: dict[tuple[str, str], float]
    report: dict[str, Path] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)  # found before the first stage (plan: shown)
    empty: dict[tuple[str, str], str] = field(default_factory=dict)  # (variant, stage) → what it did not do
    stopped: str | None = None  # the empty stage that stopped the run (its one line)


class EmptyStage(RecipeError):
    """A stage ran and did nothing useful (0 optimizer updates, nothing kept, most trials at the context
    limit…): the recipe stops with the cause and the setting to change, unless ``allow_empty`` lets it go on.
    The stage stays committed (its work is what it is): a changed setting reruns it, ``--allow-empty`` goes
    on from it."""


#: The manifest key in which a stage says it did nothing useful (one line: the cause and the setting).
EMPTY_KEY = "empty"

#: The file in a stage's folder in which the engine records its wall time (``{"seconds": …}``) at commit.
TIMING_FILE = "timing.json"


class StudyRunsFailed(RecipeError):
    """Some replicate runs of a seeded study failed; the others ran and the report marks the points short
    of seeds. The exit status is that of the first failure when it was a DataDojo error, else a bug's."""

    def __init__(self, message: str, exit_code: ExitCode) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def parse_sweeps(specs: Sequence[str]) -> dict[str, list[Any]]:
    """``["stages.curation.strategy=a,b", ...]`` → ``{key: [values]}`` (values read as TOML scalars)."""
    out: dict[str, list[Any]] = {}
    for spec in specs:
        key, sep, values = spec.partition("=")
        if not sep or not key.strip() or not values.strip():
            raise RecipeError(
                f"--sweep {spec!r}: expected KEY=V1,V2 (e.g. stages.curation.strategy=con-select,non-con)"
            )
        out[key.strip()] = [parse_value(v.strip()) for v in values.split(",")]
    return out


def same_value(a: Any, b: Any) -> bool:
    """Whether two setting values are the same as TOML reads them: ``true`` is not ``1``, ``16`` is ``16.0``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b)


def study_sweeps(config: RecipeConfig, sweeps: Mapping[str, Sequence[Any]] | None) -> dict[str, list[Any]]:
    """The sweeps with the ``[study]`` arm checked: its method and baseline must be among the arm's swept
    values (an error naming the key otherwise); an arm the command does not sweep is swept over the two."""
    out = {k: list(v) for k, v in (sweeps or {}).items()}
    study = config.study
    if study is None:
        return out
    if study.arm not in out:
        out[study.arm] = [study.method, study.baseline]
    values = out[study.arm]
    shown = ", ".join(repr(v) for v in values)
    for role in ("method", "baseline"):
        want = getattr(study, role)
        if not any(same_value(want, v) for v in values):
            raise RecipeError(
                f"[study] {role} = {want!r}: not among the --sweep values of {study.arm} ({shown})"
            )
    if same_value(study.method, study.baseline):
        raise RecipeError(f"[study] method and baseline are the same value of {study.arm}: {study.method!r}")
    return out


def variants(config: RecipeConfig, sweeps: Mapping[str, Sequence[Any]] | None = None) -> list[Variant]:
    """Every combination of the sweep values (the base config alone without a sweep), once per seed of the
    recipe's ``[study]``: each seed is written to :meth:`RecipeConfig.seed_settings`."""
    sweeps = study_sweeps(config, sweeps)
    seeds: list[int | None] = (config.study.seed_list if config.study else None) or [None]
    combos = (
        [{}]
        if not sweeps
        else [dict(zip(sweeps, combo, strict=True)) for combo in itertools.product(*sweeps.values())]
    )
    out = []
    for values in combos:
        cfg = config
        for k, v in values.items():
            cfg = cfg.with_setting(k, v)
        label = ", ".join(f"{k.split('.')[-1]}={v}" for k, v in values.items()) or "base"
        for seed in seeds:
            if seed is None:
                out.append(Variant(label, values, cfg))
                continue
            seeded = cfg
            for key in cfg.seed_settings():
                seeded = seeded.with_setting(key, seed)
            name = f"{label}, seed={seed}" if values else f"seed={seed}"
            out.append(Variant(name, values, seeded, seed, label))
    return out


def _key_parts(
    stage: Stage, cfg: RecipeConfig, keys: Mapping[str, str], missing: list[Problem] | None = None
) -> dict[str, str]:
    """The four things a key is made of, each hashed (``plan.json`` stores them to explain reruns). A missing
    input is added to ``missing`` (hashed as missing, so the rest of the plan can still be shown)."""
    inputs = []
    for p in stage.inputs(cfg):
        try:
            inputs.append(content_hash(p))
        except FileNotFoundError:
            if missing is None:
                raise RecipeError(f"stage {stage.name}: {p} does not exist") from None
            missing.append(Problem(f"stage {stage.name}", f"{p} does not exist"))
            inputs.append(f"missing:{p}")
    return {
        "settings": content_hash(stage.settings(cfg)),
        "inputs": content_hash(inputs),
        "upstream": content_hash({d: keys[d] for d in stage.deps}),
        "code": code_version(stage.code) if stage.code else "",
    }


def _load_last(out: Path) -> dict[str, Any]:
    try:
        return json.loads((out / "plan.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}


def plan(
    stages: Sequence[Stage],
    vs: Sequence[Variant],
    cache: StageCache,
    out: Path,
    missing: list[Problem] | None = None,
) -> tuple[list[PlanItem], dict[str, dict[str, dict[str, str]]]]:
    """Each variant's stages with their keys and whether they run; also the key parts (for ``plan.json``).
    Missing inputs go to ``missing`` when given (else the first one raises)."""
    last = _load_last(out).get("variants", {})
    items: list[PlanItem] = []
    parts_of: dict[str, dict[str, dict[str, str]]] = {}
    planned: set[tuple[str, str]] = set()
    for v in vs:
        keys: dict[str, str] = {}
        parts_of[v.label] = {}
        for st in stages:
            parts = _key_parts(st, v.config, keys, missing)
            key = stage_key(st.name, parts, code=parts["code"])
            keys[st.name] = key
            parts_of[v.label][st.name] = {**parts, "key": key}
            if cache.lookup(st.name, key) is not None:
                status, why = "cached", []
            elif (st.name, key) in planned:
                status, why = "shared", ["same key as an earlier variant: computed once"]
            else:
                before = (last.get(v.label) or {}).get(st.name) or next(
                    (s[st.name] for s in last.values() if st.name in s), None
                )
                if before is None:
                    status, why = "run", ["not run before"]
                else:
                    status = "rerun"
                    why = [
                        f"{p} changed"
                        for p in ("settings", "inputs", "upstream", "code")
                        if before.get(p) != parts[p]
                    ]
                    why = why or ["its earlier output is gone"]
            planned.add((st.name, key))
            items.append(PlanItem(v.label, st.name, st.title, key, status, why, st.executor))
    return items, parts_of


def _unique(problems: Sequence[Problem]) -> list[Problem]:
    seen, out = set(), []
    for p in problems:
        if str(p) not in seen:
            seen.add(str(p))
            out.append(p)
    return out


def check_before_running(
    stages: Sequence[Stage],
    items: Sequence[PlanItem],
    vs: Sequence[Variant],
    check: Callable[[RecipeConfig], list[Problem]] | None,
    probe: Callable[[Mapping[str, str]], list[Problem]] | None,
    cache: StageCache | None = None,
) -> list[Problem]:
    """Every variant's config problems (``check``); the prechecks of the stages that will run on the data
    they will get, when the stages they read are cached (SFT's ``max_length`` against the curated set);
    then the served models of the stages that will run, probed once each (``probe``)."""
    problems: list[Problem] = []
    if check is not None:
        for v in vs:
            problems += check(v.config)
    if cache is not None:
        by_stage = {s.name: s for s in stages}
        key_of = {(i.variant, i.stage): i.key for i in items}
        cfg_of = {v.label: v.config for v in vs}
        for item in items:
            st = by_stage[item.stage]
            if st.precheck is None or item.status not in ("run", "rerun"):
                continue
            found = {d: cache.lookup(d, key_of[(item.variant, d)]) for d in st.deps}
            upstream = {d: e for d, e in found.items() if e is not None}
            problems += st.precheck(cfg_of[item.variant], upstream)
    if probe is not None:
        by_name = {s.name: s for s in stages}
        configs = {v.label: v.config for v in vs}
        servers: dict[str, str] = {}
        for item in items:
            if item.status in ("run", "rerun", "shared"):
                servers.update(by_name[item.stage].servers(configs[item.variant]))
        problems += probe(servers)
    return _unique(problems)


def run_recipe(
    stages: Sequence[Stage],
    config: RecipeConfig | EngineConfig,
    *,
    sweeps: Mapping[str, Sequence[Any]] | None = None,
    dry_run: bool = False,
    progress: ProgressHook | None = None,
    on_stage: Callable[[PlanItem, str], None] | None = None,
    executor: Any = None,
    finish: Callable[[RecipeResult, list[Variant]], dict[str, Path]] | None = None,
    check: Callable[[RecipeConfig], list[Problem]] | None = None,
    probe: Callable[[Mapping[str, str]], list[Problem]] | None = None,
    allow_empty: bool = False,
    prepare: Callable[[RecipeConfig, Path], RecipeConfig] | None = None,
) -> RecipeResult:
    """Plan, check, then (unless ``dry_run``) run every stage not cached, variant by variant; then
    ``finish`` (the report). ``on_stage(item, "start" | "done" | "cached" | "failed" | "empty")`` follows
    the run.

    **Before the first stage** every problem is collected (``check`` of each variant's config: structure,
    values, paths, context windows; missing inputs; ``probe`` of the served models the stages that will
    run call): a dry run returns them in :attr:`RecipeResult.problems` with the plan, a run raises
    :class:`~datadojo.recipes.config.RecipeProblems` listing them all and runs nothing.

    **A stage that did nothing useful** says so in its manifest (:data:`EMPTY_KEY`); the run stops there
    with :class:`EmptyStage` after writing the report (the stage in red), unless ``allow_empty`` or the
    recipe's ``allow_empty`` lets it go on (the report still shows it in red).

    In a study with ``[study] seeds``, a stage that fails ends only its variant (and the variants that would
    run the same stage key): the other replicates still run, so one diverged seed does not cost the
    others' figure. The report is written with the points short of seeds flagged, the failures go to
    ``OUT/failed.json`` with their tracebacks, and :class:`StudyRunsFailed` is raised after the report;
    the failed stages stay uncommitted, so a rerun retries exactly them. Without seeds, a failure stops
    the run as before.

    ``prepare(config, out)``, called once the run folder is open and before anything is planned, returns
    the configuration to plan and run (the toy student written into the run folder: ``student = "toy"``)."""
    out = config.path(config.out)
    root = RunFolder(out, "recipe", {"recipe": config.recipe}, adopt=False)
    if prepare is not None:
        config = prepare(config, root.path)
    problems: list[Problem] = []
    try:
        vs = variants(config, sweeps)
    except RecipeError as exc:  # the study's arms: reported with the rest, the base config planned
        where, _, what = str(exc).partition(": ")
        problems.append(Problem(where, what) if what else Problem("[study]", where))
        vs = variants(config.model_copy(update={"study": None}), None)
    cache = StageCache(root.path / "stages")
    hook = progress or null_progress
    try:
        missing: list[Problem] = []
        items, parts_of = plan(stages, vs, cache, out, missing)
        found = check_before_running(stages, items, vs, check, probe, cache)
        named = " ".join(str(p) for p in found)  # a missing input the checks named with what to provide
        paths = {p.what: p for p in missing}  # a path several stages read: once
        missing = [p for p in paths.values() if p.what.removesuffix(" does not exist") not in named]
        problems = _unique(problems + found + missing)
        result = RecipeResult(out, items, {}, {}, problems=problems)
        if dry_run:
            return result
        if problems:
            raise RecipeProblems(problems)
        by_name = {s.name: s for s in stages}
        replicated = config.study is not None and config.study.seed_list is not None
        failures: dict[tuple[str, str], dict[str, Any]] = {}  # (stage, key) → what went wrong
        for v in vs:
            result.entries[v.label] = {}
            for item in (i for i in items if i.variant == v.label):
                st = by_name[item.stage]
                if (st.name, item.key) in failures:  # the same stage failed for an earlier variant
                    result.failed[v.label] = f"stage {st.name}: {failures[(st.name, item.key)]['error']}"
                    break
                entry = cache.lookup(st.name, item.key)
                if entry is not None:
                    result.entries[v.label][st.name] = entry
                    if on_stage:
                        on_stage(item, "cached")
                else:
                    if on_stage:
                        on_stage(item, "start")
                    folder = cache.begin(st.name, item.key, parts_of[v.label][st.name])
                    ctx = StageContext(
                        v.config,
                        st,
                        folder.path,
                        {d: result.entries[v.label][d] for d in st.deps},
                        lambda done, total, name=st.name: hook(name, done, total),
                        executor if st.executor else None,
                    )
                    t0 = time.perf_counter()
                    try:
                        manifest = st.run(ctx)
                    except Exception as exc:
                        if not replicated:
                            raise
                        failures[(st.name, item.key)] = {
                            "variant": v.label,
                            "stage": st.name,
                            "key": item.key,
                            "error": f"{type(exc).__name__}: {exc}",
                            "exit_code": int(getattr(exc, "exit_code", ExitCode.BUG)),
                            "traceback": traceback.format_exc(),
                        }
                        result.failed[v.label] = f"stage {st.name}: {type(exc).__name__}: {exc}"
                        if on_stage:
                            on_stage(item, "failed")
                        break
                    seconds = time.perf_counter() - t0
                    result.elapsed[(v.label, st.name)] = seconds
                    # kept beside the stage's manifest (not in it: the manifest is what the stage returned),
                    # so a later run that finds the stage cached still reports the time it took
                    write_json_atomic(folder.path / TIMING_FILE, {"seconds": round(seconds, 3)})
                    entry = result.entries[v.label][st.name] = cache.commit(st.name, item.key, manifest)
                    if on_stage:
                        on_stage(item, "done")
                verdict = entry.manifest.get(EMPTY_KEY)
                if verdict:
                    result.empty[(v.label, st.name)] = str(verdict)
                    if on_stage:
                        on_stage(item, "empty")
                    if not (allow_empty or v.config.allows_empty(st.name)):
                        result.stopped = (
                            f"stage {st.name} ({v.label}) did nothing useful: {verdict}. To go on anyway: "
                            f'allow_empty = ["{st.name}"] in the recipe or --allow-empty'
                        )
                        break
            if result.stopped:
                break
        write_json_atomic(out / "plan.json", {"recipe": config.recipe, "variants": parts_of})
        if failures or (out / "failed.json").exists():
            write_json_atomic(out / "failed.json", {"failed": list(failures.values())})
        if finish is not None:
            result.report = finish(result, vs)
        if result.stopped:
            raise EmptyStage(f"{result.stopped} (report: {out / 'report.md'})")
        if failures:
            first = next(iter(failures.values()))
            shown = "; ".join(f"{label}: {why}" for label, why in list(result.failed.items())[:3])
            more = f" (and {len(result.failed) - 3} more)" if len(result.failed) > 3 else ""
            raise StudyRunsFailed(
                f"{len(result.failed)} of {len(vs)} runs of the study failed: {shown}{more}; the report "
                f"({out / 'report.md'}) flags their points, {out / 'failed.json'} has the tracebacks; rerun "
                "the same command to retry them",
                ExitCode(first["exit_code"]) if first["exit_code"] in set(ExitCode) else ExitCode.BUG,
            )
        return result
    finally:
        cache.close()
