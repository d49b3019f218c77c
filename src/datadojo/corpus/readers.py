"""One entry point, :func:`load`, that turns any supported data file into typed tables or a clear error.

Formats: CSV/TSV (:mod:`~datadojo.corpus.csv_reader`), XLSX (:mod:`~datadojo.corpus.xlsx_reader`), SQLite
(:mod:`~datadojo.corpus.sqlite_reader`), Parquet (here) and JSON / JSON Lines
(:mod:`~datadojo.corpus.json_reader`) — the formats DataMind §3.1 collects (``.csv``, ``.xlsx``,
``.sqlite``) plus the two most common columnar exchange formats. The kind is decided by content first
(:func:`datadojo.corpus.sniff.sniff`), so a binary file renamed ``x.csv`` is reported as binary rather than
failing deep inside a CSV parser, and a directory named ``x.csv`` as a directory.

Typical calls::

    from datadojo.corpus import load
    f = load("shop.sqlite")
    for t in f.tables:
        print(t.name, t.primary_key, [str(fk) for fk in t.foreign_keys], t.column_types)

    big = load("huge.csv", max_rows=1000, count_limit=1000)   # never reads more than ~1,001 rows
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from datadojo.corpus.csv_reader import read_csv
from datadojo.corpus.json_reader import read_json
from datadojo.corpus.sniff import Sniffed, sniff
from datadojo.corpus.sqlite_reader import read_sqlite
from datadojo.corpus.tables import LoadedFile, LoadError, ReadOptions, Table
from datadojo.corpus.xlsx_reader import read_xlsx

__all__ = ["frame_of", "load", "load_sniffed", "read_parquet"]

_NOT_TABULAR = {
    "netcdf": "a netCDF file (arrays, not a table)",
    "hdf5": "an HDF5 file (arrays, not a table)",
    "npy": "a NumPy array file",
    "npz": "a NumPy array archive",
    "fits": "a FITS file (images and tables of an observation)",
    "zarr": "a Zarr store (arrays, not a table)",
    "parquet_dataset": "a Parquet dataset split over a folder (profiled as one dataset)",
    "fasta": "a FASTA sequence file",
    "genbank": "a GenBank record file",
    "image": "an image",
    "readme": "a documentation file",
    "metadata": "a metadata file",
    "text": "plain text without a consistent delimiter",
    "archive": "a compressed archive",
}


def read_parquet(path: Path, sniffed: Sniffed, opts: ReadOptions) -> LoadedFile:
    """Read a Parquet file; the row count comes from its footer, rows are read batch by batch."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
        schema = pf.schema_arrow
        n_rows = int(pf.metadata.num_rows)
        batches = []
        kept = 0
        if opts.max_rows != 0:
            size = 65536 if opts.max_rows is None else max(1, min(65536, opts.max_rows))
            for batch in pf.iter_batches(batch_size=size):
                batches.append(batch)
                kept += batch.num_rows
                if opts.max_rows is not None and kept >= opts.max_rows:
                    break
        table = pa.Table.from_batches(batches, schema=schema) if batches else schema.empty_table()
        if opts.max_rows is not None:
            table = table.slice(0, opts.max_rows)
        frame = table.to_pandas()
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise LoadError(
            path, "corrupt", f"not a readable Parquet file ({type(exc).__name__}: {exc})"
        ) from exc
    declared = {f.name: str(f.type) for f in schema}
    t = Table(
        name=path.stem,
        frame=frame,
        declared_types=declared,
        row_count=n_rows,
        row_count_is_lower_bound=False,
    )
    return LoadedFile(path=path, kind="parquet", tables=[t], size_bytes=sniffed.size)


_READERS = {
    "csv": read_csv,
    "xlsx": read_xlsx,
    "sqlite": read_sqlite,
    "parquet": read_parquet,
    "json": read_json,
}


def load(
    path: str | Path,
    *,
    kind: str | None = None,
    options: ReadOptions | None = None,
    **overrides: Any,
) -> LoadedFile:
    """Load a data file as typed tables, or raise :class:`LoadError` saying which file, what and where.

    ``kind`` forces a reader (``csv``, ``xlsx``, ``sqlite``, ``parquet``, ``json``) instead of detecting
    it; ``options`` and keyword ``overrides`` (any :class:`ReadOptions` field, e.g. ``max_rows=1000``)
    say how to read. ``LoadError.reason`` is one of :data:`~datadojo.corpus.tables.LOAD_ERROR_REASONS`:
    ``missing`` (no such file, broken symbolic link), ``not_a_file`` (a directory, FIFO or device),
    ``empty``, ``binary`` (NUL bytes, e.g. a binary renamed ``.csv``), ``encoding``, ``corrupt``,
    ``ragged``, ``not_tabular``, ``no_tables``, ``unsupported`` or ``too_large``.
    """
    opts = (options or ReadOptions()).replace(**overrides) if overrides else (options or ReadOptions())
    return load_sniffed(sniff(Path(path)), kind=kind, options=opts)


def load_sniffed(sn: Sniffed, *, kind: str | None = None, options: ReadOptions | None = None) -> LoadedFile:
    """:func:`load` for a path already classified by :func:`~datadojo.corpus.sniff.sniff` (saves a read)."""
    opts = options or ReadOptions()
    p = sn.path
    if sn.kind == "missing":
        raise LoadError(p, "missing", sn.detail)
    if sn.kind in _NOT_TABULAR and sn.path.is_dir():
        raise LoadError(p, "not_tabular", f"{_NOT_TABULAR[sn.kind]} ({sn.detail}), not a table")
    if sn.kind == "dir":
        raise LoadError(
            p,
            "not_a_file",
            "is a directory, not a data file (use datadojo.corpus.profile_folder or scan_corpus)",
        )
    if sn.kind == "special":
        raise LoadError(p, "not_a_file", sn.detail)
    if sn.kind == "empty":
        raise LoadError(p, "empty", "the file is empty (0 bytes)")
    chosen = kind or sn.kind
    if kind is not None and kind not in _READERS:
        raise ValueError(f"kind must be one of {', '.join(_READERS)}, got {kind!r}")
    if kind is None:
        if sn.kind == "binary":
            raise LoadError(p, "binary", f"{sn.detail}: not a text or known binary data format")
        if sn.kind == "xls":
            raise LoadError(
                p,
                "unsupported",
                "legacy Excel 97-2003 (.xls) is not read (it needs xlrd, not a DataDojo dependency); "
                "save it as .xlsx",
            )
        if sn.kind in _NOT_TABULAR:
            raise LoadError(p, "not_tabular", f"{_NOT_TABULAR[sn.kind]} ({sn.detail}), not a table")
    loaded = _READERS[chosen](p, sn, opts)
    if sn.suffix_mismatch and kind is None:
        loaded.warnings.append(f"content is {sn.kind} although the suffix is {p.suffix}")
    return loaded


def frame_of(path: str | Path, table: str | None = None, **overrides: Any) -> pd.DataFrame:
    """The DataFrame of one table (the only one, or ``table``) — a shortcut for quick scripts."""
    loaded = load(path, **overrides)
    t: Table = loaded.table(table) if table is not None else loaded.tables[0]
    return t.frame
