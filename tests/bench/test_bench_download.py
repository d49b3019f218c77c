"""``datadojo bench download`` against a loopback HTTP server (never the internet): cache, checksums, archives."""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
import threading
import zipfile
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from datadojo.bench.dabench import DABench
from datadojo.bench.download import (
    MANIFEST,
    BenchSource,
    DownloadError,
    RemoteFile,
    download_benchmark,
    listed_files,
)
from datadojo.bench.spider import BIRD, Spider
from datadojo.bench.tablebench import TableBench
from datadojo.cli.app import app
from datadojo.errors import UnknownNameError


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class _Handler(SimpleHTTPRequestHandler):
    """Serves a folder; honours ``Range: bytes=N-`` unless the server says not to; logs every request."""

    def log_message(self, *args):  # keep pytest output clean
        pass

    def do_GET(self):
        self.server.log.append((self.path, self.headers.get("Range")))
        rng = self.headers.get("Range")
        path = Path(self.translate_path(self.path))
        if rng and self.server.ranges and path.is_file() and rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[len("bytes=") : -1])
            data = path.read_bytes()
            if start >= len(data):
                self.send_response(416)
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Length", str(len(data) - start))
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.end_headers()
            self.wfile.write(data[start:])
            return
        super().do_GET()


class _Server:
    def __init__(self, root: Path, *, ranges: bool = True) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Handler, directory=str(root)))
        self.httpd.log = []
        self.httpd.ranges = ranges
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @property
    def log(self) -> list[tuple[str, str | None]]:
        return self.httpd.log

    def __enter__(self) -> _Server:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def shared_server(shared_data):
    with _Server(shared_data().resolve()) as srv:
        yield srv


def test_dabench_from_a_loopback_mirror(shared_server, shared_data, tmp_path):
    src = shared_data("dabench")
    cache = tmp_path / "cache"
    result = download_benchmark("dabench", url=f"{shared_server.url}/dabench", cache_root=cache)
    tables = {
        rec["file_name"] for rec in map(json.loads, (src / "da-dev-questions.jsonl").read_text().splitlines())
    }
    names = {f.name for f in result.files}
    assert names == {"da-dev-questions.jsonl", "da-dev-labels.jsonl"} | {f"da-dev-tables/{t}" for t in tables}
    for f in result.files:
        assert f.status == "downloaded" and f.sha256 == _sha(src / f.name) and not f.pinned
    # the cache is in the official layout: the loader reads the same tasks from it
    assert [t.id for t in DABench().load(cache)] == [t.id for t in DABench().load(src)]
    assert json.loads((cache / MANIFEST).read_text())["complete"] is True
    assert not (cache / ".partial").exists()
    # a rerun downloads nothing: everything is cached and still verifies
    n_requests = len(shared_server.log)
    again = download_benchmark("dabench", url=f"{shared_server.url}/dabench", cache_root=cache)
    assert {f.status for f in again.files} == {"cached"}
    assert (
        len(shared_server.log) == n_requests
    )  # the questions file is read from the cache to list the tables


def test_pinned_checksum_is_verified(shared_server, shared_data, tmp_path):
    src = shared_data("tablebench", "TableBench.jsonl")
    url = f"{shared_server.url}/tablebench"
    bad = "0" * 64
    with pytest.raises(DownloadError, match=f"checksum mismatch.*expected sha256 {bad}, got {_sha(src)}"):
        download_benchmark("tablebench", url=url, cache_root=tmp_path / "c", sha256={"TableBench.jsonl": bad})
    assert not (tmp_path / "c" / "TableBench.jsonl").exists()
    assert not list((tmp_path / "c").rglob("*.part"))  # the bad bytes were removed
    ok = download_benchmark(
        "tablebench", url=url, cache_root=tmp_path / "c", sha256={"TableBench.jsonl": _sha(src)}
    )
    assert ok.files[0].pinned and ok.files[0].sha256 == _sha(src)
    assert len(list(TableBench().load(tmp_path / "c"))) == len(list(TableBench().load(src)))
    with pytest.raises(DownloadError, match="not in the tablebench source"):
        download_benchmark("tablebench", url=url, cache_root=tmp_path / "c", sha256={"other.jsonl": bad})


def test_a_changed_upstream_file_is_refused_after_first_use(shared_data, tmp_path):
    src = shared_data("tablebench", "TableBench.jsonl")
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    shutil.copy(src, mirror / "TableBench.jsonl")
    with _Server(mirror) as srv:
        download_benchmark("tablebench", url=srv.url, cache_root=tmp_path / "c")
        with (mirror / "TableBench.jsonl").open("a") as fh:
            fh.write("\n")
        with pytest.raises(DownloadError, match="first downloaded"):
            download_benchmark("tablebench", url=srv.url, cache_root=tmp_path / "c", force=True)
    assert _sha(tmp_path / "c" / "TableBench.jsonl") == _sha(src)  # the verified copy is untouched


@pytest.mark.parametrize("ranges", [True, False])
def test_a_partial_download_resumes(shared_data, tmp_path, ranges):
    src = shared_data("tablebench", "TableBench.jsonl")
    data = src.read_bytes()
    cache = tmp_path / "c"
    (cache / ".partial").mkdir(parents=True)
    (cache / ".partial" / "TableBench.jsonl.part").write_bytes(data[: len(data) // 2])
    with _Server(src.parent.resolve(), ranges=ranges) as srv:
        result = download_benchmark(
            "tablebench", url=srv.url, cache_root=cache, sha256={"TableBench.jsonl": _sha(src)}
        )
    assert srv.log == [("/TableBench.jsonl", f"bytes={len(data) // 2}-")]
    assert result.files[0].status == ("resumed" if ranges else "downloaded")
    assert (cache / "TableBench.jsonl").read_bytes() == data


def _zip(path: Path, members: dict[str, Path | bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, content in members.items():
            if isinstance(content, Path):
                zf.write(content, name)
            else:
                zf.writestr(name, content)
    return path


def _spider_subset(spider: Path, dbs: int = 2) -> tuple[list[dict], list[str]]:
    records = json.loads((spider / "dev.json").read_text())
    keep = sorted({r["db_id"] for r in records})[:dbs]
    return [r for r in records if r["db_id"] in keep], keep


def test_a_zip_release_is_unpacked_in_the_official_layout(shared_data, tmp_path):
    spider = shared_data("spider")
    records, dbs = _spider_subset(spider)
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    members: dict[str, Path | bytes] = {"spider_data/dev.json": json.dumps(records).encode(),
                                        "spider_data/tables.json": spider / "tables.json",
                                        "__MACOSX/spider_data/._dev.json": b"junk"}  # fmt: skip
    for db in dbs:
        members[f"spider_data/database/{db}/{db}.sqlite"] = spider / "database" / db / f"{db}.sqlite"
    archive = _zip(mirror / "spider_data.zip", members)
    with _Server(mirror) as srv:
        result = download_benchmark("spider", url=srv.url, cache_root=tmp_path / "c")
    assert result.files[0].sha256 == _sha(archive)
    cache = tmp_path / "c"
    assert sorted(p.name for p in cache.iterdir() if not p.name.startswith(".")) == [
        "database",
        "dev.json",
        "tables.json",
    ]
    assert len(list(Spider().load(cache))) == len(records)
    assert not (cache / "spider_data.zip").exists() and not (cache / "__MACOSX").exists()
    again = download_benchmark(
        "spider", url=srv.url, cache_root=cache
    )  # server gone: must come from the cache
    assert again.files[0].status == "cached"


def test_nested_archives_bird_layout(shared_data, tmp_path):
    spider = shared_data("spider")
    records, dbs = _spider_subset(spider, 1)
    bird = [{"question_id": i, "db_id": r["db_id"], "question": r["question"], "evidence": "", "SQL": r["query"],
             "difficulty": "simple"} for i, r in enumerate(records)]  # fmt: skip
    inner = _zip(tmp_path / "dev_databases.zip", {
        f"dev_databases/{db}/{db}.sqlite": spider / "database" / db / f"{db}.sqlite" for db in dbs})  # fmt: skip
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    _zip(mirror / "dev.zip", {"dev_20240627/dev.json": json.dumps(bird).encode(),
                              "dev_20240627/dev_databases.zip": inner})  # fmt: skip
    with _Server(mirror) as srv:
        download_benchmark("bird", url=srv.url, cache_root=tmp_path / "c")
    tasks = list(BIRD().load(tmp_path / "c"))
    assert len(tasks) == len(bird) and not (tmp_path / "c" / "dev_databases.zip").exists()
    assert BIRD().score(tasks[0], tasks[0].answer).correct


def test_archive_members_outside_the_cache_are_refused(tmp_path):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    _zip(mirror / "evil.zip", {"top/ok.txt": b"ok", "top/../../evil.txt": b"bad"})
    source = BenchSource(
        name="evil", base_url="http://invalid.example", files=(RemoteFile("evil.zip", unpack=True),)
    )
    with _Server(mirror) as srv, pytest.raises(DownloadError, match="outside the target folder"):
        download_benchmark("evil", url=srv.url, cache_root=tmp_path / "c", source=source)
    assert not (tmp_path / "evil.txt").exists() and not (tmp_path / "c" / "top").exists()


def test_listed_names_must_stay_inside_the_cache(tmp_path):
    (tmp_path / "q.jsonl").write_text('{"f": "a.csv"}\n{"f": ["b.csv", "a.csv"]}\n')
    assert [f.name for f in listed_files("q.jsonl", "f", "t/")(tmp_path)] == ["t/a.csv", "t/b.csv"]
    (tmp_path / "q.jsonl").write_text('{"f": "../../etc/passwd"}\n')
    with pytest.raises(DownloadError, match="relative path inside the cache"):
        listed_files("q.jsonl", "f", "t/")(tmp_path)


@pytest.mark.requires_data("tablebench")
def test_http_errors_and_env_override(tmp_path, monkeypatch, shared_server):
    with pytest.raises(DownloadError, match="HTTP 404"):
        download_benchmark("tablebench", url=f"{shared_server.url}/nowhere", cache_root=tmp_path / "a")
    monkeypatch.setenv("DATADOJO_BENCH_URL_TABLEBENCH", f"{shared_server.url}/tablebench")
    result = download_benchmark("tablebench", cache_root=tmp_path / "b")
    assert result.files[0].url == f"{shared_server.url}/tablebench/TableBench.jsonl"


@pytest.mark.requires_data("tablebench")
def test_cli_bench_download_and_list(tmp_path, shared_server, monkeypatch):
    monkeypatch.setenv("DATADOJO_BENCH_CACHE", str(tmp_path / "root"))
    res = CliRunner().invoke(
        app, ["bench", "download", "tablebench", "--url", f"{shared_server.url}/tablebench"]
    )
    assert res.exit_code == 0, res.output
    assert str(tmp_path / "root" / "tablebench") in res.output
    assert (tmp_path / "root" / "tablebench" / "TableBench.jsonl").exists()
    listing = CliRunner().invoke(app, ["bench", "list"])
    assert listing.exit_code == 0 and "tablebench" in listing.output
    bad = CliRunner().invoke(app, ["bench", "download", "databench", "--url", shared_server.url])
    assert bad.exit_code != 0 and "no download source" in bad.output
    pin = CliRunner().invoke(app, ["bench", "download", "tablebench", "--url", f"{shared_server.url}/tablebench",
                                   "--force", "--sha256", "TableBench.jsonl=" + "1" * 64])  # fmt: skip
    assert pin.exit_code == 2 and "checksum mismatch" in pin.output


class _Tiny(DABench):
    """A user's benchmark that declares its own source (the DABench loader, a one-question release)."""

    name = "tiny-dabench"
    source = BenchSource(
        name="tiny-dabench",
        base_url="http://invalid.example",  # never reached: the tests give a loopback mirror
        files=(RemoteFile("da-dev-questions.jsonl"), RemoteFile("da-dev-labels.jsonl")),
        discover=listed_files("da-dev-questions.jsonl", "file_name", "da-dev-tables/"),
    )


def test_a_user_benchmark_downloads_by_name_from_its_own_source(tmp_path, monkeypatch):
    """``download_benchmark(name)`` finds the source the benchmark declares, through the registry's look-up
    (the download module imports no registry) -- also for a benchmark registered after start-up."""
    from datadojo.bench import registry
    from datadojo.registry import Registry

    factories: Registry = Registry("benchmark")
    monkeypatch.setattr(registry, "_FACTORIES", factories)
    monkeypatch.setattr(registry, "_INSTANCES", {})
    registry.register_benchmark(_Tiny.name, _Tiny)
    mirror = tmp_path / "mirror"
    (mirror / "da-dev-tables").mkdir(parents=True)
    (mirror / "da-dev-questions.jsonl").write_text(
        json.dumps({"id": 7, "question": "How many rows?", "file_name": "t.csv"}) + "\n"
    )
    (mirror / "da-dev-labels.jsonl").write_text(json.dumps({"id": 7, "common_answers": [["n", "2"]]}) + "\n")
    (mirror / "da-dev-tables" / "t.csv").write_text("a\n1\n2\n")
    assert registry.source_names() == ["tiny-dabench"]
    with _Server(mirror) as srv:
        result = download_benchmark("Tiny-DABench", url=srv.url, cache_root=tmp_path / "c")
    assert result.benchmark == "tiny-dabench"
    assert sorted(f.name for f in result.files) == [
        "da-dev-labels.jsonl",
        "da-dev-questions.jsonl",
        "da-dev-tables/t.csv",
    ]
    [task] = _Tiny().load(tmp_path / "c")
    assert task.answer == {"n": "2"} and Path(task.files[0].path).read_text() == "a\n1\n2\n"


def test_a_benchmark_without_a_source_says_why(tmp_path):
    with pytest.raises(
        UnknownNameError, match=r"no download source for 'databench' \(DataBench's test answers"
    ):
        download_benchmark("databench", cache_root=tmp_path / "c")
    with pytest.raises(UnknownNameError, match=r"no download source for 'nope'; sources: bird, dabench"):
        download_benchmark("nope", cache_root=tmp_path / "c")
    assert not (tmp_path / "c").exists()
