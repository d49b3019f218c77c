"""Stage outputs cached under a key of the inputs' content, the settings and the code/prompt version.

Why: a recipe (or any multi-stage run) rerun after an edit should redo exactly the stages the edit
reaches. A stage's key is the SHA-256 of

* its name and settings (canonical JSON: key order does not matter, values do);
* the *content* of its input files and folders (not their paths or times: a copied corpus is the same
  corpus; an edited byte is a new one);
* the keys of the stages it reads from (so a change upstream reaches every stage below it);
* its code version: the source of the modules (and the prompt/data files of their packages) it runs.

:class:`StageCache` keeps each stage run in ``ROOT/<stage>/<key[:16]>/`` (a :class:`~datadojo.runs.RunFolder`,
so a half-finished run is resumed, never mixed with another), and commits a finished one by one line in
``ROOT/stages.jsonl`` (a :class:`~datadojo.runs.WorkLedger`) after its ``manifest.json`` is written: killed
at any point, a stage is either committed with its manifest or rerun (and resumes on its own files).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datadojo.fs import write_json_atomic
from datadojo.runs.folder import RunFolder
from datadojo.runs.ledger import WorkLedger
from datadojo.version import __version__

__all__ = ["CacheEntry", "StageCache", "code_version", "content_hash", "stage_key"]

_FILE_HASHES: dict[tuple[str, int, int], str] = {}
_SKIP_DIRS = {"__pycache__", ".git"}


#: Files above this size (model weights) are hashed by their size and their first and last MiB, not read
#: whole: a plan over a 15 GB checkpoint must not take minutes. Any rewrite of weights changes both ends.
BIG_FILE = 64 << 20


def _file_hash(path: Path) -> str:
    st = path.stat()
    memo = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if memo not in _FILE_HASHES:
        h = hashlib.sha256()
        with path.open("rb") as fh:
            if st.st_size > BIG_FILE:
                h.update(f"big:{st.st_size}:".encode())
                h.update(fh.read(1 << 20))
                fh.seek(st.st_size - (1 << 20))
                h.update(fh.read(1 << 20))
            else:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
        _FILE_HASHES[memo] = h.hexdigest()
    return _FILE_HASHES[memo]


def _path_digest(path: Path) -> str:
    if path.is_file():
        return "file:" + _file_hash(path)
    if path.is_dir():
        h = hashlib.sha256(b"dir")
        for root, dirs, files in os.walk(path, followlinks=True):
            dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
            for name in sorted(files):
                if name.endswith(".pyc"):
                    continue
                p = Path(root) / name
                h.update(os.path.relpath(p, path).encode("utf-8") + b"\0" + _file_hash(p).encode() + b"\n")
        return "dir:" + h.hexdigest()
    raise FileNotFoundError(f"{path}: not found (a stage input must exist to be hashed)")


def _canonical(value: Any) -> Any:
    if isinstance(value, Path):
        return {"__path__": _path_digest(value)}
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted(_canonical(v) for v in value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if hasattr(value, "model_dump"):
        return _canonical(value.model_dump(mode="json"))
    return str(value)


def content_hash(value: Any) -> str:
    """SHA-256 of ``value``: ``Path`` objects by their content, mappings independent of key order."""
    text = json.dumps(_canonical(value), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def code_version(modules: Sequence[str]) -> str:
    """A hash of the source of ``modules`` (a package: its whole folder, prompts and data files too)."""
    parts: list[str] = [__version__]
    for name in sorted(modules):
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise ModuleNotFoundError(f"code_version: no module {name!r}")
        origin = Path(spec.origin)
        target = origin.parent if origin.name == "__init__.py" else origin
        parts.append(f"{name}={_path_digest(target)}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def stage_key(
    stage: str,
    settings: Mapping[str, Any],
    *,
    inputs: Iterable[Path] = (),
    upstream: Mapping[str, str] | None = None,
    code: str = "",
) -> str:
    """The cache key of one stage run (module docstring)."""
    return content_hash(
        {
            "stage": stage,
            "settings": dict(settings),
            "inputs": [Path(p) for p in inputs],
            "upstream": dict(upstream or {}),
            "code": code,
        }
    )


@dataclass(frozen=True)
class CacheEntry:
    """A committed stage run: its folder and its manifest (what the stage returned)."""

    stage: str
    key: str
    path: Path
    manifest: dict[str, Any]


class StageCache:
    """Stage runs under ``root`` (module docstring)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.ledger = WorkLedger(self.root / "stages.jsonl")

    def path(self, stage: str, key: str) -> Path:
        return self.root / stage / key[:16]

    def lookup(self, stage: str, key: str) -> CacheEntry | None:
        """The committed run of ``stage`` under ``key``, or ``None`` (also when its folder was deleted)."""
        rec = self.ledger.get(f"{stage}:{key}")
        folder = self.path(stage, key)
        manifest_file = folder / "manifest.json"
        if rec is None or not manifest_file.is_file():
            return None
        return CacheEntry(stage, key, folder, json.loads(manifest_file.read_text(encoding="utf-8")))

    def begin(self, stage: str, key: str, settings: Mapping[str, Any]) -> RunFolder:
        """The folder to run ``stage`` in; a half-finished run of the same key is resumed there."""
        return RunFolder(self.path(stage, key), f"stage:{stage}", {"key": key, "settings": dict(settings)})

    def commit(self, stage: str, key: str, manifest: Mapping[str, Any]) -> CacheEntry:
        """Record a finished run: the manifest first, then the ledger line (the commit)."""
        folder = self.path(stage, key)
        data = json.loads(json.dumps(dict(manifest), default=str))
        write_json_atomic(folder / "manifest.json", data)
        self.ledger.commit(f"{stage}:{key}", stage=stage, path=os.path.relpath(folder, self.root))
        return CacheEntry(stage, key, folder, data)

    def close(self) -> None:
        self.ledger.close()
