"""``datadojo bench download NAME``: fetch a benchmark's files from its public source into a local cache.

Where from: each benchmark declares its :class:`BenchSource` beside its loader (the class attribute
:attr:`~datadojo.bench.base.Benchmark.source`), listing its files and their official URLs. ``url=``
(``--url``), or the environment variable ``DATADOJO_BENCH_URL_<NAME>`` (e.g.
``DATADOJO_BENCH_URL_SPIDER``), replaces the source by a *mirror*: a base URL under which every file sits
at its :attr:`RemoteFile.name` (what a local HTTP server over a folder of the released files gives).
Nothing is ever downloaded except by this command. No source pins a digest: DataDojo pins only digests
checked against the real files, so the first download records them (trust on first use, below).

This module is the mechanics (fetch, verify, unpack) and the types a source is made of; it imports no
benchmark and not the registry, which sit above it.

Where to: ``~/.cache/datadojo/bench/NAME`` (``$XDG_CACHE_HOME`` is honoured; ``$DATADOJO_BENCH_CACHE`` or
``cache_root=`` replace ``~/.cache/datadojo/bench``). The folder ends up in the benchmark's official
layout, ready for ``--data``.

Integrity and safety:

* **SHA-256**: every file is hashed while it streams. A digest pinned in the source or given by the user
  (``--sha256 NAME=HEX``) must match, or the download is refused with both digests named and the bad
  file removed. Without a pin the first download's digest is recorded in the cache's manifest
  (``.datadojo-download.json``) and later downloads of the same file must match it (trust on first use):
  DataDojo does not ship digests it could not check against the real files.
* **Atomic**: a file streams into ``.partial/`` inside the cache and is renamed into place only once
  complete and verified; an archive is unpacked into a temporary folder inside the cache and its entries
  renamed into place, so an interrupted run never leaves a half-written file where a loader looks.
* **Resume-safe**: a rerun skips files the manifest records as done and still present (re-hashing plain
  files), and continues a partial download with an HTTP ``Range`` request (starting over when the server
  ignores it).
* **Archives**: ``.zip`` and ``.tar(.gz|.bz2|.xz)`` are unpacked (``strip_top`` drops the archive's single
  top folder; ``nested`` archives inside it are unpacked in turn, BIRD's ``dev_databases.zip``). Members
  with absolute paths or ``..`` are refused; macOS ``__MACOSX/`` debris is skipped.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tarfile
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

from datadojo.errors import DataDojoError
from datadojo.fs import write_json_atomic

__all__ = [
    "BenchSource",
    "DownloadError",
    "DownloadResult",
    "FileOutcome",
    "RemoteFile",
    "cache_dir",
    "default_cache_root",
    "download_benchmark",
    "fetch_file",
    "listed_files",
    "set_source_lookup",
    "sha256_file",
]

MANIFEST = ".datadojo-download.json"
_CHUNK = 1 << 20
_HEX64 = re.compile(r"[0-9a-f]{64}")
ProgressHook = Callable[[str, int, int | None], None]


class DownloadError(DataDojoError, RuntimeError):
    """A download failed or was refused; the message names the file, the URL and what to do."""


@dataclass(frozen=True)
class RemoteFile:
    """One file of a benchmark's source.

    ``name`` is its path inside the cache folder and under a mirror's base URL (``/``-separated);
    ``url`` the official URL when it is not ``base_url/name``; ``sha256`` a pinned digest (lower-case
    hex) or ``None``; ``unpack`` marks an archive to unpack into the cache (``strip_top``: drop its single
    top folder; ``nested``: archives inside it, paths relative to the cache, to unpack where they lie).
    """

    name: str
    url: str | None = None
    sha256: str | None = None
    unpack: bool = False
    strip_top: bool = False
    nested: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_relative(self.name, "file name")
        if self.sha256 is not None and not _HEX64.fullmatch(self.sha256):
            raise ValueError(f"{self.name}: sha256 must be 64 lower-case hex digits, got {self.sha256!r}")


@dataclass(frozen=True)
class BenchSource:
    """Where a benchmark's files come from: ``files`` under ``base_url`` (each may name its own URL).

    ``discover`` lists further files named by the downloaded ones (DABench's tables are named in its
    questions file), fetched the same way. ``homepage`` and ``licence`` are shown to the user.
    """

    name: str
    base_url: str
    files: tuple[RemoteFile, ...]
    discover: Callable[[Path], list[RemoteFile]] | None = None
    homepage: str = ""
    licence: str = ""
    note: str = ""


@dataclass(frozen=True)
class FileOutcome:
    """What happened to one file: ``downloaded``, ``resumed`` (continued a partial file) or ``cached``."""

    name: str
    url: str
    sha256: str
    size: int
    status: str
    pinned: bool


@dataclass
class DownloadResult:
    """The cache folder (pass it as ``--data``) and what happened to each file."""

    benchmark: str
    path: Path
    files: list[FileOutcome] = field(default_factory=list)


def _check_relative(name: str, what: str) -> None:
    p = PurePosixPath(name)
    if not name or p.is_absolute() or ".." in p.parts or "\\" in name or name.startswith("."):
        raise ValueError(f"{what} {name!r} must be a relative path inside the cache, without '..'")


def listed_files(index: str, key: str, prefix: str) -> Callable[[Path], list[RemoteFile]]:
    """A ``discover`` hook: files named by field ``key`` of the records in ``index`` (JSON list or JSONL).

    A field may hold one name or a list of names; each becomes ``prefix + name``. Names come from
    downloaded data, so each is checked to stay inside the cache.
    """

    def discover(root: Path) -> list[RemoteFile]:
        path = root / index
        text = path.read_text(encoding="utf-8")
        try:
            data = json.loads(text)
            records = data if isinstance(data, list) else [data]
        except json.JSONDecodeError:
            records = []
            for lineno, line in enumerate(text.splitlines(), 1):
                if line.strip():
                    try:
                        records.append(json.loads(line))
                    except json.JSONDecodeError as exc:
                        raise DownloadError(f"{path}:{lineno}: not JSON ({exc.msg})") from exc
        names: dict[str, None] = {}
        for i, rec in enumerate(records):
            value = rec.get(key) if isinstance(rec, dict) else None
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, str) and item.strip():
                    name = prefix + item.strip()
                    try:
                        _check_relative(name, "listed file")
                    except ValueError as exc:
                        raise DownloadError(f"{path} record {i}: {exc}") from exc
                    names[name] = None
        return [RemoteFile(n) for n in names]

    return discover


# --- locations ------------------------------------------------------------------------------------------


def default_cache_root() -> Path:
    """``$DATADOJO_BENCH_CACHE``, else ``${XDG_CACHE_HOME:-~/.cache}/datadojo/bench``."""
    env = os.environ.get("DATADOJO_BENCH_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "datadojo" / "bench"


def cache_dir(name: str, cache_root: str | Path | None = None) -> Path:
    """Where benchmark ``name`` is (or would be) downloaded."""
    return Path(cache_root).expanduser() if cache_root is not None else default_cache_root() / name.lower()


def _env_url(name: str) -> str | None:
    return os.environ.get("DATADOJO_BENCH_URL_" + re.sub(r"[^A-Z0-9]", "_", name.upper())) or None


def _file_url(f: RemoteFile, base: str, mirror: bool) -> str:
    if f.url is not None and not mirror:
        return f.url
    return base.rstrip("/") + "/" + quote(f.name)


# --- one file -------------------------------------------------------------------------------------------


def sha256_file(path: str | Path) -> str:
    """The SHA-256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def fetch_file(
    url: str,
    dest: str | Path,
    *,
    partial: str | Path,
    sha256: str | None = None,
    timeout_s: float = 60.0,
    progress: ProgressHook | None = None,
) -> tuple[str, int, bool]:
    """Download ``url`` to ``dest`` via ``partial`` (resumed if present); return (digest, size, resumed).

    The digest is checked against ``sha256`` when given: on a mismatch the partial file is removed and
    :class:`DownloadError` names both digests. ``dest`` appears only once complete and verified.
    """
    import httpx

    dest, part = Path(dest), Path(partial)
    part.parent.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    offset = part.stat().st_size if part.exists() else 0
    # identity: byte counts, ranges and digests must all refer to the file itself, never a gzip transfer of it
    headers = {"Accept-Encoding": "identity", **({"Range": f"bytes={offset}-"} if offset else {})}
    resumed = False
    try:
        with (
            httpx.Client(follow_redirects=True, timeout=timeout_s) as client,
            client.stream("GET", url, headers=headers) as resp,
        ):
            if resp.status_code == 416 and offset:  # the partial file is no prefix of this resource
                part.unlink()
                return fetch_file(
                    url, dest, partial=part, sha256=sha256, timeout_s=timeout_s, progress=progress
                )
            if resp.status_code not in (200, 206):
                raise DownloadError(f"{url}: HTTP {resp.status_code} {resp.reason_phrase}")
            if resp.status_code == 206 and offset:
                start = re.match(r"bytes (\d+)-", resp.headers.get("content-range", ""))
                if start is None or int(start.group(1)) != offset:
                    part.unlink()
                    raise DownloadError(
                        f"{url}: asked for bytes from {offset}, the server answered "
                        f"{resp.headers.get('content-range')!r}; the partial file was removed, rerun to retry"
                    )
                resumed = True
                with part.open("rb") as fh:
                    while chunk := fh.read(_CHUNK):
                        h.update(chunk)
                mode = "ab"
            else:
                offset, mode = 0, "wb"
            length = resp.headers.get("content-length")
            total = offset + int(length) if length and length.isdigit() else None
            done = offset
            with part.open(mode) as fh:
                for chunk in resp.iter_bytes(_CHUNK):
                    fh.write(chunk)
                    h.update(chunk)
                    done += len(chunk)
                    if progress is not None:
                        progress(dest.name, done, total)
                fh.flush()
                os.fsync(fh.fileno())
    except httpx.HTTPError as exc:
        raise DownloadError(
            f"{url}: {type(exc).__name__}: {exc} (the partial file is kept; rerun to resume)"
        ) from exc
    digest = h.hexdigest()
    if total is not None and done != total:
        raise DownloadError(f"{url}: got {done} of {total} bytes (the partial file is kept; rerun to resume)")
    if sha256 is not None and digest != sha256:
        part.unlink()
        raise DownloadError(
            f"checksum mismatch for {dest.name} from {url}: expected sha256 {sha256}, got {digest}; the "
            "file was removed. If the source changed on purpose, pass --sha256 "
            f"{dest.name}={digest} after checking it."
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.replace(part, dest)
    return digest, done, resumed


# --- archives -------------------------------------------------------------------------------------------


def _safe_member(name: str, archive: Path) -> str | None:
    clean = name.replace("\\", "/")
    p = PurePosixPath(clean)
    if p.is_absolute() or ".." in p.parts:
        raise DownloadError(f"{archive}: member {name!r} would land outside the target folder; refused")
    if not p.parts or p.parts[0] == "__MACOSX" or p.name == ".DS_Store":
        return None
    return clean


def _extract(archive: Path, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                name = _safe_member(info.filename, archive)
                if name is None:
                    continue
                out = target / name
                if info.is_dir():
                    out.mkdir(parents=True, exist_ok=True)
                    continue
                out.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src, out.open("wb") as dst:
                    shutil.copyfileobj(src, dst, _CHUNK)
        return
    try:
        with tarfile.open(archive) as tf:
            members = []
            for m in tf.getmembers():
                if _safe_member(m.name, archive) is None:
                    continue
                if not (m.isfile() or m.isdir()):
                    raise DownloadError(f"{archive}: member {m.name!r} is a link or device; refused")
                members.append(m)
            tf.extractall(target, members=members, filter="data")
    except tarfile.ReadError as exc:
        raise DownloadError(f"{archive}: neither a zip nor a tar archive ({exc})") from exc


def _unpack_into(archive: Path, root: Path, *, strip_top: bool) -> list[str]:
    """Unpack ``archive`` into ``root`` atomically per top-level entry; return the entries placed."""
    tmp = root / f".unpack-{archive.name}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        _extract(archive, tmp)
        src = tmp
        if strip_top:
            entries = [p for p in tmp.iterdir()]
            if len(entries) != 1 or not entries[0].is_dir():
                names = ", ".join(sorted(p.name for p in entries)[:5])
                raise DownloadError(
                    f"{archive}: expected one top folder to strip, found: {names or 'nothing'}"
                )
            src = entries[0]
        placed = []
        for entry in sorted(src.iterdir()):
            dest = root / entry.name
            if dest.is_dir() and not dest.is_symlink():
                shutil.rmtree(dest)
            elif dest.exists() or dest.is_symlink():
                dest.unlink()
            os.replace(entry, dest)
            placed.append(entry.name)
        return placed
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


# --- the manifest ---------------------------------------------------------------------------------------


def _read_manifest(root: Path) -> dict[str, Any]:
    path = root / MANIFEST
    if not path.exists():
        return {"files": {}}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DownloadError(f"{path}: unreadable manifest ({exc}); remove it to download afresh") from exc
    data.setdefault("files", {})
    return data


def _write_manifest(root: Path, data: dict[str, Any]) -> None:
    write_json_atomic(root / MANIFEST, data, sort_keys=True, ensure_ascii=True)


def _is_done(root: Path, f: RemoteFile, entry: dict[str, Any] | None, expected: str | None) -> bool:
    if entry is None or (expected is not None and entry.get("sha256") != expected):
        return False
    if f.unpack:
        return bool(entry.get("unpacked")) and all((root / p).exists() for p in entry.get("placed", []))
    path = root / f.name
    return path.is_file() and sha256_file(path) == entry.get("sha256")


# --- a source by name -----------------------------------------------------------------------------------
#
# The registry sits above this module: it maps names to benchmarks, and each benchmark declares its source
# with this module's types. So this module never imports it; the registry hands its look-up over here
# when it is imported, which ``datadojo/bench/__init__.py`` does before any module of the package runs.

SourceLookup = Callable[[str], BenchSource]
_LOOKUP: list[SourceLookup] = []


def set_source_lookup(lookup: SourceLookup) -> None:
    """Make ``lookup(name)`` how :func:`download_benchmark` finds a source it is not given.

    :mod:`datadojo.bench.registry` installs its ``get_source`` (a benchmark's own source, or one
    registered with ``register_source``); a later call replaces the earlier one.
    """
    _LOOKUP[:] = [lookup]


def _lookup_source(name: str) -> BenchSource:
    if not _LOOKUP:  # only when this module was loaded without its package (never through ``import``)
        raise DownloadError(f"no source given for {name!r} and no benchmark registry loaded; pass source=")
    return _LOOKUP[0](name)


# --- a benchmark ----------------------------------------------------------------------------------------


def download_benchmark(
    name: str,
    *,
    url: str | None = None,
    cache_root: str | Path | None = None,
    sha256: dict[str, str] | None = None,
    force: bool = False,
    timeout_s: float = 60.0,
    progress: ProgressHook | None = None,
    source: BenchSource | None = None,
) -> DownloadResult:
    """Download benchmark ``name`` into its cache folder (module docstring) and return where it is.

    ``url`` is a mirror's base URL (overrides ``$DATADOJO_BENCH_URL_<NAME>`` and the official URLs);
    ``cache_root`` the folder to fill (default :func:`cache_dir`); ``sha256`` pins digests by file name
    (over the source's pins); ``force`` downloads again files already in the cache; ``source`` replaces
    the benchmark's own source (tests, custom benchmarks).
    """
    if source is None:
        source = _lookup_source(name)
    pins = {k: v.lower() for k, v in (sha256 or {}).items()}
    for k, v in pins.items():
        if not _HEX64.fullmatch(v):
            raise DownloadError(f"--sha256 {k}=…: expected 64 hex digits, got {v!r}")
    mirror = url or _env_url(source.name)
    base = mirror or source.base_url
    root = cache_dir(source.name, cache_root)
    root.mkdir(parents=True, exist_ok=True)
    manifest = _read_manifest(root)
    manifest.update(benchmark=source.name, complete=False)
    result = DownloadResult(benchmark=source.name, path=root)
    known = {f.name for f in source.files}
    unknown = sorted(set(pins) - known) if source.discover is None else []
    if unknown:
        raise DownloadError(f"--sha256 names file(s) not in the {source.name} source: {', '.join(unknown)}")

    def one(f: RemoteFile) -> None:
        expected = pins.get(f.name, f.sha256)
        entry = manifest["files"].get(f.name)
        file_url = _file_url(f, base, mirror is not None)
        if not force and _is_done(root, f, entry, expected):
            assert entry is not None
            result.files.append(
                FileOutcome(
                    f.name,
                    entry.get("url", file_url),
                    entry["sha256"],
                    int(entry.get("size", 0)),
                    "cached",
                    expected is not None,
                )
            )
            return
        # Trust on first use: without a pin, a file downloaded before must not have changed.
        check = expected if expected is not None else (entry or {}).get("sha256")
        target = root / ".partial" / (f.name.replace("/", "__") + ".done") if f.unpack else root / f.name
        part = root / ".partial" / (f.name.replace("/", "__") + ".part")
        try:
            digest, size, resumed = fetch_file(
                file_url, target, partial=part, sha256=check, timeout_s=timeout_s, progress=progress
            )
        except DownloadError as exc:
            if check is not None and expected is None and "checksum mismatch" in str(exc):
                raise DownloadError(
                    f"{exc} (the digest checked was the one recorded when {f.name} was first downloaded "
                    f"into {root})"
                ) from exc
            raise
        record: dict[str, Any] = {"url": file_url, "sha256": digest, "size": size, "at": time.time()}
        if f.unpack:
            placed = _unpack_into(target, root, strip_top=f.strip_top)
            for inner in f.nested:
                nested = root / inner
                if not nested.is_file():
                    raise DownloadError(f"{f.name}: the nested archive {inner} is not in it")
                placed += [str(PurePosixPath(inner).parent / p) for p in _unpack_into(
                    nested, nested.parent, strip_top=False)]  # fmt: skip
                nested.unlink()
            target.unlink()
            record.update(unpacked=True, placed=sorted(set(placed)))
        manifest["files"][f.name] = record
        _write_manifest(root, manifest)
        result.files.append(
            FileOutcome(
                f.name, file_url, digest, size, "resumed" if resumed else "downloaded", expected is not None
            )
        )

    for f in source.files:
        one(f)
    if source.discover is not None:
        for f in source.discover(root):
            if f.name not in known:
                one(RemoteFile(f.name, f.url, pins.get(f.name, f.sha256), f.unpack, f.strip_top, f.nested))
    shutil.rmtree(root / ".partial", ignore_errors=True)
    manifest["complete"] = True
    manifest["source"] = base
    _write_manifest(root, manifest)
    return result


def describe_sources(sources: Sequence[BenchSource]) -> list[dict[str, Any]]:
    """One line of facts per source, for ``datadojo bench list``."""
    out = []
    for s in sources:
        root = cache_dir(s.name)
        complete = False
        if (root / MANIFEST).exists():
            try:
                complete = bool(_read_manifest(root).get("complete"))
            except DownloadError:
                complete = False
        out.append(
            {
                "name": s.name,
                "homepage": s.homepage,
                "licence": s.licence,
                "files": len(s.files),
                "cache": str(root),
                "downloaded": complete,
                "note": s.note,
            }
        )
    return out
