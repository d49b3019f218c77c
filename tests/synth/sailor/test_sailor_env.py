"""The exploration environment: read-only folder, persistent state per path with replay, head/tail truncation."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from datadojo.sandbox.cells import truncate_marker
from datadojo.synth.sailor.env import ProbeEnv, default_sandbox_config, truncate_head_tail


def test_truncate_head_tail_keeps_the_papers_split() -> None:
    text = "h" * 4000 + "m" * 100 + "t" * 1500
    cut, truncated = truncate_head_tail(text, 4000, 1500)
    assert truncated and cut == "h" * 4000 + truncate_marker(100) + "t" * 1500
    assert truncate_head_tail("short", 4000, 1500) == ("short", False)
    assert truncate_head_tail("abcdef", 2, 0) == ("ab" + truncate_marker(4), True)


def test_probes_run_in_their_paths_state_and_the_folder_is_read_only(dataset: Path) -> None:
    async def go() -> list:
        env = ProbeEnv(dataset, default_sandbox_config(30.0), head=4000, tail=1500)
        async with env:
            out = []
            a = ["x = 1\nopen('scratch.txt', 'w').write('branch a')"]
            out.append(await env.run(a, "print(x)"))
            b = ["x = 2"]
            out.append(await env.run(b, "import os\nprint(x, os.path.exists('scratch.txt'))"))
            replays = env.replays
            # continuing the path just run needs no replay
            out.append(
                await env.run([*b, "import os\nprint(x, os.path.exists('scratch.txt'))"], "print(x + 1)")
            )
            assert env.replays == replays
            out.append(await env.run([], "open('penguins/README.md', 'a').write('x')"))
            out.append(await env.run([], "print('y' * 9000)"))
            return out

    results = asyncio.run(go())
    assert results[0][0].output == "1\n"
    assert results[1][0].output == "2 False\n"  # branch b does not see branch a's state or files
    assert results[2][0].output == "3\n"
    assert results[3][0].status == "error" and "Permission denied" in results[3][0].output
    long = results[4]
    assert long[2] and long[1].startswith("y" * 4000) and "characters truncated" in long[1]
    assert len(long[3]) == 9001  # the untruncated output is kept for re-verification


def test_env_needs_persistent_mode(dataset: Path) -> None:
    from datadojo.sandbox.config import SandboxConfig

    with pytest.raises(ValueError, match="persistent"):
        ProbeEnv(dataset, SandboxConfig(mode="chunked"), head=10, tail=10)


def test_the_readers_of_scientific_formats_work_inside_the_sandbox(tmp_path: Path) -> None:
    """HDF5, NetCDF, Parquet, Excel, FASTA, YAML and JSON written here are read back by a probe in the sandbox."""
    h5py = pytest.importorskip("h5py", reason="h5py not installed")
    netCDF4 = pytest.importorskip("netCDF4", reason="netCDF4 not installed")
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow", reason="pyarrow not installed")
    pytest.importorskip("openpyxl", reason="openpyxl not installed")
    pytest.importorskip("xarray", reason="xarray not installed")
    root = tmp_path / "repo"
    (root / "raw" / "nested").mkdir(parents=True)
    with h5py.File(root / "raw" / "scan.nxs", "w") as f:
        f.create_group("entry").create_dataset("counts", data=list(range(7)))
        f["entry"].attrs["NX_class"] = "NXentry"
    with netCDF4.Dataset(root / "raw" / "nested" / "sst.nc", "w") as nc:
        nc.createDimension("time", 3)
        var = nc.createVariable("sst", "f4", ("time",))
        var.units = "degC"
        var[:] = [1.5, 2.5, 3.5]
    frame = pd.DataFrame({"site": ["a", "b"], "depth_m": [10, 20]})
    frame.to_parquet(root / "sites.parquet")
    frame.to_excel(root / "sites.xlsx", index=False)
    (root / "seqs.fasta").write_text(">s1\nACGT\n>s2\nGGCC\n")
    (root / "meta.yaml").write_text("units: degC\n")
    probe = (
        "import h5py, netCDF4, xarray as xr, pandas as pd, yaml\n"
        "r = 'repo/'\n"
        "with h5py.File(r + 'raw/scan.nxs') as f:\n"
        "    print('h5', f['entry/counts'][:].sum(), f['entry'].attrs['NX_class'])\n"
        "with netCDF4.Dataset(r + 'raw/nested/sst.nc') as nc:\n"
        "    print('nc', nc['sst'].units, float(nc['sst'][:].mean()))\n"
        "print('xr', float(xr.open_dataset(r + 'raw/nested/sst.nc')['sst'].max()))\n"
        "print('pq', pd.read_parquet(r + 'sites.parquet').depth_m.sum())\n"
        "print('xl', pd.read_excel(r + 'sites.xlsx').site.tolist())\n"
        "print('fa', sum(1 for line in open(r + 'seqs.fasta') if line.startswith('>')))\n"
        "print('ya', yaml.safe_load(open(r + 'meta.yaml'))['units'])\n"
    )

    async def go():
        async with ProbeEnv(root, default_sandbox_config(120.0), head=4000, tail=1500) as env:
            return await env.run([], probe)

    result, observation, _, _ = asyncio.run(go())
    assert result.status == "ok", observation
    assert observation.splitlines() == [
        "h5 21 NXentry",
        "nc degC 2.5",
        "xr 3.5",
        "pq 30",
        "xl ['a', 'b']",
        "fa 2",
        "ya degC",
    ]
