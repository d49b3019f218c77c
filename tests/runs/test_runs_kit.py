"""The run kit: resume refusal, ledger crash repair and idempotence, rejections/funnel, usage policy, cache keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from datadojo.errors import DataDojoError, ExitCode
from datadojo.jsonl import iter_jsonl
from datadojo.runs import (
    FailurePolicy,
    Funnel,
    Rejection,
    RejectionWriter,
    ResumeError,
    RunFolder,
    StageCache,
    TooManyFailures,
    UsageLedger,
    WorkLedger,
    code_version,
    content_hash,
    read_usage_totals,
    stage_key,
    stage_progress,
)


def test_run_folder_resumes_same_settings_and_refuses_changed_ones(tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = RunFolder(out, "synth", {"temperature": 0.7, "model": {"name": "m", "top_p": 0.95}})
    assert not first.resumed and json.loads((out / "run.json").read_text())["settings"]["temperature"] == 0.7
    (out / "trajectories.jsonl").write_text('{"a": 1}\n')
    again = RunFolder(out, "synth", {"model": {"top_p": 0.95, "name": "m"}, "temperature": 0.7})
    assert again.resumed  # key order does not matter
    with pytest.raises(ResumeError) as err:
        RunFolder(out, "synth", {"temperature": 1.0, "model": {"name": "m", "top_p": 0.9}})
    msg = str(err.value)
    assert (
        "temperature: was 0.7, now 1.0" in msg and "model.top_p: was 0.95, now 0.9" in msg and str(out) in msg
    )
    assert isinstance(err.value, DataDojoError) and err.value.exit_code == ExitCode.BAD_INPUT
    # an ignored setting may change; another kind of job may not reuse the folder
    RunFolder(
        out,
        "synth",
        {"temperature": 0.7, "model": {"name": "m", "top_p": 0.95}, "workers": 9},
        ignore=("workers",),
    )
    with pytest.raises(ResumeError, match="holds a 'synth' run"):
        RunFolder(out, "eval", {"temperature": 0.7})


def test_run_folder_refuses_a_foreign_non_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ResumeError, match=r"no run\.json"):
        RunFolder(tmp_path, "synth", {})
    assert RunFolder(tmp_path, "synth", {}, adopt=True).record.exists()


def test_ledger_cuts_a_torn_last_line_and_keeps_first_commit(tmp_path: Path) -> None:
    path = tmp_path / "done.jsonl"
    with WorkLedger(path) as led:
        assert led.commit("u1", n=1) and led.commit("u2", n=2)
        assert not led.commit("u1", n=99)  # idempotent: the first record stays
    with path.open("ab") as fh:  # a crash in the middle of the third commit
        fh.write(b'{"key": "u3", "n": 3, "outp')
    led = WorkLedger(path)
    assert led.repaired_bytes > 0 and set(led) == {"u1", "u2"} and led.get("u1")["n"] == 1
    assert led.todo(["u1", "u3", "u2", "u4"]) == ["u3", "u4"]
    led.commit("u3", n=3)
    led.close()
    lines = [r for _, r in iter_jsonl(path)]
    assert [r["key"] for r in lines] == ["u1", "u2", "u3"]  # the torn line is gone, not merged
    outputs = [{"unit": "u1"}, {"unit": "u9"}, {"unit": "u3"}]
    assert WorkLedger(path).committed(outputs, lambda r: r["unit"]) == [{"unit": "u1"}, {"unit": "u3"}]


def test_rejections_written_once_and_funnel_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "rejected.jsonl"
    with RejectionWriter(path) as rw:
        assert rw.add(Rejection("filter", "t1", "too_long", "1100 words", {"words": 1100}))
        assert not rw.add(Rejection("filter", "t1", "too_long"))
    with RejectionWriter(path) as rw:  # a resumed run re-rejecting the same unit writes nothing
        assert not rw.add(Rejection("filter", "t1", "too_long"))
        rw.add(Rejection("judge", "t2", "inconsistent"))
        assert rw.reasons() == {"too_long": 1, "inconsistent": 1}
    recs = [r for _, r in iter_jsonl(path)]
    assert recs[0] == {
        "stage": "filter",
        "key": "t1",
        "reason": "too_long",
        "detail": "1100 words",
        "words": 1100,
    }
    f = Funnel()
    f.add("draw", 10, 7, {"no_rows": 2, "dup": 1})
    f.add("solve", 7, 5, {"unsolved": 2})
    data = json.loads(f.write(tmp_path / "funnel.json").read_text())
    assert data["in"] == 10 and data["kept"] == 5 and data["yield"] == 0.5
    assert data["steps"][0]["removed"] == {"dup": 1, "no_rows": 2}
    with pytest.raises(ValueError):
        f.add("bad", 3, 4)


def test_usage_ledger_adds_up_and_failure_policy(tmp_path: Path) -> None:
    path = tmp_path / "usage.jsonl"
    u = UsageLedger(path, "queries", FailurePolicy(max_failed_fraction=0.25, min_requests=4))
    u.add("teacher", requests=2, prompt_tokens=100, completion_tokens=20)
    u.add("teacher", requests=1, failed=1)  # 1 of 3: under min_requests, tolerated
    u.add("judge", requests=1, prompt_tokens=5)
    u.save()
    UsageLedger(path, "queries").save()
    tot = read_usage_totals(path)["queries"]
    assert tot["invocations"] == 2 and tot["roles"]["teacher"]["requests"] == 3
    assert tot["roles"]["teacher"]["failed"] == 1 and tot["roles"]["judge"]["prompt_tokens"] == 5
    with pytest.raises(TooManyFailures, match="2 of 5 LLM requests failed") as err:
        u.add("teacher", requests=1, failed=1)
    assert err.value.exit_code == ExitCode.MODEL_SERVER


def test_usage_ledger_appends_batches_so_a_killed_invocation_keeps_them(tmp_path: Path) -> None:
    """Before: one record when the invocation ended, so a killed run's requests were lost."""
    path = tmp_path / "usage.jsonl"
    u = UsageLedger(path, "queries", flush_every=4)
    for _ in range(10):
        u.add("teacher", requests=1, prompt_tokens=10, check=False)
    # killed here (no save): the two full batches of 4 are on disk, the last 2 requests are not
    tot = read_usage_totals(path)["queries"]
    assert tot["invocations"] == 1 and tot["roles"]["teacher"]["requests"] == 8
    assert tot["roles"]["teacher"]["prompt_tokens"] == 80
    with pytest.raises(KeyboardInterrupt), UsageLedger(path, "queries", flush_every=100) as v:
        v.add("teacher", requests=3, check=False)
        raise KeyboardInterrupt  # Ctrl-C inside the stage: its 3 requests are flushed on the way out
    u.save()  # the first invocation ends: its last 2
    tot = read_usage_totals(path)["queries"]
    assert tot["invocations"] == 2 and tot["roles"]["teacher"]["requests"] == 8 + 3 + 2
    assert u.record()["roles"]["teacher"]["requests"] == 10  # the invocation's own totals


def test_content_hash_follows_content_not_names_or_key_order(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        (d / "sub").mkdir(parents=True)
        (d / "x.csv").write_text("1,2\n")
        (d / "sub" / "y.csv").write_text("3\n")
    assert content_hash({"in": a, "k": 1, "j": 2}) == content_hash({"j": 2, "in": b, "k": 1})
    before = content_hash(a)
    (a / "sub" / "y.csv").write_text("4\n")
    assert content_hash(a) != before
    (a / "sub" / "y.csv").rename(a / "sub" / "z.csv")  # a renamed file inside a folder is a change too
    assert content_hash(a) != content_hash(b)
    with pytest.raises(FileNotFoundError):
        content_hash(tmp_path / "missing.csv")


def test_stage_keys_change_with_settings_inputs_upstream_and_code(tmp_path: Path) -> None:
    data = tmp_path / "d.csv"
    data.write_text("a\n1\n")
    base = stage_key("sft", {"lr": 1e-5}, inputs=[data], upstream={"curation": "k1"}, code="c1")
    assert base == stage_key("sft", {"lr": 1e-5}, inputs=[data], upstream={"curation": "k1"}, code="c1")
    assert base != stage_key("sft", {"lr": 2e-5}, inputs=[data], upstream={"curation": "k1"}, code="c1")
    assert base != stage_key("sft", {"lr": 1e-5}, inputs=[data], upstream={"curation": "k2"}, code="c1")
    assert base != stage_key("sft", {"lr": 1e-5}, inputs=[data], upstream={"curation": "k1"}, code="c2")
    data.write_text("a\n2\n")
    assert base != stage_key("sft", {"lr": 1e-5}, inputs=[data], upstream={"curation": "k1"}, code="c1")
    assert code_version(["datadojo.runs"]) == code_version(["datadojo.runs"])
    assert code_version(["datadojo.runs"]) != code_version(["datadojo.runs.ledger"])


def test_stage_cache_commits_after_manifest_and_resumes_half_runs(tmp_path: Path) -> None:
    cache = StageCache(tmp_path / "cache")
    assert cache.lookup("sft", "k" * 64) is None
    folder = cache.begin("sft", "k" * 64, {"lr": 1})
    (folder.path / "partial.txt").write_text("half")
    # killed here: no commit, so a new cache (a rerun) sees nothing committed and resumes the same folder
    cache2 = StageCache(tmp_path / "cache")
    assert cache2.lookup("sft", "k" * 64) is None
    assert cache2.begin("sft", "k" * 64, {"lr": 1}).resumed
    entry = cache2.commit("sft", "k" * 64, {"model_dir": Path("/x"), "steps": 2})
    assert entry.manifest == {"model_dir": "/x", "steps": 2}
    cache2.close()
    again = StageCache(tmp_path / "cache").lookup("sft", "k" * 64)
    assert again is not None and again.manifest["steps"] == 2 and (again.path / "partial.txt").exists()
    (again.path / "manifest.json").unlink()  # a deleted output is a miss, not a crash
    assert StageCache(tmp_path / "cache").lookup("sft", "k" * 64) is None


def test_stage_progress_binds_the_stage() -> None:
    seen = []
    stage_progress(lambda s, d, t: seen.append((s, d, t)), "sample")(3, 10)
    stage_progress(None, "x")(1, 1)
    assert seen == [("sample", 3, 10)]


def test_usage_from_a_backend_is_saved_before_the_policy_decides(tmp_path: Path) -> None:
    from datadojo.llm.base import UsageStats

    class Backend:
        usage = UsageStats(requests=3, failures=9, prompt_tokens=30, completion_tokens=6)

    path = tmp_path / "usage.jsonl"
    u = UsageLedger(path, "synthesis")
    u.add_backend("teacher", Backend())  # no check yet: the totals are taken after the fact
    u.save()
    with pytest.raises(TooManyFailures, match="9 of 12"):
        u.check()
    assert read_usage_totals(path)["synthesis"]["roles"]["teacher"] == {
        "requests": 12, "prompt_tokens": 30, "completion_tokens": 6, "repaired": 0, "failed": 9,
    }  # fmt: skip


def test_a_ledger_written_before_the_kit_resumes_through_key_of(tmp_path):
    """Sailor's units.jsonl and DataMind's progress.jsonl of earlier versions keep their finished units."""
    from datadojo.synth.datamind.store import Paths

    units = tmp_path / "units.jsonl"
    units.write_text('{"unit": "a", "kept": 1}\n{"key": "b", "unit": "b"}\n')
    ledger = WorkLedger(units, key_of=lambda r: r.get("key") or r.get("unit"))
    assert ledger.done("a") and ledger.done("b") and not WorkLedger(units).done("a")
    (tmp_path / "progress.jsonl").write_text(
        '{"stage": "queries", "key": "abc:Counting"}\n{"key": "compose:f:0:2", "stage": "compose"}\n'
    )
    progress = Paths(tmp_path).work_ledger()
    assert progress.done("queries:abc:Counting") and progress.done("compose:f:0:2") and len(progress) == 2


def test_a_new_run_folder_is_closed_to_other_users_and_an_existing_one_is_left_as_it_is(
    tmp_path: Path,
) -> None:
    # A Landlock-level cell runs under a uid of its own and may stat() whatever "others" may reach
    # (docs/sandbox.md): the folder a run creates grants nothing to others; group and owner keep theirs.
    import os
    import stat

    old = os.umask(0o022)
    try:
        RunFolder(tmp_path / "new" / "run", "eval", {"k": 1})
        existing = tmp_path / "mine"
        existing.mkdir(mode=0o755)
        existing.chmod(0o755)
        RunFolder(existing, "eval", {"k": 1})
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new" / "run").stat().st_mode) == 0o750  # 0o755 less o=rx
    assert stat.S_IMODE(existing.stat().st_mode) == 0o755


def test_natural_key_orders_ids_as_a_reader_counts() -> None:
    from datadojo.runs.html import natural_key

    # DABench-style numbers as text, Spider-style prefixes, and what a loader may hand over: ints, None
    ids = ["105", "5", "0", "108", "dev_12", "dev_2", "dev_2a", 7, None, "q10", "q9"]
    assert sorted(ids, key=natural_key) == [
        None, "0", "5", 7, "105", "108", "dev_2", "dev_2a", "dev_12", "q9", "q10",
    ]  # fmt: skip
    assert sorted(["10", "9", "9b", "x"], key=natural_key) == ["9", "9b", "10", "x"]
