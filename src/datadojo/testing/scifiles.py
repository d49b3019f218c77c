"""Scientific files made on the spot (no downloads) for tests, benchmarks and docs of the corpus profiles.

Each builder writes one file in the shape scientists meet them (issue 29): a CF-style netCDF with ``tas``
in K and ``pr`` (scale/offset, fill value, cell methods, an unlimited time axis, coordinates), an HDF5
file with nested NeXus-style groups, unit attributes and a compound table, ``.npy``/``.npz``, a FITS
image with a binary table, a Zarr v2 store, a Parquet dataset in Hive partitions, and corrupt copies.
h5py / netCDF4 / pyarrow are imported inside the builders that need them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

__all__ = [
    "make_cf_netcdf",
    "make_corrupt",
    "make_fits",
    "make_hdf5",
    "make_npy",
    "make_npz",
    "make_parquet_dataset",
    "make_sci_folder",
    "make_zarr_v2",
]


def make_cf_netcdf(path: Path, *, n_time: int = 12, n_lat: int = 4, n_lon: int = 8) -> Path:
    """CF-1.8 netCDF-4: ``time`` (unlimited), ``lat``, ``lon`` coordinates; ``tas`` in K; packed ``pr``."""
    import netCDF4  # type: ignore[import-not-found]

    rng = np.random.default_rng(0)
    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        ds.Conventions = "CF-1.8"
        ds.title = "Monthly near-surface climate, test grid"
        ds.institution = "DataDojo tests"
        ds.createDimension("time", None)
        ds.createDimension("lat", n_lat)
        ds.createDimension("lon", n_lon)
        t = ds.createVariable("time", "f8", ("time",))
        t.units = "days since 2000-01-01"
        t.calendar = "standard"
        t.standard_name = "time"
        t[:] = np.arange(n_time) * 30.0
        lat = ds.createVariable("lat", "f4", ("lat",))
        lat.units = "degrees_north"
        lat.standard_name = "latitude"
        lat[:] = np.linspace(-45, 45, n_lat)
        lon = ds.createVariable("lon", "f4", ("lon",))
        lon.units = "degrees_east"
        lon.standard_name = "longitude"
        lon[:] = np.linspace(0, 315, n_lon)
        tas = ds.createVariable("tas", "f4", ("time", "lat", "lon"), zlib=True, complevel=4, fill_value=1e20)
        tas.units = "K"
        tas.standard_name = "air_temperature"
        tas.long_name = "Near-Surface Air Temperature"
        tas.cell_methods = "time: mean"
        tas[:] = 250.0 + 50.0 * rng.random((n_time, n_lat, n_lon))
        pr = ds.createVariable("pr", "i2", ("time", "lat", "lon"), fill_value=-32767)
        pr.units = "kg m-2 s-1"
        pr.standard_name = "precipitation_flux"
        pr.long_name = "Precipitation"
        pr.cell_methods = "time: mean"
        pr.scale_factor = 1e-6
        pr.add_offset = 0.0
        pr.missing_value = np.int16(-32767)
        pr[:] = 1e-6 * rng.integers(0, 3000, (n_time, n_lat, n_lon))
    return path


def make_hdf5(path: Path, *, rows: int = 100, frames: int = 10, size: int = 32) -> Path:
    """NeXus-style HDF5: ``entry`` (NXentry) / ``instrument/detector`` / ``sample`` groups with units,
    a chunked, gzip-compressed image stack and a compound ``events`` table."""
    import h5py  # type: ignore[import-not-found]

    rng = np.random.default_rng(1)
    with h5py.File(path, "w") as f:
        f.attrs["creator"] = "DataDojo tests"
        entry = f.create_group("entry")
        entry.attrs["NX_class"] = "NXentry"
        det = entry.create_group("instrument/detector")
        det.attrs["NX_class"] = "NXdetector"
        data = det.create_dataset(
            "data",
            data=rng.integers(0, 1000, (frames, size, size), dtype="u2"),
            chunks=(1, size, size),
            compression="gzip",
            compression_opts=4,
            shuffle=True,
            maxshape=(None, size, size),
        )
        data.attrs["units"] = "counts"
        data.attrs["long_name"] = "detector counts"
        dist = det.create_dataset("distance", data=1.25)
        dist.attrs["units"] = "m"
        sample = entry.create_group("sample")
        sample.attrs["NX_class"] = "NXsample"
        temp = sample.create_dataset("temperature", data=np.linspace(290, 300, rows))
        temp.attrs["units"] = "K"
        sample.create_dataset("name", data="silicon wafer")
        ev = np.zeros(rows, dtype=[("time", "f8"), ("energy", "f4"), ("pixel", "i4")])
        ev["time"] = np.arange(rows) * 0.01
        ev["energy"] = rng.random(rows) * 10
        ev["pixel"] = rng.integers(0, size * size, rows)
        events = entry.create_dataset("events", data=ev)
        events.attrs["units"] = "s, keV, 1"
    return path


def make_npy(path: Path, shape: tuple[int, ...] = (100, 3)) -> Path:
    np.save(path, np.arange(int(np.prod(shape)), dtype="float64").reshape(shape) / 10.0)
    return path


def make_npz(path: Path) -> Path:
    np.savez_compressed(
        path, x=np.linspace(0.0, 1.0, 50), y=np.arange(50, dtype="int32"), mask=np.ones(50, bool)
    )
    return path


def _card(key: str, value: object, comment: str = "") -> bytes:
    if isinstance(value, bool):
        v = f"{'T' if value else 'F':>20}"
    elif isinstance(value, str):
        v = f"'{value:<8}'"
    else:
        v = f"{value:>20}"
    text = f"{key:<8}= {v}" + (f" / {comment}" if comment else "")
    return text[:80].ljust(80).encode("ascii")


def _header(cards: list[bytes]) -> bytes:
    raw = b"".join(cards) + b"END".ljust(80)
    return raw + b" " * (-len(raw) % 2880)


def make_fits(path: Path, *, ny: int = 20, nx: int = 30) -> Path:
    """A FITS file: a 16-bit primary image with BSCALE/BZERO and BUNIT, then a binary table HDU."""
    img = (np.arange(ny * nx).reshape(ny, nx) % 1000).astype(">i2")
    primary = _header(
        [
            _card("SIMPLE", True),
            _card("BITPIX", 16),
            _card("NAXIS", 2),
            _card("NAXIS1", nx),
            _card("NAXIS2", ny),
            _card("BSCALE", 0.5),
            _card("BZERO", 100.0),
            _card("BUNIT", "ADU"),
            _card("TELESCOP", "TESTSCOPE"),
            _card("OBJECT", "M31"),
        ]
    )
    data = img.tobytes()
    data += b"\0" * (-len(data) % 2880)
    rows = 5
    table = np.zeros(rows, dtype=[("FLUX", ">f8"), ("ID", ">i4")])
    table["FLUX"] = np.arange(rows) * 1.5
    table["ID"] = np.arange(rows)
    ext = _header(
        [
            _card("XTENSION", "BINTABLE"),
            _card("BITPIX", 8),
            _card("NAXIS", 2),
            _card("NAXIS1", 12),
            _card("NAXIS2", rows),
            _card("PCOUNT", 0),
            _card("GCOUNT", 1),
            _card("TFIELDS", 2),
            _card("TTYPE1", "FLUX"),
            _card("TFORM1", "D"),
            _card("TUNIT1", "Jy"),
            _card("TTYPE2", "ID"),
            _card("TFORM2", "J"),
            _card("EXTNAME", "CATALOG"),
        ]
    )
    tdata = table.tobytes()
    tdata += b"\0" * (-len(tdata) % 2880)
    path.write_bytes(primary + data + ext + tdata)
    return path


def make_zarr_v2(path: Path, *, shape: tuple[int, int] = (6, 4)) -> Path:
    """A Zarr v2 store written by hand (uncompressed chunks): group ``.zattrs``, one array with xarray
    dimension names, units and a fill value."""
    path.mkdir(parents=True, exist_ok=True)
    (path / ".zgroup").write_text(json.dumps({"zarr_format": 2}))
    (path / ".zattrs").write_text(json.dumps({"title": "sea surface temperature", "Conventions": "CF-1.8"}))
    arr = path / "sst"
    arr.mkdir()
    meta = {
        "zarr_format": 2,
        "shape": list(shape),
        "chunks": list(shape),
        "dtype": "<f4",
        "compressor": None,
        "fill_value": "NaN",
        "order": "C",
        "filters": None,
    }
    (arr / ".zarray").write_text(json.dumps(meta))
    (arr / ".zattrs").write_text(
        json.dumps(
            {"_ARRAY_DIMENSIONS": ["time", "x"], "units": "degC", "long_name": "sea surface temperature"}
        )
    )
    (arr / "0.0").write_bytes(np.linspace(10, 20, int(np.prod(shape)), dtype="<f4").tobytes())
    return path


def make_parquet_dataset(path: Path, *, years: tuple[int, ...] = (2020, 2021), rows: int = 50) -> Path:
    """A Parquet dataset in Hive partitions ``year=…/part-0.parquet``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for y in years:
        part = path / f"year={y}"
        part.mkdir(parents=True, exist_ok=True)
        t = pa.table(
            {"station": [f"S{i % 5}" for i in range(rows)], "temp_c": np.linspace(-5, 30, rows) + (y - 2020)}
        )
        pq.write_table(t, part / "part-0.parquet")
    return path


def make_corrupt(src: Path, dst: Path, *, keep: int = 2048) -> Path:
    """A truncated copy of ``src``: the first ``keep`` bytes (the magic survives, the rest does not)."""
    dst.write_bytes(src.read_bytes()[:keep])
    return dst


def make_sci_folder(root: Path) -> Path:
    """The folder of issue 29: CF netCDF, nested HDF5, CSV, README, a corrupt ``.nc``, an empty file."""
    root.mkdir(parents=True, exist_ok=True)
    make_cf_netcdf(root / "climate.nc")
    make_hdf5(root / "scan.h5")
    (root / "stations.csv").write_text(
        "station,lat,lon,elevation_m\n"
        + "".join(f"S{i},{40 + i / 10},{-3 - i / 10},{100 + i}\n" for i in range(30)),
        encoding="utf-8",
    )
    (root / "README.md").write_text(
        "# Test climate data\n\nMonthly fields and a detector scan.\n", encoding="utf-8"
    )
    make_corrupt(root / "climate.nc", root / "corrupt.nc")
    (root / "empty.dat").touch()
    return root


def print_profiles(root: Path, budget: int = 1600) -> None:
    """Build one file of each array format under ``root`` and print its profile text (docs/corpus.md)."""
    from datadojo.corpus import profile_text

    root.mkdir(parents=True, exist_ok=True)
    made = [
        make_cf_netcdf(root / "climate.nc"),
        make_hdf5(root / "scan.h5"),
        make_npy(root / "spectra.npy"),
        make_npz(root / "grid.npz"),
        make_fits(root / "m31.fits"),
        make_zarr_v2(root / "sst.zarr"),
        make_parquet_dataset(root / "observations"),
    ]
    made.append(make_corrupt(made[0], root / "corrupt.nc"))
    for path in made:
        print(profile_text(path, budget))
        print()


if __name__ == "__main__":
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        print_profiles(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tmp) / "sci")
