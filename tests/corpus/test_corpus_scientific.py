"""Scientific files profiled the way a scientist reads them (issue 29), files built here with h5py /
netCDF4 / numpy / pyarrow — nothing downloaded. Optional readers (zarr) are skipped visibly when absent."""

from __future__ import annotations

import asyncio
import builtins
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from datadojo.cli.app import app
from datadojo.corpus import profile_file, profile_folder, profile_text, scan_corpus
from datadojo.corpus.arrays import SAMPLE_VALUES, corner
from datadojo.corpus.inputs import NoDataFilesError, require_data_files
from datadojo.corpus.render import render_file_profile, render_folder_profile
from datadojo.corpus.scan import read_corpus
from datadojo.testing.scifiles import (
    make_corrupt,
    make_fits,
    make_hdf5,
    make_npy,
    make_npz,
    make_parquet_dataset,
    make_sci_folder,
    make_zarr_v2,
)

h5py = pytest.importorskip("h5py")
netCDF4 = pytest.importorskip("netCDF4")
runner = CliRunner()


@pytest.fixture
def sci(tmp_path: Path) -> Path:
    return make_sci_folder(tmp_path / "sci")


# --------------------------------------------------------------------------- 1. whole-profile budget


def test_every_variable_with_units_in_text_profile(sci: Path) -> None:
    text = profile_text(sci / "climate.nc", 4000)
    assert len(text) <= 4000
    assert '- tas(time, lat, lon) float32 [K] "Near-Surface Air Temperature"' in text
    assert '- pr(time, lat, lon) int16 [kg m-2 s-1] "Precipitation"' in text
    assert "more" not in text  # nothing left out: the budget is not spent
    h5 = profile_text(sci / "scan.h5", 4000)
    assert "- entry/sample/temperature [100] float64 [K]" in h5
    assert "entry/sample (NX_class NXsample)" in h5
    assert "- entry/instrument/detector/data [10×32×32] uint16 [counts]" in h5


def test_folder_profile_shows_every_variable_within_share(sci: Path) -> None:
    text = render_folder_profile(profile_folder(sci), 8000)
    assert "tas(time, lat, lon) float32 [K]" in text and "pr(time, lat, lon)" in text
    assert "entry/sample/temperature" in text


def _many_vars(path: Path, n: int) -> Path:
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("x", 3)
        for i in range(n):
            v = ds.createVariable(f"var_{i:03d}", "f4", ("x",))
            v.units = "m s-1"
            v.long_name = f"wind component number {i}"
            v.standard_name = "eastward_wind"
            v.cell_methods = "time: mean area: mean"
            v[:] = np.arange(3) + i
    return path


def test_core_lines_of_all_variables_before_details(tmp_path: Path) -> None:
    fp = profile_file(_many_vars(tmp_path / "w.nc", 30))
    text = render_file_profile(fp, 3000)
    assert len(text) <= 3000
    for i in range(30):  # every variable's core line: details give way first
        assert f'- var_{i:03d}(x) float32 [m s-1] "wind component number {i}"' in text
    assert "details of" in text  # the details that did not fit are named, not silently dropped


def test_more_marker_only_when_the_budget_is_spent(tmp_path: Path) -> None:
    fp = profile_file(_many_vars(tmp_path / "w.nc", 300))
    text = render_file_profile(fp, 1500)
    assert len(text) <= 1500
    assert "more: var_" in text and "- var_000(x)" in text
    assert "more" not in render_file_profile(profile_file(_many_vars(tmp_path / "v.nc", 5)), 4000)


# --------------------------------------------------------------------------- 2. attributes that carry meaning


def test_netcdf_attributes_coordinates_and_ranges(sci: Path) -> None:
    s = profile_file(sci / "climate.nc").summary
    by = {v["name"]: v for v in s["variables"]}
    assert s["unlimited"] == ["time"] and s["dimensions"] == {"time": 12, "lat": 4, "lon": 8}
    assert s["attributes"]["Conventions"] == "CF-1.8"
    tas, pr, time = by["tas"], by["pr"], by["time"]
    assert tas["units"] == "K" and tas["attrs"]["standard_name"] == "air_temperature"
    assert tas["attrs"]["cell_methods"] == "time: mean" and tas["attrs"]["_FillValue"] == 1e20
    assert tas["compression"].startswith("zlib level 4") and tas["chunks"]
    assert 250 <= tas["range"]["min"] < tas["range"]["max"] <= 300
    assert pr["attrs"]["scale_factor"] == 1e-6 and pr["attrs"]["add_offset"] == 0
    assert pr["attrs"]["missing_value"] == -32767
    assert pr["range"]["max"] < 0.01  # unpacked with scale_factor: physical units, not raw int16
    assert time["coordinate"] and time["range"]["min"] == 0 and time["range"]["max"] == 330
    assert time["range"]["dates"][0].startswith("2000-01-01")
    text = profile_text(sci / "climate.nc", 4000)
    assert "time=12 (unlimited)" in text and "cell_methods time: mean" in text
    assert "scale_factor 1e-06" in text and "standard_name air_temperature" in text


def test_hdf5_groups_compound_chunks_compression(sci: Path) -> None:
    s = profile_file(sci / "scan.h5").summary
    groups = {g["name"]: g.get("attrs", {}) for g in s["groups"]}
    assert groups["entry"]["NX_class"] == "NXentry" and groups["entry/sample"]["NX_class"] == "NXsample"
    by = {v["name"]: v for v in s["variables"]}
    ev = by["entry/events"]
    assert [f["name"] for f in ev["fields"]] == ["time", "energy", "pixel"] and ev["dtype"] == "compound"
    data = by["entry/instrument/detector/data"]
    assert data["chunks"] == [1, 32, 32] and data["compression"] == "gzip level 4, shuffle"
    assert data["unlimited_axes"] == [0] and data["units"] == "counts"
    assert by["entry/instrument/detector/distance"]["units"] == "m"
    assert by["entry/sample/name"]["dtype"] == "string"
    text = profile_text(sci / "scan.h5", 4000)
    assert "fields time float64, energy float32, pixel int32" in text
    assert "chunks 1×32×32 · gzip level 4, shuffle" in text


def test_json_of_show_carries_the_attributes(sci: Path) -> None:
    res = runner.invoke(app, ["corpus", "show", str(sci / "climate.nc"), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    tas = next(v for v in data["summary"]["variables"] if v["name"] == "tas")
    assert tas["attrs"]["standard_name"] == "air_temperature" and data["error"] is None


def test_value_ranges_come_from_a_bounded_sample(tmp_path: Path) -> None:
    path = tmp_path / "big.h5"
    with h5py.File(path, "w") as f:
        d = f.create_dataset("field", shape=(4000, 500), dtype="f4", chunks=(100, 500))
        d[:200] = 1.0
        d[200:] = 9.0  # beyond the sample: not read
    rng = profile_file(path).summary["variables"][0]["range"]
    assert rng["sampled"] == SAMPLE_VALUES // 500 * 500 and rng["of"] == 2_000_000
    assert rng["max"] == 1.0
    assert "first 65,500 of 2,000,000 values" in profile_text(path, 2000)
    assert corner((10**9,)) == (slice(0, SAMPLE_VALUES),)


# --------------------------------------------------------------------------- 3. corrupt files


def test_corrupt_netcdf_is_unreadable_with_reason_and_no_host_path(sci: Path) -> None:
    fp = profile_file(sci / "corrupt.nc")
    assert fp.kind == "unreadable" and fp.error_reason == "corrupt" and fp.error
    assert str(sci) not in fp.error and "corrupt.nc" in fp.error
    text = render_folder_profile(profile_folder(sci), 8000)
    assert "unreadable" in text and str(sci) not in text and "/tmp" not in text


def test_scan_counts_unreadable_apart(sci: Path, tmp_path: Path) -> None:
    out = tmp_path / "c.jsonl"
    summary = scan_corpus([sci], out)
    recs = {Path(r.path).name: r for r in read_corpus(out)}
    bad = recs["corrupt.nc"]
    assert bad.kind == "unreadable" and bad.format == "netcdf" and bad.reason == "corrupt"
    assert str(sci) not in bad.profile and str(sci) not in (bad.detail or "")
    assert summary.unreadable == 1 and "corrupt.nc" in summary.unreadable_files
    assert summary.rejected_by_reason.get("corrupt", 0) == 0  # apart, not among the rejections
    assert recs["climate.nc"].kind == "netcdf" and "tas(time, lat, lon)" in recs["climate.nc"].profile
    res = runner.invoke(app, ["corpus", "scan", str(sci), "-o", str(tmp_path / "d.jsonl"), "--no-progress"])
    assert res.exit_code == 0 and "1 unreadable file(s)" in res.output and "corrupt.nc:" in res.output


def test_show_corrupt_exits_1_with_error_in_json(sci: Path) -> None:
    res = runner.invoke(app, ["corpus", "show", str(sci / "corrupt.nc"), "--json"])
    assert res.exit_code == 1
    data = json.loads(res.output)
    assert data["error"] and data["kind"] == "unreadable" and str(sci) not in data["error"]
    assert runner.invoke(app, ["corpus", "show", str(sci / "corrupt.nc")]).exit_code == 1


@pytest.mark.parametrize(("maker", "suffix"), [(make_npy, ".npy"), (make_fits, ".fits"), (make_hdf5, ".h5")])
def test_truncated_array_files_are_unreadable(tmp_path: Path, maker, suffix: str) -> None:  # type: ignore[no-untyped-def]
    good = maker(tmp_path / f"good{suffix}")
    bad = make_corrupt(good, tmp_path / f"bad{suffix}", keep=good.stat().st_size * 3 // 4)
    fp = profile_file(bad)
    assert fp.kind == "unreadable" and fp.error_reason == "corrupt", fp
    assert str(tmp_path) not in (fp.error or "")


# --------------------------------------------------------------------------- 4. more formats


def test_npy_and_npz(tmp_path: Path) -> None:
    s = profile_file(make_npy(tmp_path / "a.npy", (1000, 300))).summary
    v = s["variables"][0]
    assert v["shape"] == [1000, 300] and v["dtype"] == "float64" and v["range"]["min"] == 0
    assert v["range"]["sampled"] == SAMPLE_VALUES  # bounded read by offset
    z = profile_file(make_npz(tmp_path / "b.npz"))
    assert z.kind == "npz" and [v["name"] for v in z.summary["variables"]] == ["x", "y", "mask"]
    assert z.summary["variables"][1]["range"]["max"] == 49
    objs = tmp_path / "o.npy"
    np.save(objs, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    assert "pickled" in profile_file(objs).summary["variables"][0]["note"]


def test_fits_image_and_table(tmp_path: Path) -> None:
    fp = profile_file(make_fits(tmp_path / "img.fits"))
    assert fp.kind == "fits"
    prim, cat = fp.summary["variables"]
    assert prim["shape"] == [20, 30] and prim["units"] == "ADU" and prim["dtype"] == "int16"
    assert prim["range"]["min"] == 100.0  # BZERO + BSCALE * 0
    assert cat["name"] == "CATALOG" and cat["fields"][0] == {"name": "FLUX", "dtype": "D", "units": "Jy"}
    assert fp.summary["attributes"]["OBJECT"] == "M31"


def test_zarr_store_is_one_entry_profiled_from_metadata(tmp_path: Path) -> None:
    root = tmp_path / "d"
    make_zarr_v2(root / "sst.zarr")
    (root / "notes.txt").parent.mkdir(exist_ok=True)
    (root / "notes.txt").write_text("hello\n", encoding="utf-8")
    folder = profile_folder(root)
    kinds = {e.path: e.kind for e in folder.entries}
    assert kinds["sst.zarr"] == "zarr" and not any(p.startswith("sst.zarr/") for p in kinds)
    fp = next(f for f in folder.files if f.path == "sst.zarr")
    v = fp.summary["variables"][0]
    assert v["dims"] == ["time", "x"] and v["units"] == "degC" and v["dtype"] == "float32"
    assert fp.summary["attributes"]["title"] == "sea surface temperature"
    text = profile_text(root / "sst.zarr", 3000)
    assert "sst(time, x) float32 [degC]" in text


def test_zarr_values_need_zarr(tmp_path: Path) -> None:
    try:
        import zarr  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        fp = profile_file(make_zarr_v2(tmp_path / "s.zarr"))
        assert "format Zarr, reader not installed: pip install zarr" in fp.summary["notes"][0]
        pytest.skip("zarr not installed: value ranges of Zarr stores not tested (the hint is)")
    fp = profile_file(make_zarr_v2(tmp_path / "s.zarr"))
    assert fp.summary["variables"][0]["range"]["max"] == 20.0


def test_parquet_dataset_folder(tmp_path: Path) -> None:
    ds = make_parquet_dataset(tmp_path / "obs")
    fp = profile_file(ds)
    assert fp.kind == "parquet_dataset"
    s = fp.summary
    assert s["attributes"] == {"files": 2, "rows": 100} and s["partitions"] == {"year": ["2020", "2021"]}
    temp = next(v for v in s["variables"] if v["name"] == "temp_c")
    assert temp["range"]["min"] == -5.0 and temp["range"]["max"] == 31.0
    summary = scan_corpus([tmp_path], tmp_path / "c.jsonl")
    got = {Path(r.path).name: r.kind for r in read_corpus(tmp_path / "c.jsonl")}
    assert got == {"obs": "parquet_dataset"} and summary.processed == 1


def test_missing_reader_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ds = make_parquet_dataset(tmp_path / "obs")
    h5 = make_hdf5(tmp_path / "x.h5")
    real = builtins.__import__

    def blocked(name: str, *args, **kwargs):  # type: ignore[no-untyped-def]
        if name.split(".")[0] in ("pyarrow", "h5py"):
            raise ImportError(f"No module named {name!r}")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", blocked)
    assert "format Parquet, reader not installed: pip install pyarrow" in profile_text(ds, 2000)
    assert "reader not installed: pip install" in profile_text(h5, 2000)


# --------------------------------------------------------------------------- 5. empty inputs (issue 25)


def test_no_data_files_is_one_clear_error(tmp_path: Path) -> None:
    empty = tmp_path / "EMPTY"
    empty.mkdir()
    (empty / "blank.csv").touch()
    (empty / "sub").mkdir()
    with pytest.raises(NoDataFilesError, match="no data files in"):
        require_data_files([empty])
    res = runner.invoke(app, ["corpus", "scan", str(empty), "-o", str(tmp_path / "c.jsonl"), "--no-progress"])
    assert res.exit_code == 2 and "no data files in" in res.output
    (empty / "sub" / "x.csv").write_text("a\n1\n", encoding="utf-8")
    require_data_files([empty])  # one data file anywhere beneath is enough


def test_pipelines_refuse_an_empty_folder_before_any_request(tmp_path: Path) -> None:
    from datadojo.synth.datamind import DataMindRun
    from datadojo.synth.sailor.pipeline import run_sailor
    from datadojo.synth.sailor.seeds import load_seeds

    empty = tmp_path / "EMPTY"
    empty.mkdir()

    class NoCalls:
        def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
            raise AssertionError(f"the backend was used ({name}) on an empty folder")

    with pytest.raises(NoDataFilesError, match="no data files in"):
        asyncio.run(run_sailor([empty], load_seeds(only=["L0-map"]), policy=NoCalls(), out=tmp_path / "o"))  # type: ignore[arg-type]
    with pytest.raises(NoDataFilesError, match="no data files in"):
        DataMindRun([empty], tmp_path / "dm")
    assert NoDataFilesError("x").exit_code == 2


# --------------------------------------------------------------------------- sailor excerpts keep the tail


def test_sailor_excerpt_keeps_the_exception_line() -> None:
    from datadojo.synth.sailor.mcts import Tree, head_tail

    trace = "Traceback (most recent call last):\n" + '  File "probe.py", line 3, in <module>\n' * 40
    trace += "KeyError: 'tas'"
    tree = Tree("t", lam=1.0, beta=1.0, fpu_bonus=0.0, fpu_reduction=0.0, max_depth=3)
    tree.root.observation = trace
    rec = tree.node_record(tree.root, seed="s", unit="u", folder="f", excerpt_chars=300)
    assert len(rec["excerpt"]) <= 300 and rec["excerpt"].endswith("KeyError: 'tas'")
    assert rec["excerpt"].startswith("Traceback")
    assert head_tail("short", 300) == "short"


def test_synth_commands_refuse_an_empty_folder(tmp_path: Path) -> None:
    empty = tmp_path / "EMPTY"
    empty.mkdir()
    (empty / "a.csv").touch()
    dead = "openai:m@http://127.0.0.1:9/v1"  # never contacted: the check comes first
    res = runner.invoke(app, ["synth", "sailor", str(empty), "--model", dead, "--out", str(tmp_path / "s")])
    assert res.exit_code == 2 and "no data files in" in res.output, res.output
    res = runner.invoke(
        app,
        [
            "synth",
            "datamind",
            "run",
            str(empty),
            "--teacher",
            dead,
            "--judge",
            dead,
            "--out",
            str(tmp_path / "d"),
        ],
    )
    assert res.exit_code == 2 and "no data files in" in res.output, res.output


def test_profile_memory_does_not_grow_with_file_size(tmp_path: Path) -> None:
    import tracemalloc

    peaks = []
    for rows in (1_000, 100_000):  # 4 MB and 400 MB (sparse: written lazily, nothing stored)
        arr = np.lib.format.open_memmap(tmp_path / f"a{rows}.npy", mode="w+", dtype="f4", shape=(rows, 1000))
        del arr
        tracemalloc.start()
        text = profile_text(tmp_path / f"a{rows}.npy", 2000)
        assert "×1000] float32" in text and "range 0 … 0" in text  # sampled, not skipped
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert peaks[1] < 4 * 2**20 and peaks[1] < 2 * peaks[0] + 2**20, peaks


def test_zarr_v3_and_netcdf_classic(tmp_path: Path) -> None:
    store = tmp_path / "v3.zarr"
    (store / "temp").mkdir(parents=True)
    (store / "zarr.json").write_text(
        json.dumps({"zarr_format": 3, "node_type": "group", "attributes": {"title": "t"}})
    )
    meta = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [10, 20],
        "data_type": "float64",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [5, 20]}},
        "codecs": [{"name": "bytes"}, {"name": "zstd"}],
        "fill_value": 0,
        "dimension_names": ["y", "x"],
        "attributes": {"units": "K"},
    }
    (store / "temp" / "zarr.json").write_text(json.dumps(meta))
    res = runner.invoke(app, ["corpus", "show", str(store)])  # a store is shown as one file, not a folder
    assert res.exit_code == 0 and "format: Zarr v3" in res.output and "temp(y, x) float64 [K]" in res.output
    assert "chunks 5×20 · zstd" in res.output
    classic = tmp_path / "c3.nc"
    with netCDF4.Dataset(classic, "w", format="NETCDF3_CLASSIC") as ds:
        ds.createDimension("t", None)
        t = ds.createVariable("t", "f8", ("t",))
        t.units = "hours since 2020-01-01"
        t[:] = np.arange(5)
    text = profile_text(classic, 2000)
    assert "t=5 (unlimited)" in text and "2020-01-01 04:00:00" in text


def test_folder_budget_goes_to_every_variable_first(sci: Path) -> None:
    make_npy(sci / "a.npy")
    make_npz(sci / "b.npz")
    make_fits(sci / "img.fits")
    make_zarr_v2(sci / "sst.zarr")
    make_parquet_dataset(sci / "obs")
    text = profile_text(sci, 3000)  # the sailor's system-prompt budget, 10 profiled files
    assert len(text) <= 3000
    for core in (
        'tas(time, lat, lon) float32 [K] "Near-Surface Air Temperature"',
        'pr(time, lat, lon) int16 [kg m-2 s-1] "Precipitation"',
        "entry/sample/temperature [100] float64 [K]",
        'sst(time, x) float32 [degC] "sea surface temperature"',
        "CATALOG [5] table",
    ):
        assert core in text, core
