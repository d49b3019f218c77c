"""Tell what a file is from its first bytes (and, second, its name), without reading it whole.

Why content first: corpora crawled from the web and scientific repositories are full of files whose suffix
lies — a SQLite database saved as ``.db`` or ``.csv``, a binary dump renamed ``.csv``, a sparse file of NUL
bytes. DataMind §3.1 ("Data File Collection and Filtering") discards files that "cannot be loaded"; knowing
the real kind up front lets the reader give one clear reason instead of a parser stack trace. SciDataSailor
(§1, §4.1) explores whole repositories with heterogeneous files (FASTA, GenBank, NetCDF, images, README and
metadata), so the same detection also labels the non-tabular files a folder scan meets.

Only one block (64 KiB) is read, so sniffing a 1 GB file costs the same as sniffing a 1 KB one. Special files
(FIFOs, sockets, devices) are never opened: opening a FIFO would block.

Kind names agree with :data:`datadojo.types.DATA_KINDS` for the tabular kinds (``csv``, ``xlsx``, ``sqlite``,
``parquet``, ``json``, ``dir``); the others are listed in :data:`FILE_KINDS`.
"""

from __future__ import annotations

import csv
import os
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

__all__ = [
    "FILE_KINDS",
    "HEAD_BYTES",
    "STORE_KINDS",
    "TABULAR_KINDS",
    "FileKind",
    "Sniffed",
    "detect_delimiter",
    "sniff",
    "store_kind",
    "store_size",
]

FileKind = Literal[
    "csv",
    "xlsx",
    "sqlite",
    "parquet",
    "json",
    "dir",
    "xls",
    "netcdf",
    "hdf5",
    "npy",
    "npz",
    "fits",
    "zarr",
    "parquet_dataset",
    "fasta",
    "genbank",
    "image",
    "readme",
    "metadata",
    "text",
    "archive",
    "binary",
    "empty",
    "missing",
    "special",
]
FILE_KINDS: tuple[str, ...] = get_args(FileKind)
#: Kinds :func:`datadojo.corpus.readers.load` turns into tables.
TABULAR_KINDS: tuple[str, ...] = ("csv", "xlsx", "sqlite", "parquet", "json")

#: Kinds that are a folder holding one dataset (profiled and scanned as one unit, never walked into).
STORE_KINDS: tuple[str, ...] = ("zarr", "parquet_dataset")

#: How much of a file sniffing reads.
HEAD_BYTES = 1 << 16

_CSV_SUFFIXES = {".csv", ".tsv", ".tab", ".psv"}
_XLSX_SUFFIXES = {".xlsx", ".xlsm"}
_SQLITE_SUFFIXES = {".sqlite", ".sqlite3", ".db", ".db3"}
_JSON_SUFFIXES = {".json", ".jsonl", ".ndjson", ".geojson"}
_FASTA_SUFFIXES = {".fasta", ".fa", ".fna", ".faa", ".ffn", ".frn", ".fas", ".mpfa"}
_GENBANK_SUFFIXES = {".gb", ".gbk", ".genbank", ".gbff"}
_NETCDF_SUFFIXES = {".nc", ".nc4", ".cdf", ".netcdf"}
_HDF5_SUFFIXES = {".h5", ".hdf5", ".hdf", ".he5"}
_IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".gif", ".tif", ".tiff", ".bmp", ".webp", ".svg"}
_README_STEMS = {
    "readme",
    "license",
    "licence",
    "changelog",
    "news",
    "authors",
    "citation",
    "copying",
    "notice",
}
_DOC_SUFFIXES = {".md", ".rst", ".markdown"}
_METADATA_NAMES = {
    "datapackage.json",
    "dataset_description.json",
    "codemeta.json",
    ".zenodo.json",
    "zenodo.json",
    "citation.cff",
    "description",
    "metadata.json",
    "manifest.json",
}
_METADATA_SUFFIXES = {".yaml", ".yml", ".toml", ".cff", ".xml", ".ini", ".cfg"}

_IMAGE_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "PNG image"),
    (b"\xff\xd8\xff", "JPEG image"),
    (b"GIF87a", "GIF image"),
    (b"GIF89a", "GIF image"),
    (b"II*\x00", "TIFF image"),
    (b"MM\x00*", "TIFF image"),
)
_ARCHIVE_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x1f\x8b", "gzip archive"),
    (b"BZh", "bzip2 archive"),
    (b"\xfd7zXZ\x00", "xz archive"),
    (b"(\xb5/\xfd", "zstd archive"),
    (b"7z\xbc\xaf'\x1c", "7-zip archive"),
)
_TEXT_BOMS: tuple[tuple[bytes, str], ...] = (
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xfe\xff", "utf-16-be"),
    (b"\xff\xfe", "utf-16-le"),
)
_DELIMITERS = (",", "\t", ";", "|")


@dataclass(frozen=True)
class Sniffed:
    """What :func:`sniff` found out about one path.

    ``kind`` is decided by content where content is decisive (magic bytes), by name otherwise.
    ``suffix_kind`` is what the suffix alone would say, so callers can report a mismatch. ``bom_encoding``
    is set when the text starts with a byte-order mark. ``detail`` is a short human-readable description
    (``"SQLite 3 database"``, ``"NUL bytes at offset 0 although the suffix says .csv"``).
    """

    path: Path
    kind: FileKind
    size: int
    suffix_kind: str | None
    detail: str
    is_symlink: bool = False
    bom_encoding: str | None = None

    @property
    def is_tabular(self) -> bool:
        """True for the kinds the readers load as tables."""
        return self.kind in TABULAR_KINDS

    @property
    def suffix_mismatch(self) -> bool:
        """True when the suffix names a data kind but the content says otherwise."""
        return (
            self.suffix_kind is not None
            and self.suffix_kind != self.kind
            and self.kind not in ("metadata", "readme")
        )


def _suffix_kind(path: Path) -> str | None:
    s = path.suffix.lower()
    if s in _CSV_SUFFIXES:
        return "csv"
    if s in _XLSX_SUFFIXES:
        return "xlsx"
    if s == ".xls":
        return "xls"
    if s in _SQLITE_SUFFIXES:
        return "sqlite"
    if s in {".parquet", ".pq"}:
        return "parquet"
    if s in _JSON_SUFFIXES:
        return "json"
    return None


def detect_delimiter(sample: str, *, prefer: str | None = None) -> tuple[str, float]:
    """Pick the delimiter among ``, TAB ; |`` that splits the sample's lines most consistently.

    Returns ``(delimiter, consistency)`` where consistency is the fraction of sampled records that have
    the modal field count (1.0 = perfectly rectangular). A delimiter that yields a single field everywhere
    scores 0. Ties go to ``prefer`` (e.g. TAB for ``.tsv``), then to the order above. Quoted fields are
    handled by :mod:`csv`, so a comma inside quotes does not count.
    """
    lines = sample.splitlines()
    if len(lines) > 1 and not sample.endswith(("\n", "\r")):
        lines = lines[:-1]  # the last line of a block may be cut in the middle
    lines = [ln for ln in lines[:200] if ln.strip()]
    candidates: list[tuple[float, bool, int, str]] = []
    for rank, delim in enumerate(_DELIMITERS):
        try:
            rows = list(csv.reader(lines, delimiter=delim))
        except csv.Error:
            continue
        counts = [len(r) for r in rows if r]
        if not counts:
            continue
        modal = max(set(counts), key=counts.count)
        if modal < 2:
            continue
        consistency = round(counts.count(modal) / len(counts), 3)
        candidates.append((consistency, delim == prefer, -rank, delim))
    if not candidates:
        return prefer or ",", 0.0
    best = max(candidates)
    return best[3], best[0]


_ZARR_MARKERS = (".zgroup", ".zarray", "zarr.json", ".zmetadata")
_PARQUET_SIDE_FILES = {"_SUCCESS", "_metadata", "_common_metadata"}


def store_kind(path: Path) -> tuple[FileKind, str] | None:
    """``("zarr", …)`` / ``("parquet_dataset", …)`` when the folder ``path`` is one dataset stored as
    many files, which is profiled (and scanned) as one unit; ``None`` for an ordinary folder.

    A Parquet dataset is a folder whose entries are only ``.parquet`` files (two or more), Hive partition
    folders (``key=value``) and writer side files (``_SUCCESS``, ``_metadata``). At most 1,000 entries are
    looked at, so sniffing a huge folder stays cheap.
    """
    if any((path / m).is_file() for m in _ZARR_MARKERS):
        return "zarr", "Zarr store (folder)"
    n_parts = 0
    partitions = 0
    try:
        with os.scandir(path) as it:
            for i, e in enumerate(it):
                if i >= 1000:
                    break
                name = e.name
                if name.startswith(".") or name in _PARQUET_SIDE_FILES or name.endswith(".crc"):
                    continue
                if e.is_dir(follow_symlinks=False) and "=" in name:
                    partitions += 1
                elif e.is_file(follow_symlinks=False) and name.endswith((".parquet", ".pq")):
                    n_parts += 1
                else:
                    return None
    except OSError:
        return None
    if partitions or n_parts >= 2:
        return "parquet_dataset", "Parquet dataset (folder)"
    return None


def store_size(path: Path, limit: int = 100_000) -> int:
    """Bytes under a store folder (at most ``limit`` files are counted)."""
    total = 0
    seen = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            seen += 1
            if seen > limit:
                return total
            try:
                total += os.stat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total


def _looks_fasta(text: str) -> bool:
    lines = [ln for ln in text.splitlines()[:20] if ln.strip()]
    if len(lines) < 2 or not lines[0].startswith(">"):
        return False
    seq = "".join(ln.strip() for ln in lines[1:] if not ln.startswith(">"))
    return bool(seq) and all(c.isalpha() or c in "*-." for c in seq)


def sniff(path: str | Path) -> Sniffed:
    """Classify ``path`` by its first block of bytes and its name; never raises for an unreadable path.

    Missing paths and broken symbolic links give kind ``missing``; FIFOs, sockets and devices ``special``
    (never opened); directories ``dir``; a file of size 0 ``empty``. A file that cannot be opened for
    reading gives ``missing`` with the OS error in ``detail``.
    """
    p = Path(path)
    is_link = p.is_symlink()
    try:
        st = p.stat()
    except FileNotFoundError:
        detail = f"broken symbolic link to {os.readlink(p)!r}" if is_link else "no such file"
        return Sniffed(p, "missing", 0, _suffix_kind(p), detail, is_link)
    except OSError as exc:
        return Sniffed(p, "missing", 0, _suffix_kind(p), f"cannot stat: {exc.strerror or exc}", is_link)
    suffix_kind = _suffix_kind(p)
    if stat.S_ISDIR(st.st_mode):
        store = store_kind(p)
        if store is not None:
            return Sniffed(p, store[0], store_size(p), suffix_kind, store[1], is_link)
        return Sniffed(p, "dir", 0, suffix_kind, "directory", is_link)
    if not stat.S_ISREG(st.st_mode):
        return Sniffed(p, "special", 0, suffix_kind, "not a regular file (FIFO, socket or device)", is_link)
    size = st.st_size
    if size == 0:
        return Sniffed(p, "empty", 0, suffix_kind, "file is empty (0 bytes)", is_link)
    try:
        with p.open("rb") as fh:
            head = fh.read(HEAD_BYTES)
    except OSError as exc:
        return Sniffed(p, "missing", size, suffix_kind, f"cannot read: {exc.strerror or exc}", is_link)
    kind, detail, bom = _classify(p, head, suffix_kind)
    if suffix_kind is not None and suffix_kind != kind and kind not in ("metadata", "readme"):
        detail = f"{detail} although the suffix says {p.suffix}"
    return Sniffed(p, kind, size, suffix_kind, detail, is_link, bom)


def _classify(p: Path, head: bytes, suffix_kind: str | None) -> tuple[FileKind, str, str | None]:
    suffix = p.suffix.lower()
    name = p.name.lower()
    if head.startswith(b"SQLite format 3\x00"):
        return "sqlite", "SQLite 3 database", None
    if head.startswith(b"PAR1"):
        return "parquet", "Parquet file", None
    if head.startswith(b"\x93NUMPY"):
        return "npy", "NumPy array (.npy)", None
    if head.startswith(b"SIMPLE  =") and head[29:30] == b"T":
        return "fits", "FITS file", None
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        if suffix == ".npz":
            return "npz", "NumPy archive (.npz)", None
        if suffix in _XLSX_SUFFIXES:
            return "xlsx", "Excel workbook (zip)", None
        try:
            with zipfile.ZipFile(p) as zf:
                if any(n.startswith("xl/") for n in zf.namelist()):
                    return "xlsx", "Excel workbook (zip)", None
        except (zipfile.BadZipFile, OSError):
            pass
        return "archive", "zip archive", None
    if head.startswith(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"):
        return "xls", "legacy Excel 97-2003 / OLE2 compound file", None
    if head.startswith(b"\x89HDF\r\n\x1a\n"):
        if suffix in _NETCDF_SUFFIXES:
            return "netcdf", "netCDF-4 file (HDF5 container)", None
        return "hdf5", "HDF5 file", None
    if head.startswith((b"CDF\x01", b"CDF\x02", b"CDF\x05")):
        return "netcdf", "netCDF classic file", None
    for magic, what in _IMAGE_MAGIC:
        if head.startswith(magic):
            return "image", what, None
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image", "WebP image", None
    if head.startswith(b"BM") and suffix == ".bmp":
        return "image", "BMP image", None
    for magic, what in _ARCHIVE_MAGIC:
        if head.startswith(magic):
            return "archive", what, None
    if len(head) > 262 and head[257:262] == b"ustar":
        return "archive", "tar archive", None
    bom = next((enc for magic, enc in _TEXT_BOMS if head.startswith(magic)), None)
    if bom is None and b"\x00" in head:
        offset = head.index(b"\x00")
        return "binary", f"binary content (NUL byte at offset {offset})", None
    if bom is not None and bom != "utf-8-sig":
        text = head.decode(bom, errors="replace").lstrip("\ufeff")
    else:
        text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    return (*_classify_text(p, name, suffix, suffix_kind, text), bom)


def _classify_text(
    p: Path, name: str, suffix: str, suffix_kind: str | None, text: str
) -> tuple[FileKind, str]:
    stripped = text.lstrip()
    stem = name.split(".", 1)[0]
    if name in _METADATA_NAMES:
        return "metadata", "dataset metadata"
    if suffix_kind == "json":
        return "json", "JSON text"
    if suffix_kind == "csv":
        return "csv", "delimited text"
    if suffix in _FASTA_SUFFIXES or _looks_fasta(text):
        return "fasta", "FASTA sequences"
    if suffix in _GENBANK_SUFFIXES or stripped.startswith("LOCUS "):
        return "genbank", "GenBank records"
    if suffix == ".svg" or (suffix in _IMAGE_SUFFIXES and stripped.startswith("<svg")):
        return "image", "SVG image"
    if stem in _README_STEMS or suffix in _DOC_SUFFIXES:
        return "readme", "documentation text"
    if suffix in _METADATA_SUFFIXES:
        return "metadata", f"{suffix[1:].upper()} metadata"
    if stripped[:1] in ("{", "["):
        return "json", "JSON text"
    if suffix in {".txt", ".dat", ".data", ""}:
        delim, consistency = detect_delimiter(text, prefer="\t" if suffix == ".tab" else None)
        if consistency >= 0.9 and len([ln for ln in text.splitlines() if ln.strip()]) >= 2:
            return "csv", f"delimited text ({delim!r})"
    return "text", "plain text"
