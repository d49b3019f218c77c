"""Short profiles of the non-tabular files a scientific dataset folder holds.

SciDataSailor (§1, §4.1) explores "large, hierarchical repositories containing heterogeneous and
interdependent files" — raw measurements, sequences, annotations, metadata and documentation — and its
agents must "inspect files, infer schemas, align metadata". A folder profile therefore describes every
kind it can read, cheaply and in a bounded number of bytes:

* FASTA: record count, sequence length range and mean, alphabet (DNA / RNA / protein), first ids;
* GenBank: record count, locus names, lengths, definitions, organisms, feature keys;
* images: format and pixel size from the header bytes (PNG, GIF, JPEG, BMP, WebP, SVG) — no imaging library;
* README / documentation: title, line and word counts, the first lines;
* metadata (``datapackage.json``, ``DESCRIPTION``, YAML/TOML/CFF): title, keys, declared resources;
* JSON that is not a table: its structure (top-level keys and value types);
* array formats (netCDF, HDF5, NumPy, FITS, Zarr, Parquet datasets): every variable with its units and
  attributes, by :mod:`datadojo.corpus.arrays` (h5py / netCDF4 through the optional ``sci`` extra; without
  a reader the summary says ``format X, reader not installed: pip install …`` and the scan carries on);
* zip archives: member count and first names; plain text: line count and first lines.

Every reader caps what it reads (``max_bytes``) and reports when it stopped early.
"""

from __future__ import annotations

import json
import os
import re
import struct
import zipfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from datadojo.corpus.sniff import Sniffed

__all__ = ["ARRAY_KINDS", "SCI_EXTRA_HINT", "scrub_paths", "summarize"]

SCI_EXTRA_HINT = "format netCDF/HDF5, reader not installed: pip install 'datadojo[sci]' (h5py, netCDF4) to list its variables"
_MAX_BYTES = 64 * 1024 * 1024
_FIRST_LINES = 5
_IUPAC = set("ACGTUNRYKMSWBDHV")


def summarize(sn: Sniffed, *, max_bytes: int = _MAX_BYTES) -> dict[str, Any]:
    """A small JSON-able summary of ``sn.path`` for its kind; ``{}`` for kinds without one.

    Never raises for a bad file: a summary that fails holds ``{"error": ...}`` instead, naming the file
    by its name only (reader messages quote the host path; the agent must not see it).
    """
    fn = _SUMMARIZERS.get(sn.kind)
    if fn is None:
        return {}
    try:
        return fn(sn.path, max_bytes)
    except (OSError, ValueError, UnicodeDecodeError, struct.error, zipfile.BadZipFile) as exc:
        return {"error": scrub_paths(f"{type(exc).__name__}: {exc}", sn.path)}
    except (RuntimeError, KeyError, TypeError, IndexError, EOFError) as exc:
        if sn.kind not in ARRAY_KINDS:  # the array readers' libraries raise these for corrupt files
            raise
        return {"error": scrub_paths(f"{type(exc).__name__}: {exc}", sn.path)}


def scrub_paths(text: str, path: Path) -> str:
    """``text`` with every spelling of ``path`` (as given, absolute, resolved) replaced by its name."""
    spellings = {str(path), os.path.abspath(path), str(Path(path).resolve())}
    for s in sorted((s for s in spellings if s and s != path.name), key=len, reverse=True):
        text = text.replace(s, path.name)
    return text


class _Lines:
    """The decoded lines of a file up to ``max_bytes``; :meth:`note` records in a summary if it stopped early.

    One reader for the line-based summaries (FASTA, GenBank, text), so each of them bounds what it reads
    and reports the cut the same way.
    """

    def __init__(self, path: Path, max_bytes: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.truncated = False

    def __iter__(self) -> Iterator[str]:
        read = 0
        with self.path.open("rb") as fh:
            for raw in fh:
                read += len(raw)
                if read > self.max_bytes:
                    self.truncated = True
                    return
                yield raw.decode("utf-8", errors="replace").rstrip("\r\n")

    def note(self, out: dict[str, Any]) -> dict[str, Any]:
        """``out``, with ``truncated_at_bytes`` added when the file was longer than ``max_bytes``."""
        if self.truncated:
            out["truncated_at_bytes"] = self.max_bytes
        return out


def _fasta(path: Path, max_bytes: int) -> dict[str, Any]:
    lengths: list[int] = []
    ids: list[str] = []
    letters: Counter[str] = Counter()
    current = -1
    lines = _Lines(path, max_bytes)
    for line in lines:
        if line.startswith(">"):
            lengths.append(0)
            current = len(lengths) - 1
            if len(ids) < _FIRST_LINES:
                ids.append(line[1:].split()[0] if line[1:].split() else "")
        elif current >= 0:
            seq = line.strip()
            lengths[current] += len(seq)
            if sum(letters.values()) < 1_000_000:
                letters.update(seq.upper())
    kind = _alphabet(letters)
    out: dict[str, Any] = {"records": len(lengths), "alphabet": kind, "first_ids": ids}
    if lengths:
        out.update(
            length_min=min(lengths),
            length_max=max(lengths),
            length_mean=round(sum(lengths) / len(lengths), 1),
        )
    return lines.note(out)


def _alphabet(letters: Counter[str]) -> str:
    """DNA / RNA when nearly all letters are nucleotides (IUPAC ambiguity codes such as R, Y, N allowed)."""
    total = sum(n for c, n in letters.items() if c.isalpha())
    if not total:
        return "unknown"
    core = sum(letters[c] for c in "ACGTUN")
    if core >= 0.9 * total and set(c for c in letters if c.isalpha()) <= _IUPAC:
        return "RNA" if letters["U"] > letters["T"] else "DNA"
    return "protein"


def _genbank(path: Path, max_bytes: int) -> dict[str, Any]:
    loci: list[dict[str, Any]] = []
    features: Counter[str] = Counter()
    in_features = False
    lines = _Lines(path, max_bytes)
    for line in lines:
        if line.startswith("LOCUS"):
            parts = line.split()
            length = next(
                (
                    int(parts[i - 1])
                    for i, p in enumerate(parts)
                    if p in ("bp", "aa") and i > 0 and parts[i - 1].isdigit()
                ),
                None,
            )
            loci.append({"locus": parts[1] if len(parts) > 1 else "", "length": length})
            in_features = False
        elif line.startswith("DEFINITION") and loci:
            loci[-1].setdefault("definition", line[10:].strip()[:120])
        elif line.startswith("  ORGANISM") and loci:
            loci[-1].setdefault("organism", line[10:].strip())
        elif line.startswith("FEATURES"):
            in_features = True
        elif line.startswith("ORIGIN") or line.startswith("//"):
            in_features = False
        elif in_features and len(line) > 5 and line[:5] == "     " and line[5] != " ":
            features[line[5:21].strip()] += 1
    out: dict[str, Any] = {
        "records": len(loci),
        "loci": loci[:_FIRST_LINES],
        "feature_keys": dict(features.most_common(10)),
    }
    return lines.note(out)


def _image_size(head: bytes, path: Path) -> tuple[str, int | None, int | None]:
    if head.startswith(b"\x89PNG\r\n\x1a\n") and len(head) >= 24:
        w, h = struct.unpack(">II", head[16:24])
        return "PNG", w, h
    if head[:6] in (b"GIF87a", b"GIF89a"):
        w, h = struct.unpack("<HH", head[6:10])
        return "GIF", w, h
    if head.startswith(b"BM") and len(head) >= 26:
        w, h = struct.unpack("<ii", head[18:26])
        return "BMP", w, abs(h)
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        chunk = head[12:16]
        if chunk == b"VP8X" and len(head) >= 30:
            w = int.from_bytes(head[24:27], "little") + 1
            h = int.from_bytes(head[27:30], "little") + 1
            return "WebP", w, h
        return "WebP", None, None
    if head.startswith(b"\xff\xd8"):
        i = 2
        while i + 9 < len(head):
            if head[i] != 0xFF:
                i += 1
                continue
            marker = head[i + 1]
            if marker in (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF):
                h, w = struct.unpack(">HH", head[i + 5 : i + 9])
                return "JPEG", w, h
            if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
                i += 2
                continue
            seg = struct.unpack(">H", head[i + 2 : i + 4])[0]
            i += 2 + seg
        return "JPEG", None, None
    text = head.decode("utf-8", errors="replace")
    if "<svg" in text:
        m = re.search(r"<svg[^>]*?\bwidth=\"([\d.]+)", text)
        n = re.search(r"<svg[^>]*?\bheight=\"([\d.]+)", text)
        return "SVG", int(float(m.group(1))) if m else None, int(float(n.group(1))) if n else None
    if head[:4] in (b"II*\x00", b"MM\x00*"):
        return "TIFF", None, None
    return path.suffix.lstrip(".").upper() or "image", None, None


def _image(path: Path, max_bytes: int) -> dict[str, Any]:
    with path.open("rb") as fh:
        head = fh.read(1 << 16)
    fmt, w, h = _image_size(head, path)
    out: dict[str, Any] = {"format": fmt}
    if w is not None and h is not None:
        out.update(width=w, height=h)
    return out


def _text_like(path: Path, max_bytes: int) -> dict[str, Any]:
    first: list[str] = []
    n_lines = 0
    words = 0
    title = None
    lines = _Lines(path, max_bytes)
    for line in lines:
        n_lines += 1
        words += len(line.split())
        stripped = line.strip()
        if title is None and stripped.startswith("#"):
            title = stripped.lstrip("#").strip()
        if stripped and len(first) < _FIRST_LINES:
            first.append(stripped[:160])
    out: dict[str, Any] = {"lines": n_lines, "words": words, "first_lines": first}
    if title:
        out["title"] = title
    return lines.note(out)


def _json_shape(value: Any, depth: int = 0) -> Any:
    if isinstance(value, dict):
        if depth >= 2:
            return f"object({len(value)} keys)"
        items = list(value.items())[:12]
        return {str(k): _json_shape(v, depth + 1) for k, v in items}
    if isinstance(value, list):
        inner = _json_shape(value[0], depth + 1) if value else "empty"
        return f"array[{len(value)}] of {inner if isinstance(inner, str) else 'object'}"
    return type(value).__name__


def _json_doc(path: Path, max_bytes: int) -> dict[str, Any]:
    if path.stat().st_size > max_bytes:
        return {"note": f"JSON document larger than {max_bytes:,} bytes; structure not read"}
    value = json.loads(path.read_bytes().decode("utf-8-sig"))
    out: dict[str, Any] = {"structure": _json_shape(value)}
    if isinstance(value, dict):
        for key in ("title", "name", "description", "version"):
            if isinstance(value.get(key), str):
                out[key] = value[key][:200]
        resources = value.get("resources")
        if isinstance(resources, list):
            out["resources"] = [
                {k: r.get(k) for k in ("name", "path", "format") if isinstance(r, dict) and r.get(k)}
                for r in resources[:20]
            ]
        licenses = value.get("licenses")
        if isinstance(licenses, list):
            out["licenses"] = [lic.get("name") or lic.get("id") for lic in licenses if isinstance(lic, dict)]
    return out


def _metadata(path: Path, max_bytes: int) -> dict[str, Any]:
    if path.suffix.lower() == ".json":
        try:
            return _json_doc(path, max_bytes)
        except ValueError:
            pass
    out = _text_like(path, max_bytes)
    fields: dict[str, str] = {}
    for line in out.get("first_lines", []):
        m = re.match(r"^([A-Za-z][\w .-]{0,40}?)\s*[:=]\s*(.+)$", line)
        if m:
            fields[m.group(1).strip()] = m.group(2).strip()[:120]
    if fields:
        out["fields"] = fields
    return out


def _archive(path: Path, max_bytes: int) -> dict[str, Any]:
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
            return {"format": "zip", "members": len(names), "first_members": names[:10]}
    return {"format": "compressed", "note": "contents not listed (only zip archives are opened)"}


def _hdf5(path: Path, max_bytes: int) -> dict[str, Any]:
    try:
        import h5py  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        return {"note": SCI_EXTRA_HINT}
    from datadojo.corpus.arrays import summarize_hdf5

    return summarize_hdf5(path)


def _netcdf(path: Path, max_bytes: int) -> dict[str, Any]:
    try:
        import netCDF4  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        with path.open("rb") as fh:
            is_hdf5 = fh.read(8) == b"\x89HDF\r\n\x1a\n"
        if is_hdf5:  # netCDF-4 is HDF5 inside: h5py alone still lists the variables
            out = _hdf5(path, max_bytes)
            if "note" not in out:
                return out
        return {"note": SCI_EXTRA_HINT}
    from datadojo.corpus.arrays import summarize_netcdf

    return summarize_netcdf(path)


def _array_kind(kind: str) -> Any:
    def run(path: Path, max_bytes: int) -> dict[str, Any]:
        from datadojo.corpus.arrays import ARRAY_SUMMARIZERS

        return ARRAY_SUMMARIZERS[kind][0](path)

    return run


_SUMMARIZERS = {
    "fasta": _fasta,
    "genbank": _genbank,
    "image": _image,
    "readme": _text_like,
    "text": _text_like,
    "metadata": _metadata,
    "json": _json_doc,
    "archive": _archive,
    "hdf5": _hdf5,
    "netcdf": _netcdf,
    "npy": _array_kind("npy"),
    "npz": _array_kind("npz"),
    "fits": _array_kind("fits"),
    "zarr": _array_kind("zarr"),
    "parquet_dataset": _array_kind("parquet_dataset"),
}
#: Kinds whose summary *is* the profile: a reader failure makes the file ``unreadable``.
ARRAY_KINDS: tuple[str, ...] = ("netcdf", "hdf5", "npy", "npz", "fits", "zarr", "parquet_dataset")
