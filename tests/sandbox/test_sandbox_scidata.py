"""SciDataSailor's environment: a dataset folder mounted read-only, persistent state, the scientific readers
(NetCDF, HDF5, Parquet, Excel) inside the sandbox, and the paper's head/tail observation truncation."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from datadojo.sandbox import Limits, Sandbox, SandboxConfig
from datadojo.sandbox import isolation as isolation_mod
from datadojo.types import DataFile

pytestmark = pytest.mark.timeout(180)

HAS_BWRAP = shutil.which("bwrap") is not None and isolation_mod.bwrap_available()[0]
ISOLATIONS = [pytest.param("bwrap", marks=pytest.mark.skipif(not HAS_BWRAP, reason="bwrap unusable")), "none"]


def _dataset(root: Path) -> Path:
    """A nested folder with a NetCDF, an HDF5, a Parquet and an Excel file, written here."""
    np = pytest.importorskip("numpy", reason="numpy is a core dependency")
    netCDF4 = pytest.importorskip("netCDF4", reason="the `sci` extra (netCDF4) is not installed")
    h5py = pytest.importorskip("h5py", reason="the `sci` extra (h5py) is not installed")
    pd = pytest.importorskip("pandas")
    folder = root / "ocean_repo"
    (folder / "grids").mkdir(parents=True)
    (folder / "tables").mkdir()
    with netCDF4.Dataset(folder / "grids" / "sst.nc", "w") as ds:
        ds.createDimension("time", 3)
        ds.createDimension("lat", 2)
        v = ds.createVariable("sst", "f4", ("time", "lat"))
        v.units = "degC"
        v[:] = np.array([[10.0, 11.0], [12.0, 13.0], [14.0, 15.5]], dtype="f4")
        ds.title = "toy sea surface temperature"
    with h5py.File(folder / "grids" / "scan.h5", "w") as f:
        entry = f.create_group("entry")
        data = entry.create_dataset("counts", data=np.arange(12, dtype="i4").reshape(3, 4))
        data.attrs["units"] = "counts"
        entry.attrs["NX_class"] = "NXentry"
    frame = pd.DataFrame({"station": ["A", "B", "C"], "depth_m": [5.0, 12.5, 30.0]})
    frame.to_parquet(folder / "tables" / "stations.parquet")
    frame.to_excel(folder / "tables" / "stations.xlsx", index=False)
    return folder


@pytest.mark.parametrize("iso", ISOLATIONS)
async def test_readers_on_a_read_only_dataset_folder(tmp_path: Path, iso: str) -> None:
    folder = _dataset(tmp_path)
    cfg = SandboxConfig(isolation=iso, mode="persistent", preload=())  # type: ignore[arg-type]
    async with await Sandbox.create([DataFile(path=str(folder), kind="dir")], cfg) as sb:
        r = await sb.run(
            "import netCDF4, xarray as xr\n"
            "ds = xr.open_dataset('ocean_repo/grids/sst.nc')\n"
            "print(ds['sst'].attrs['units'], float(ds['sst'].max()), dict(ds.sizes))\n"
            "with netCDF4.Dataset('ocean_repo/grids/sst.nc') as nc:\n"
            "    print(nc.title)"
        )
        assert r.status == "ok", r.output
        assert "degC 15.5 {'time': 3, 'lat': 2}" in r.output and "toy sea surface temperature" in r.output
        r = await sb.run(
            "import h5py\n"
            "f = h5py.File('ocean_repo/grids/scan.h5', 'r')\n"
            "print(f['entry'].attrs['NX_class'], f['entry/counts'].shape, int(f['entry/counts'][()].sum()))"
        )
        assert r.status == "ok" and "NXentry (3, 4) 66" in r.output, r.output
        # Persistent mode: the open file handle from the previous cell is still there.
        r = await sb.run("print(f['entry/counts'].attrs['units'])")
        assert r.status == "ok" and r.output.strip() == "counts", r.output
        r = await sb.run(
            "import pandas as pd, pyarrow.parquet as pq\n"
            "print(pq.read_table('ocean_repo/tables/stations.parquet').num_rows,\n"
            "      pd.read_excel('ocean_repo/tables/stations.xlsx')['depth_m'].sum())"
        )
        assert r.status == "ok" and "3 47.5" in r.output, r.output
        r = await sb.run("open('ocean_repo/grids/new.txt', 'w').write('x')")
        if iso == "bwrap":  # a read-only bind mount: the write fails inside the sandbox
            assert r.status in ("error", "rejected"), r.output
    # Either way the dataset folder itself is never changed (reduced isolation works on a copy).
    assert not (folder / "grids" / "new.txt").exists()


@pytest.mark.parametrize("iso", ISOLATIONS)
async def test_head_tail_truncation_in_the_worker(iso: str) -> None:
    limits = Limits(observation_head_chars=4000, observation_tail_chars=1500)
    cfg = SandboxConfig(isolation=iso, mode="persistent", preload=(), limits=limits)  # type: ignore[arg-type]
    async with await Sandbox.create([], cfg) as sb:
        r = await sb.run("print('H' * 4000 + 'm' * 3000 + 'T' * 1499)")
        assert r.status == "ok" and r.truncated
        assert r.output.startswith("H" * 4000 + "\n... [3000 characters truncated] ...\n")
        assert r.output.endswith("T" * 1499 + "\n") and "m" not in r.output
        r = await sb.run("print('x' * 5000)")  # 5,001 characters with the newline: under 4,000 + 1,500
        assert r.status == "ok" and not r.truncated and r.output == "x" * 5000 + "\n"
