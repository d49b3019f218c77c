"""Kind sniffing and the dataset-folder scan (tree, kinds, short profiles, optional sci extra)."""

from __future__ import annotations

import builtins
import json
import os
import sqlite3
import struct
import zipfile
from pathlib import Path

import pytest

from datadojo.corpus import FILE_KINDS, profile_folder, profile_text, sniff
from datadojo.corpus.other_kinds import SCI_EXTRA_HINT, summarize
from datadojo.types import DATA_KINDS

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "data"

_PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + struct.pack(">II", 640, 480) + b"\x08\x02\x00\x00\x00"
_GIF = b"GIF89a" + struct.pack("<HH", 32, 16) + b"\x00" * 10
_JPEG = (
    b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    + b"\xff\xc0\x00\x11\x08"
    + struct.pack(">HH", 200, 300)
    + b"\x03"
    + b"\x00" * 20
)
_GENBANK = """LOCUS       KX369547               10769 bp    RNA     linear   VRL 07-DEC-2016
DEFINITION  Zika virus isolate PF13/251013-18, complete genome.
  ORGANISM  Zika virus
FEATURES             Location/Qualifiers
     source          1..10769
     CDS             108..10379
     gene            108..10379
ORIGIN
        1 gttgttgatc tgtgtgaatc
//
"""


def test_data_kinds_agree_with_the_data_model() -> None:
    assert set(DATA_KINDS) <= set(FILE_KINDS)


@pytest.mark.parametrize(
    ("name", "content", "kind"),
    [
        ("a.csv", b"x,y\n1,2\n", "csv"),
        ("a.tsv", b"x\ty\n1\t2\n", "csv"),
        ("notes.txt", b"x|y\n1|2\n3|4\n", "csv"),
        ("words.txt", b"just some prose here\nand more prose\n", "text"),
        ("a.json", b'[{"a": 1}]', "json"),
        ("a.fa", b">s1\nACGT\n", "fasta"),
        ("seq", b">s1 desc\nACGTACGT\n>s2\nGGCC\n", "fasta"),
        ("z.gb", _GENBANK.encode(), "genbank"),
        ("README.md", b"# Title\n", "readme"),
        ("LICENSE", b"MIT License\n", "readme"),
        ("DESCRIPTION", b"Package: x\nTitle: y\n", "metadata"),
        ("datapackage.json", b'{"name": "x"}', "metadata"),
        ("cfg.yaml", b"a: 1\n", "metadata"),
        ("p.png", _PNG, "image"),
        ("p.gif", _GIF, "image"),
        ("p.jpg", _JPEG, "image"),
        ("d.h5", b"\x89HDF\r\n\x1a\n" + b"\x00" * 100, "hdf5"),
        ("d.nc", b"\x89HDF\r\n\x1a\n" + b"\x00" * 100, "netcdf"),
        ("c.nc", b"CDF\x01" + b"\x00" * 100, "netcdf"),
        ("a.gz", b"\x1f\x8b\x08\x00" + b"\x00" * 20, "archive"),
        ("x.csv", b"\x00\x01\x02\x03", "binary"),
        ("e.csv", b"", "empty"),
    ],
)
def test_sniff_kinds(tmp_path: Path, name: str, content: bytes, kind: str) -> None:
    p = tmp_path / name
    p.write_bytes(content)
    sn = sniff(p)
    assert sn.kind == kind and sn.size == len(content)


def test_sniff_content_beats_suffix(tmp_path: Path) -> None:
    p = tmp_path / "table.csv"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE t (a)")
    con.commit()
    con.close()
    sn = sniff(p)
    assert sn.kind == "sqlite" and sn.suffix_kind == "csv" and sn.suffix_mismatch
    z = tmp_path / "book.bin"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("xl/workbook.xml", "<workbook/>")
    assert sniff(z).kind == "xlsx"


def test_sniff_missing_dir_and_links(tmp_path: Path) -> None:
    assert sniff(tmp_path / "nope").kind == "missing"
    os.symlink(tmp_path / "nowhere", tmp_path / "link.csv")
    sn = sniff(tmp_path / "link.csv")
    assert sn.kind == "missing" and sn.is_symlink and "broken symbolic link" in sn.detail
    assert sniff(tmp_path).kind == "dir"


def test_summaries_of_other_kinds(tmp_path: Path) -> None:
    fa = tmp_path / "s.fasta"
    fa.write_text(">a one\nACGT\nAC\n>b\nGGG\n", encoding="ascii")
    s = summarize(sniff(fa))
    assert s["records"] == 2 and (s["length_min"], s["length_max"]) == (3, 6) and s["alphabet"] == "DNA"
    assert s["first_ids"] == ["a", "b"]
    gb = tmp_path / "z.gb"
    gb.write_text(_GENBANK, encoding="ascii")
    g = summarize(sniff(gb))
    assert g["records"] == 1 and g["loci"][0]["length"] == 10769 and g["loci"][0]["organism"] == "Zika virus"
    assert g["feature_keys"] == {"source": 1, "CDS": 1, "gene": 1}
    for name, data, size in (
        ("p.png", _PNG, (640, 480)),
        ("p.gif", _GIF, (32, 16)),
        ("p.jpg", _JPEG, (300, 200)),
    ):
        (tmp_path / name).write_bytes(data)
        info = summarize(sniff(tmp_path / name))
        assert (info["width"], info["height"]) == size
    dp = tmp_path / "datapackage.json"
    dp.write_text(
        json.dumps({"title": "T", "resources": [{"name": "r", "path": "d/r.csv"}]}), encoding="utf-8"
    )
    meta = summarize(sniff(dp))
    assert meta["title"] == "T" and meta["resources"] == [{"name": "r", "path": "d/r.csv"}]


def test_line_summaries_stop_at_max_bytes(tmp_path: Path) -> None:
    """FASTA, GenBank and text summaries read at most ``max_bytes`` and say where they stopped."""
    fa = tmp_path / "s.fasta"
    fa.write_text(">a\nACGT\n>b\nGG\n", encoding="ascii")  # lines of 3, 5, 3 and 3 bytes
    cut = summarize(sniff(fa), max_bytes=9)
    assert cut["records"] == 1 and cut["length_max"] == 4 and cut["truncated_at_bytes"] == 9
    assert "truncated_at_bytes" not in summarize(sniff(fa), max_bytes=14)
    gb = tmp_path / "z.gb"
    gb.write_text(_GENBANK, encoding="ascii")
    assert summarize(sniff(gb), max_bytes=10)["truncated_at_bytes"] == 10
    assert "truncated_at_bytes" not in summarize(sniff(gb))
    readme = tmp_path / "README.md"
    readme.write_text("# Title\none two\nthree\n", encoding="utf-8")
    text = summarize(sniff(readme), max_bytes=17)
    assert (text["lines"], text["words"], text["title"], text["truncated_at_bytes"]) == (2, 4, "Title", 17)


def test_example_folder_profile() -> None:
    folder = profile_folder(EXAMPLES / "station_survey")
    paths = [e.path for e in folder.entries]
    assert paths == [
        "README.md",
        "datapackage.json",
        "meta",
        "meta/sites.json",
        "raw",
        "raw/barcodes.fasta",
        "raw/measurements.csv",
    ]
    sizes = {e.path: e.size for e in folder.entries}
    assert sizes["raw"] == sizes["raw/barcodes.fasta"] + sizes["raw/measurements.csv"]
    assert folder.kinds == {"csv": 1, "fasta": 1, "json": 1, "metadata": 1, "readme": 1}
    assert folder.n_files == 5 and folder.n_dirs == 2
    assert [f.path for f in folder.files][:2] == ["README.md", "datapackage.json"]  # documentation first
    measurements = next(f for f in folder.files if f.path == "raw/measurements.csv")
    assert measurements.tables[0].n_rows == 96


def test_folder_text_fits_budget_and_has_tree() -> None:
    text = profile_text(EXAMPLES / "station_survey", budget_chars=3000)
    assert len(text) <= 3000
    assert "Folder: station_survey" in text and "raw/" in text and "barcodes.fasta" in text
    assert "records: 8" in text  # the FASTA short profile


def test_folder_with_bad_entries_and_large_listing(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "x.csv").mkdir(parents=True)  # a directory named like a data file
    (root / "x.csv" / "inner.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    os.symlink(root / "missing.csv", root / "broken.csv")
    os.symlink(root / "x.csv", root / "loop")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref", encoding="utf-8")
    many = root / "many"
    many.mkdir()
    for i in range(60):
        (many / f"f{i:02d}.csv").write_text("a\n1\n", encoding="utf-8")
    folder = profile_folder(root, max_profiled=5)
    by_path = {e.path: e for e in folder.entries}
    assert by_path["x.csv"].is_dir and by_path["x.csv/inner.csv"].kind == "csv"
    assert by_path["broken.csv"].kind == "missing"
    assert by_path["loop"].is_symlink and by_path["loop"].is_dir  # listed, not followed
    assert not any(p.startswith(".git") for p in by_path) and not any(p.startswith("loop/") for p in by_path)
    assert any("not profiled" in w for w in folder.warnings)
    text = profile_text(root, budget_chars=1500)
    assert len(text) <= 1500 and "more files (csv" in text


def test_scan_without_sci_extra_degrades(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_sci(name: str, *args, **kwargs):  # type: ignore[no-untyped-def]
        if name in ("h5py", "netCDF4"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_sci)
    root = tmp_path / "sci"
    root.mkdir()
    (root / "grid.nc").write_bytes(b"CDF\x01" + b"\x00" * 64)
    (root / "cube.h5").write_bytes(b"\x89HDF\r\n\x1a\n" + b"\x00" * 64)
    (root / "t.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    folder = profile_folder(root)
    notes = {f.path: f.summary.get("note") for f in folder.files}
    assert notes["grid.nc"] == SCI_EXTRA_HINT and notes["cube.h5"] == SCI_EXTRA_HINT
    assert folder.kinds == {"csv": 1, "hdf5": 1, "netcdf": 1}
    assert "datadojo[sci]" in profile_text(root, budget_chars=3000)


def test_profile_folder_rejects_a_file() -> None:
    with pytest.raises(NotADirectoryError):
        profile_folder(EXAMPLES / "sales.csv")
