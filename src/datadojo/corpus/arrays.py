"""Profiles of array formats the way a scientist reads them: every variable with its units and meaning.

SciDataSailor's tasks turn on "organization, file formats, schemas, metadata fields, key counts/sizes"
(§4.1) and its QA rubric scores 0 for a wrong unit, so a profile of a netCDF, HDF5, Zarr, NumPy, FITS
file or a Parquet dataset lists *every* variable (dataset, HDU, column) with its dimensions or shape,
dtype, units and long name, then the attributes that carry meaning: ``standard_name``, ``cell_methods``,
``_FillValue`` / ``missing_value``, ``scale_factor`` / ``add_offset``, the unlimited dimension, coordinate
variables and their ranges, the value range of data variables, HDF5 group attributes (``NX_class``),
compound fields, chunking and compression.

Every summary has the same shape (``format``, ``dimensions``, ``unlimited``, ``variables``, ``groups``,
``attributes``, ``notes``), so :mod:`datadojo.corpus.render` renders all of them with one budget.

Bounded work, whatever the file size: value ranges come from a *corner sample* of at most
:data:`SAMPLE_VALUES` values per variable (the first values along each axis, read as one hyperslab), and
say how many values they cover (``range.sampled`` of ``range.of``). 1-D coordinate variables are read
whole up to a million values (their first and last value otherwise). At most :data:`MAX_VARIABLES`
variables are described; the rest are counted.

Readers: h5py / netCDF4 (the ``sci`` extra) for HDF5 and netCDF; NumPy (a base dependency) for
``.npy`` / ``.npz`` (headers parsed, values read by offset, never unpickled); FITS headers and image
samples are parsed here (the format is 2880-byte blocks of 80-character cards, no library needed);
Zarr metadata (``.zarray`` / ``.zattrs`` / ``.zmetadata`` / ``zarr.json``) is JSON read here, its values
need ``zarr``; Parquet datasets use pyarrow footers (row counts, row-group statistics). Where a reader is
missing the summary says ``format X, reader not installed: pip install …`` (:func:`reader_hint`).

A file a reader refuses raises :class:`ArrayReadError` (or the reader's own error); the caller records
the file as ``unreadable`` with the reason.
"""

from __future__ import annotations

import json
import math
import os
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from datadojo.errors import DataDojoError

__all__ = [
    "MAX_VARIABLES",
    "SAMPLE_VALUES",
    "ArrayReadError",
    "corner",
    "parquet_parts",
    "reader_hint",
    "summarize_fits",
    "summarize_hdf5",
    "summarize_netcdf",
    "summarize_npy",
    "summarize_npz",
    "summarize_parquet_dataset",
    "summarize_zarr",
    "value_range",
]

#: Most values read per variable for its range (a corner hyperslab: bounded memory for any file size).
SAMPLE_VALUES = 65_536
#: Most variables (datasets, HDUs, columns, members) described per file; the rest are counted.
MAX_VARIABLES = 200
#: 1-D coordinate variables up to this many values are read whole for their range.
_COORD_VALUES = 1_000_000
_ATTR_CHARS = 200
_MAX_ATTRS = 30
#: HDF5 attributes of the dimension-scale machinery: structure, not meaning.
_H5_SKIP_ATTRS = {"DIMENSION_LIST", "REFERENCE_LIST", "CLASS", "NAME", "_Netcdf4Dimid", "_Netcdf4Coordinates"}
_CORE_ATTRS = ("units", "long_name")


class ArrayReadError(DataDojoError, ValueError):
    """The file is not what its header promises (truncated, corrupt); the message says what and where."""


def reader_hint(fmt: str, install: str) -> str:
    """The note a profile carries when the reader for ``fmt`` is not installed."""
    return f"format {fmt}, reader not installed: pip install {install}"


def corner(shape: tuple[int, ...], budget: int = SAMPLE_VALUES) -> tuple[slice, ...]:
    """The leading hyperslab of at most ``budget`` values: whole last axes first, then leading ones.

    One contiguous-ish read per variable, so a chunked, compressed 1 GB dataset costs one or a few chunks.
    """
    out: list[slice] = []
    left = max(1, budget)
    for n in reversed(shape):
        k = max(1, min(int(n), left))
        out.append(slice(0, k))
        left = max(1, left // k)
    return tuple(reversed(out))


def _size(shape: tuple[int, ...] | list[int]) -> int:
    return int(math.prod(int(n) for n in shape)) if shape else 1


def _plain(v: Any) -> Any:
    """An attribute value as JSON: numbers, short strings, short lists."""
    if isinstance(v, bytes | np.bytes_):
        v = bytes(v).decode("utf-8", errors="replace")
    if isinstance(v, np.ndarray):
        if v.size == 1:
            return _plain(v.reshape(-1)[0])
        items = [_plain(x) for x in v.reshape(-1)[:8].tolist()]
        return items + ([f"… {v.size - 8} more"] if v.size > 8 else [])
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        return float(f"{v:.6g}")
    if isinstance(v, int | bool) or v is None:
        return v
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v[:8]]
    text = " ".join(str(v).split())
    return text if len(text) <= _ATTR_CHARS else text[: _ATTR_CHARS - 1] + "…"


def value_range(values: Any, *, of: int, fill: Any = None) -> dict[str, Any] | None:
    """``{min, max, mean, sampled, of, missing}`` of numeric ``values`` (masked, NaN and ``fill`` left out).

    ``None`` for non-numeric data (strings, compound records, objects).
    """
    arr = np.ma.asarray(values)
    if arr.dtype.kind not in "biuf":
        return None
    flat = arr.reshape(-1)
    sampled = int(flat.size)
    if arr.dtype.kind == "f":
        flat = np.ma.masked_invalid(flat)
    if fill is not None:
        try:
            flat = np.ma.masked_equal(flat, np.asarray(fill).reshape(-1)[0])
        except (TypeError, ValueError, IndexError):
            pass
    good = flat.compressed()
    out: dict[str, Any] = {"sampled": sampled, "of": int(of), "missing": int(sampled - good.size)}
    if good.size:
        if good.dtype.kind == "b":
            good = good.astype("int8")
        out.update(min=_plain(good.min()), max=_plain(good.max()), mean=_plain(float(good.mean())))
    return out


def _var(
    name: str,
    *,
    shape: tuple[int, ...] | list[int],
    dtype: str,
    dims: list[str] | None = None,
    attrs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A variable record: the core fields first (name, dims, shape, dtype, units, long_name), then attrs."""
    attrs = dict(attrs or {})
    rec: dict[str, Any] = {"name": name}
    if dims:
        rec["dims"] = list(dims)
    rec["shape"] = [int(n) for n in shape]
    rec["dtype"] = dtype
    for key in _CORE_ATTRS:
        if key in attrs:
            rec[key] = _plain(attrs.pop(key))
    if attrs:
        rec["attrs"] = {str(k): _plain(v) for k, v in list(attrs.items())[:_MAX_ATTRS]}
    return rec


def _summary(fmt: str) -> dict[str, Any]:
    return {"format": fmt, "variables": []}


def _finish(out: dict[str, Any], total: int) -> dict[str, Any]:
    if total > len(out["variables"]):
        out["variables_not_described"] = total - len(out["variables"])
    return {k: v for k, v in out.items() if v not in ({}, [], None) or k == "variables"}


# --------------------------------------------------------------------------- netCDF


def summarize_netcdf(path: Path) -> dict[str, Any]:
    """A netCDF file (classic or netCDF-4) through netCDF4: dimensions, every variable, groups, globals."""
    import netCDF4  # type: ignore[import-not-found]

    with netCDF4.Dataset(path, "r") as ds:
        out = _summary(f"netCDF ({ds.data_model})")
        out["dimensions"] = {}
        out["unlimited"] = []
        out["groups"] = []
        total = 0
        for prefix, grp in _nc_groups(ds):
            if prefix:
                out["groups"].append(
                    {
                        "name": prefix,
                        "attrs": {k: _plain(grp.getncattr(k)) for k in grp.ncattrs()[:_MAX_ATTRS]},
                    }
                )
            for name, dim in grp.dimensions.items():
                key = f"{prefix}/{name}" if prefix else name
                out["dimensions"][key] = len(dim)
                if dim.isunlimited():
                    out["unlimited"].append(key)
            for name, var in grp.variables.items():
                total += 1
                if len(out["variables"]) < MAX_VARIABLES:
                    out["variables"].append(_nc_var(f"{prefix}/{name}" if prefix else name, var, grp))
        out["attributes"] = {k: _plain(ds.getncattr(k)) for k in ds.ncattrs()[:_MAX_ATTRS]}
    return _finish(out, total)


def _nc_groups(ds: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    yield prefix, ds
    for name, sub in ds.groups.items():
        yield from _nc_groups(sub, f"{prefix}/{name}" if prefix else name)


def _nc_var(name: str, var: Any, grp: Any) -> dict[str, Any]:
    attrs = {k: var.getncattr(k) for k in var.ncattrs()}
    rec = _var(name, shape=tuple(var.shape), dtype=str(var.dtype), dims=list(var.dimensions), attrs=attrs)
    is_coord = len(var.dimensions) == 1 and var.dimensions[0] == name.rsplit("/", 1)[-1]
    if is_coord:
        rec["coordinate"] = True
    try:
        chunking = var.chunking()
        if isinstance(chunking, list):
            rec["chunks"] = [int(c) for c in chunking]
        filters = var.filters() or {}
        comp = [
            f"{k} level {filters.get('complevel')}" if k == "zlib" else k
            for k in ("zlib", "szip", "zstd", "bzip2", "blosc")
            if filters.get(k)
        ]
        if filters.get("shuffle"):
            comp.append("shuffle")
        if comp:
            rec["compression"] = ", ".join(comp)
    except (AttributeError, RuntimeError, TypeError):
        pass  # classic files have neither
    n = _size(var.shape)
    if n == 0 or var.dtype is str or getattr(var.dtype, "kind", "O") not in "biuf":
        return rec
    try:
        if is_coord and n <= _COORD_VALUES:
            values = var[:]
        elif is_coord:
            values = np.ma.concatenate([np.ma.atleast_1d(var[0]), np.ma.atleast_1d(var[n - 1])])
        else:
            values = var[corner(tuple(var.shape))]
        rng = value_range(values, of=n)
    except (ValueError, TypeError) as exc:  # odd attributes (a text scale_factor): keep the rest
        rec["note"] = f"values not read: {type(exc).__name__}: {exc}"[:200]
        return rec
    if rng is not None:
        rec["range"] = rng
        units = str(attrs.get("units", ""))
        if is_coord and " since " in units and "min" in rng:
            try:
                import netCDF4

                cal = str(attrs.get("calendar", "standard"))
                lo, hi = netCDF4.num2date([rng["min"], rng["max"]], units, cal)
                rng["dates"] = [str(lo), str(hi)]
            except (ValueError, TypeError, ImportError):
                pass
    return rec


# --------------------------------------------------------------------------- HDF5


def summarize_hdf5(path: Path) -> dict[str, Any]:
    """An HDF5 file through h5py: every group with its attributes, every dataset with shape, dtype,
    units, compound fields, chunking, compression and a sampled value range."""
    import h5py  # type: ignore[import-not-found]

    out = _summary("HDF5")
    out["groups"] = []
    total = 0
    with h5py.File(path, "r") as f:

        def visit(name: str, obj: Any) -> None:
            nonlocal total
            if isinstance(obj, h5py.Group):
                attrs = _h5_attrs(obj)
                if len(out["groups"]) < MAX_VARIABLES:
                    out["groups"].append({"name": name, **({"attrs": attrs} if attrs else {})})
            elif isinstance(obj, h5py.Dataset):
                total += 1
                if len(out["variables"]) < MAX_VARIABLES:
                    out["variables"].append(_h5_dataset(name, obj))

        f.visititems(visit)
        out["attributes"] = _h5_attrs(f)
    return _finish(out, total)


def _h5_attrs(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k in list(obj.attrs.keys())[: _MAX_ATTRS + len(_H5_SKIP_ATTRS)]:
        if k in _H5_SKIP_ATTRS:
            continue
        try:
            out[str(k)] = _plain(obj.attrs[k])
        except (OSError, TypeError, ValueError) as exc:  # unreadable attribute type
            out[str(k)] = f"<unreadable: {type(exc).__name__}>"
    return out


def _h5_dataset(name: str, ds: Any) -> dict[str, Any]:
    import h5py

    dims = [d.label for d in ds.dims] if ds.ndim else []
    dtype = "compound" if ds.dtype.names else str(ds.dtype)
    if h5py.check_string_dtype(ds.dtype) is not None:
        dtype = "string"
    rec = _var(
        name,
        shape=tuple(ds.shape or ()),
        dtype=dtype,
        dims=dims if any(dims) else None,
        attrs=_h5_attrs(ds),
    )
    if ds.dtype.names:
        rec["fields"] = [{"name": n, "dtype": str(ds.dtype.fields[n][0])} for n in ds.dtype.names[:50]]
    if ds.chunks:
        rec["chunks"] = list(ds.chunks)
    comp = (
        [f"{ds.compression}" + (f" level {ds.compression_opts}" if ds.compression_opts is not None else "")]
        if ds.compression
        else []
    )
    if ds.shuffle:
        comp.append("shuffle")
    if comp:
        rec["compression"] = ", ".join(comp)
    if ds.maxshape and any(m is None for m in ds.maxshape):
        rec["unlimited_axes"] = [i for i, m in enumerate(ds.maxshape) if m is None]
    n = _size(ds.shape or ())
    if ds.shape is None or n == 0 or ds.dtype.kind not in "biuf":
        return rec
    fill = rec.get("attrs", {}).get("_FillValue", rec.get("attrs", {}).get("missing_value"))
    try:
        values = ds[corner(tuple(ds.shape))] if ds.ndim else ds[()]
        rng = value_range(values, of=n, fill=fill)
    except (ValueError, TypeError) as exc:  # a dtype h5py cannot convert; OSError (corrupt) propagates
        rec["note"] = f"values not read: {type(exc).__name__}: {exc}"[:200]
        return rec
    if rng is not None:
        rec["range"] = rng
    return rec


# --------------------------------------------------------------------------- NumPy


def _npy_header(fh: Any, where: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    try:
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            return np.lib.format.read_array_header_1_0(fh)
        return np.lib.format.read_array_header_2_0(fh)
    except (ValueError, EOFError) as exc:
        raise ArrayReadError(f"{where}: not a valid .npy header ({exc})") from exc


def _npy_record(name: str, fh: Any, data_bytes: int | None, where: str) -> dict[str, Any]:
    shape, fortran, dtype = _npy_header(fh, where)
    n = _size(shape)
    rec = _var(name, shape=shape, dtype=str(dtype) if dtype.names is None else "compound")
    if fortran:
        rec["order"] = "Fortran (column-major)"
    if dtype.names:
        rec["fields"] = [{"name": f, "dtype": str(dtype.fields[f][0])} for f in dtype.names[:50]]
    if dtype.hasobject:
        rec["note"] = "Python objects (pickled): values not loaded, loading would run code"
        return rec
    if data_bytes is not None and data_bytes < n * dtype.itemsize:
        raise ArrayReadError(
            f"{where}: truncated: the header promises {n * dtype.itemsize:,} bytes of data, the file holds {data_bytes:,}"
        )
    k = min(n, SAMPLE_VALUES)
    raw = fh.read(k * dtype.itemsize)
    if dtype.kind in "biuf" and k:
        rng = value_range(np.frombuffer(raw, dtype=dtype, count=k), of=n)
        if rng is not None:
            rec["range"] = rng
    return rec


def summarize_npy(path: Path) -> dict[str, Any]:
    """A ``.npy`` array: shape, dtype, order and a range over its first values (read by offset)."""
    out = _summary("NumPy .npy")
    size = path.stat().st_size
    with path.open("rb") as fh:
        _npy_header(fh, path.name)
        start = fh.tell()
        fh.seek(0)
        out["variables"].append(_npy_record(path.stem, fh, size - start, path.name))
    return _finish(out, 1)


def summarize_npz(path: Path) -> dict[str, Any]:
    """A ``.npz`` archive: every member array with shape, dtype and a range over its first values
    (streamed from the zip member: at most :data:`SAMPLE_VALUES` values are decompressed)."""
    out = _summary("NumPy .npz")
    try:
        zf = zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        raise ArrayReadError(f"{path.name}: not a readable zip archive ({exc})") from exc
    with zf:
        members = [i for i in zf.infolist() if i.filename.endswith(".npy")]
        compressed = any(i.compress_type != zipfile.ZIP_STORED for i in members)
        out["attributes"] = {"members": len(members), "compressed": compressed}
        for info in members[:MAX_VARIABLES]:
            with zf.open(info) as fh:
                where = f"{path.name}/{info.filename}"
                out["variables"].append(_npy_record(info.filename[:-4], fh, None, where))
    return _finish(out, len(members))


# --------------------------------------------------------------------------- FITS

_FITS_BLOCK = 2880
_BITPIX = {8: ">u1", 16: ">i2", 32: ">i4", 64: ">i8", -32: ">f4", -64: ">f8"}


def _fits_cards(fh: Any, where: str) -> dict[str, Any]:
    """One header: ``{KEY: value}`` until ``END`` (at most 100 blocks)."""
    cards: dict[str, Any] = {}
    for _ in range(100):
        block = fh.read(_FITS_BLOCK)
        if not block:
            return {}
        if len(block) < _FITS_BLOCK:
            raise ArrayReadError(f"{where}: truncated header block ({len(block)} of {_FITS_BLOCK} bytes)")
        text = block.decode("ascii", errors="replace")
        for i in range(0, _FITS_BLOCK, 80):
            card = text[i : i + 80]
            key = card[:8].strip()
            if key == "END":
                return cards
            if card[8:10] != "= " or not key:
                continue
            cards.setdefault(key, _fits_value(card[10:]))
    raise ArrayReadError(f"{where}: no END card in the first 100 header blocks")


def _fits_value(raw: str) -> Any:
    s = raw.strip()
    if s.startswith("'"):
        end = s.find("'", 1)
        while end != -1 and s[end + 1 : end + 2] == "'":  # '' is an escaped quote
            end = s.find("'", end + 2)
        return s[1:end].replace("''", "'").rstrip() if end != -1 else s[1:].rstrip()
    s = s.split("/", 1)[0].strip()
    if s in ("T", "F"):
        return s == "T"
    for cast in (int, float):
        try:
            return cast(s.replace("D", "E")) if cast is float else cast(s)
        except ValueError:
            continue
    return s


def summarize_fits(path: Path) -> dict[str, Any]:
    """A FITS file, parsed here: every HDU (primary, IMAGE, BINTABLE, TABLE) with its shape in NumPy
    order, dtype from BITPIX, BUNIT, BSCALE/BZERO, table columns with TTYPE/TFORM/TUNIT, and for images
    a range over the first values (scaled)."""
    out = _summary("FITS")
    size = path.stat().st_size
    total = 0
    with path.open("rb") as fh:
        for index in range(10_000):
            cards = _fits_cards(fh, f"{path.name} HDU {index}")
            if not cards:
                break
            total += 1
            data_start = fh.tell()
            bitpix = int(cards.get("BITPIX", 8))
            naxes = [int(cards.get(f"NAXIS{i}", 0)) for i in range(1, int(cards.get("NAXIS", 0)) + 1)]
            count = _size(naxes) if naxes else 0
            nbytes = abs(bitpix) // 8 * int(cards.get("GCOUNT", 1)) * (int(cards.get("PCOUNT", 0)) + count)
            if data_start + nbytes > size:
                raise ArrayReadError(
                    f"{path.name} HDU {index}: truncated: the header promises {nbytes:,} bytes of data, "
                    f"{max(size - data_start, 0):,} remain"
                )
            if len(out["variables"]) < MAX_VARIABLES:
                out["variables"].append(_fits_hdu(index, cards, naxes, bitpix, fh, data_start))
            if index == 0:
                keep = ("TELESCOP", "INSTRUME", "OBJECT", "DATE-OBS", "ORIGIN", "OBSERVER", "EQUINOX")
                out["attributes"] = {k: _plain(cards[k]) for k in keep if k in cards}
            fh.seek(data_start + -(-nbytes // _FITS_BLOCK) * _FITS_BLOCK)
            if fh.tell() >= size:
                break
    return _finish(out, total)


def _fits_hdu(
    index: int, cards: dict[str, Any], naxes: list[int], bitpix: int, fh: Any, at: int
) -> dict[str, Any]:
    xt = str(cards.get("XTENSION", "PRIMARY")).strip()
    name = str(cards.get("EXTNAME", "PRIMARY" if index == 0 else f"HDU{index}"))
    attrs: dict[str, Any] = {"hdu": index, "type": xt}
    for key in ("BUNIT", "BSCALE", "BZERO", "BLANK", "CTYPE1", "CTYPE2", "CUNIT1", "CUNIT2"):
        if key in cards:
            attrs[key] = cards[key]
    if xt in ("BINTABLE", "TABLE"):
        n_fields = int(cards.get("TFIELDS", 0))
        rows = naxes[1] if len(naxes) > 1 else 0
        rec = _var(name, shape=(rows,), dtype="table", attrs=attrs)
        rec["fields"] = [
            {
                "name": str(cards.get(f"TTYPE{i}", f"col{i}")),
                "dtype": str(cards.get(f"TFORM{i}", "")),
                **({"units": str(cards[f"TUNIT{i}"])} if f"TUNIT{i}" in cards else {}),
            }
            for i in range(1, min(n_fields, 50) + 1)
        ]
        if cards.get("ZIMAGE") is True:
            rec["note"] = "tile-compressed image: " + reader_hint("FITS (compressed)", "astropy")
        return rec
    shape = tuple(reversed(naxes))  # NAXIS1 varies fastest: NumPy order is the reverse
    unit = cards.get("BUNIT")
    rec = _var(
        name,
        shape=shape,
        dtype=np.dtype(_BITPIX.get(bitpix, ">u1")).name,
        attrs={"units": unit, **attrs} if unit else attrs,
    )
    rec.get("attrs", {}).pop("BUNIT", None)
    n = _size(shape) if shape else 0
    if n and bitpix in _BITPIX:
        k = min(n, SAMPLE_VALUES)
        fh.seek(at)
        values = np.frombuffer(fh.read(k * abs(bitpix) // 8), dtype=_BITPIX[bitpix], count=k).astype(
            "float64"
        )
        blank = cards.get("BLANK")
        if blank is not None and bitpix > 0:
            values = np.where(values == blank, np.nan, values)
        values = values * float(cards.get("BSCALE", 1.0)) + float(cards.get("BZERO", 0.0))
        rng = value_range(values, of=n)
        if rng is not None:
            rec["range"] = rng
    return rec


# --------------------------------------------------------------------------- Zarr


def _read_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ArrayReadError(
            f"{path.name}: not readable JSON metadata ({type(exc).__name__}: {exc})"
        ) from exc
    if not isinstance(value, dict):
        raise ArrayReadError(f"{path.name}: metadata is not a JSON object")
    return value


def _zarr_nodes(root: Path) -> Iterator[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    """``(name, "array" | "group", metadata, attributes)`` of every node of a Zarr v2 or v3 store."""
    consolidated = root / ".zmetadata"
    if consolidated.is_file():
        meta = _read_json(consolidated).get("metadata", {})
        for key in sorted(meta):
            node, _, leaf = key.rpartition("/")
            if leaf in (".zarray", ".zgroup"):
                yield (
                    node,
                    "array" if leaf == ".zarray" else "group",
                    meta[key],
                    meta.get(f"{node}/.zattrs" if node else ".zattrs", {}),
                )
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.isdigit() and d != "c")  # chunk folders
        rel = Path(dirpath).relative_to(root).as_posix()
        name = "" if rel == "." else rel
        if "zarr.json" in filenames:
            meta = _read_json(Path(dirpath) / "zarr.json")
            yield name, str(meta.get("node_type", "group")), meta, dict(meta.get("attributes") or {})
        for leaf, kind in ((".zarray", "array"), (".zgroup", "group")):
            if leaf in filenames:
                attrs_file = Path(dirpath) / ".zattrs"
                attrs = _read_json(attrs_file) if attrs_file.is_file() else {}
                yield name, kind, _read_json(Path(dirpath) / leaf), attrs


def summarize_zarr(path: Path) -> dict[str, Any]:
    """A Zarr store (a folder; v2 or v3): every array with shape, dims, dtype, chunks, compressor, fill
    value and attributes from its JSON metadata; value ranges through ``zarr`` when it is installed."""
    out = _summary("Zarr")
    out["groups"] = []
    total = 0
    version = None
    try:
        import zarr  # type: ignore[import-not-found]
    except ImportError:
        zarr = None
    opened = None
    for name, kind, meta, attrs in _zarr_nodes(path):
        version = version or meta.get("zarr_format")
        attrs = dict(attrs)
        if kind == "group":
            if name:
                out["groups"].append(
                    {"name": name, **({"attrs": {k: _plain(v) for k, v in attrs.items()}} if attrs else {})}
                )
            else:
                out["attributes"] = {k: _plain(v) for k, v in list(attrs.items())[:_MAX_ATTRS]}
            continue
        total += 1
        if len(out["variables"]) >= MAX_VARIABLES:
            continue
        dims = attrs.pop("_ARRAY_DIMENSIONS", None) or meta.get("dimension_names")
        dtype = meta.get("dtype") or meta.get("data_type")
        try:
            dtype = np.dtype(dtype).name if isinstance(dtype, str) else dtype
        except TypeError:
            pass
        rec = _var(
            name or path.stem, shape=tuple(meta.get("shape", ())), dtype=str(dtype), dims=dims, attrs=attrs
        )
        chunks = meta.get("chunks") or (
            meta.get("chunk_grid", {}).get("configuration", {}).get("chunk_shape")
        )
        if chunks:
            rec["chunks"] = list(chunks)
        comp = meta.get("compressor")
        codecs = [
            c.get("name") for c in meta.get("codecs", []) if isinstance(c, dict) and c.get("name") != "bytes"
        ]
        if comp or codecs:
            rec["compression"] = (
                str(comp.get("id")) if isinstance(comp, dict) else ", ".join(map(str, codecs))
            )
        if meta.get("fill_value") is not None:
            rec["fill_value"] = _plain(meta["fill_value"])
        if zarr is not None and rec["shape"]:
            try:
                opened = opened or zarr.open(str(path), mode="r")
                arr = opened[name] if name else opened
                rng = value_range(
                    arr[corner(tuple(arr.shape))], of=_size(rec["shape"]), fill=meta.get("fill_value")
                )
                if rng is not None:
                    rec["range"] = rng
            except Exception as exc:  # a store zarr refuses keeps its metadata profile
                rec["note"] = f"values not read: {type(exc).__name__}: {exc}"[:200]
        out["variables"].append(rec)
    if version is None:
        raise ArrayReadError(f"{path.name}: no Zarr metadata (.zarray, .zgroup or zarr.json)")
    out["format"] = f"Zarr v{version}"
    if zarr is None and total:
        out["notes"] = ["value ranges not read: " + reader_hint("Zarr", "zarr")]
    return _finish(out, total)


# --------------------------------------------------------------------------- Parquet datasets

_MAX_FOOTERS = 500


def parquet_parts(root: Path, limit: int = 100_000) -> list[Path]:
    """The ``.parquet`` files of a dataset folder (Hive partitions ``key=value/`` included), sorted."""
    parts: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "_")))
        parts.extend(Path(dirpath) / f for f in sorted(filenames) if f.endswith((".parquet", ".pq")))
        if len(parts) >= limit:
            break
    return parts


def summarize_parquet_dataset(path: Path) -> dict[str, Any]:
    """A Parquet dataset split over a folder: files, partition keys, the schema, the row count from the
    footers (of the first :data:`_MAX_FOOTERS` files) and each column's range from row-group statistics."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        return {"format": "Parquet dataset", "note": reader_hint("Parquet", "pyarrow")}
    parts = parquet_parts(path)
    if not parts:
        raise ArrayReadError(f"{path.name}: no .parquet files")
    out = _summary("Parquet dataset")
    partitions: dict[str, set[str]] = {}
    for p in parts:
        for seg in p.relative_to(path).parts[:-1]:
            if "=" in seg:
                k, v = seg.split("=", 1)
                partitions.setdefault(k, set()).add(v)
    rows = 0
    stats: dict[str, list[Any]] = {}
    schema = None
    for p in parts[:_MAX_FOOTERS]:
        try:
            meta = pq.read_metadata(p)
        except (OSError, ValueError) as exc:
            raise ArrayReadError(
                f"{p.relative_to(path).as_posix()}: not a readable Parquet file ({exc})"
            ) from exc
        schema = schema or meta.schema.to_arrow_schema()
        rows += meta.num_rows
        for g in range(meta.num_row_groups):
            rg = meta.row_group(g)
            for c in range(rg.num_columns):
                col = rg.column(c)
                st = col.statistics
                if st is not None and st.has_min_max:
                    lo_hi = stats.setdefault(col.path_in_schema, [st.min, st.max])
                    try:
                        lo_hi[0], lo_hi[1] = min(lo_hi[0], st.min), max(lo_hi[1], st.max)
                    except TypeError:
                        pass
    out["attributes"] = {
        "files": len(parts),
        "rows": rows,
        **({"rows_counted_in_first_files": _MAX_FOOTERS} if len(parts) > _MAX_FOOTERS else {}),
    }
    if partitions:
        out["partitions"] = {
            k: sorted(v)[:10] + ([f"… {len(v) - 10} more"] if len(v) > 10 else [])
            for k, v in partitions.items()
        }
    assert schema is not None
    for field in list(schema)[:MAX_VARIABLES]:
        rec = _var(field.name, shape=(rows,), dtype=str(field.type))
        if field.name in stats:
            lo, hi = stats[field.name]
            rec["range"] = {"min": _plain(lo), "max": _plain(hi), "from": "row-group statistics"}
        out["variables"].append(rec)
    for key in partitions:
        out["variables"].append(_var(key, shape=(rows,), dtype="partition key"))
    return _finish(out, len(schema) + len(partitions))


ARRAY_SUMMARIZERS: dict[str, tuple[Callable[[Path], dict[str, Any]], str, str | None]] = {
    "netcdf": (summarize_netcdf, "netCDF", "netCDF4"),
    "hdf5": (summarize_hdf5, "HDF5", "h5py"),
    "npy": (summarize_npy, "NumPy .npy", None),
    "npz": (summarize_npz, "NumPy .npz", None),
    "fits": (summarize_fits, "FITS", None),
    "zarr": (summarize_zarr, "Zarr", None),
    "parquet_dataset": (summarize_parquet_dataset, "Parquet dataset", None),
}
