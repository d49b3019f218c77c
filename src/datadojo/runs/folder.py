"""A run folder: the settings snapshot that made it, and the refusal to resume it with other settings.

Why: a run resumed with changed settings silently mixes outputs of two configurations (half the
trajectories sampled at one temperature, half at another). The eval harness (``run.json`` identity),
DataMind (``config.json``, rewritten each stage) and the trainers (``begin_run``) each did a version of
this; :class:`RunFolder` is the one version: ``run.json`` holds ``kind``, ``settings`` and the DataDojo
version, written atomically before any output, and a reopen compares the settings key by key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from datadojo.errors import ResumeError
from datadojo.fs import close_to_others, write_json_atomic
from datadojo.version import __version__

__all__ = ["RUN_FILE", "RunFolder", "settings_diff"]

RUN_FILE = "run.json"


def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, Mapping):
        out: dict[str, Any] = {}
        for k, v in data.items():
            out.update(_flat(v, f"{prefix}{k}."))
        if not data and prefix:
            out[prefix[:-1]] = {}
        return out
    return {prefix[:-1]: data}


def settings_diff(before: Mapping[str, Any], now: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """``(dotted key, was, now)`` for every setting that differs (missing on one side shows as ``None``)."""
    a, b = _flat(json.loads(json.dumps(before, default=str))), _flat(json.loads(json.dumps(now, default=str)))
    return [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


class RunFolder:
    """``path`` made by a job of ``kind`` with ``settings`` (JSON-able); opening it again resumes it.

    ``ignore`` names top-level settings that may change between resumes without changing what the run
    means (a concurrency, a progress flag). A non-empty folder without ``run.json`` is refused unless
    ``adopt=True``: it was not made by this kind of job and its files would be mixed with ours.
    """

    def __init__(
        self,
        path: str | Path,
        kind: str,
        settings: Mapping[str, Any],
        *,
        ignore: tuple[str, ...] = (),
        adopt: bool = False,
    ) -> None:
        self.path = Path(path)
        self.kind = kind
        self.settings = json.loads(json.dumps(dict(settings), default=str))
        self.ignore = ignore
        self.resumed = False
        self._open(adopt)

    @property
    def record(self) -> Path:
        return self.path / RUN_FILE

    def _open(self, adopt: bool) -> None:
        if self.path.exists() and not self.path.is_dir():
            raise ResumeError(f"{self.path}: exists and is not a folder")
        if self.record.exists():
            try:
                previous = json.loads(self.record.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as exc:
                raise ResumeError(f"{self.record}: cannot read the earlier run's settings ({exc})") from exc
            if previous.get("kind") != self.kind:
                raise ResumeError(
                    f"{self.path} holds a {previous.get('kind')!r} run, not a {self.kind!r} one; choose another folder"
                )
            keep = {k: v for k, v in self.settings.items() if k not in self.ignore}
            was = {k: v for k, v in (previous.get("settings") or {}).items() if k not in self.ignore}
            differ = settings_diff(was, keep)
            if differ:
                parts = "; ".join(f"{k}: was {a!r}, now {b!r}" for k, a, b in differ[:8])
                more = f" (and {len(differ) - 8} more)" if len(differ) > 8 else ""
                raise ResumeError(
                    f"{self.path} holds a run with other settings ({parts}{more}); rerun with the same "
                    "settings to resume it, or choose another folder"
                )
            self.resumed = True
            return
        if self.path.is_dir() and any(self.path.iterdir()) and not adopt:
            raise ResumeError(
                f"{self.path}: not empty and has no {RUN_FILE} (not made by a {self.kind!r} run); choose "
                "another folder or empty it"
            )
        created = not self.path.exists()
        self.path.mkdir(parents=True, exist_ok=True)
        if created:
            close_to_others(self.path)  # a Landlock-level cell may not stat() what a run holds
        write_json_atomic(
            self.record, {"kind": self.kind, "settings": self.settings, "datadojo": __version__}
        )

    def file(self, name: str) -> Path:
        """A path inside the folder."""
        return self.path / name
