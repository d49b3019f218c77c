"""The forked worker's own namespaces (private /tmp): which mounts it must bind back, read from mountinfo.

The live behaviour (a private /tmp per forked sandbox, the sibling's invisible, ``../`` read-only) is
checked in ``test_sandbox_forkserver.py``; here the parser of ``/proc/self/mountinfo`` it relies on, on
lines as the kernel writes them (octal escapes, nested mounts, the same point mounted twice).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from datadojo.sandbox.worker.namespaces import _MS_NODEV, _MS_NOSUID, _MS_RDONLY, _MS_RELATIME, mounts_below


def line(mid: int, point: str, opts: str = "rw,relatime") -> str:
    return f"{mid} 1 0:{mid} / {point} {opts} shared:1 - tmpfs tmpfs rw"


MOUNTINFO = "\n".join(
    [
        line(20, "/"),
        line(21, "/tmp", "rw,nosuid,nodev"),
        line(22, "/tmp/datadojo-ci.x/venv", "ro,nosuid,nodev,relatime"),
        line(23, "/tmp/datadojo-ci.x/venv/lib/inner", "ro"),  # inside the one above: comes back with it
        line(24, "/tmp/datadojo-pool-ab", "rw,relatime"),
        line(25, "/tmpfoo", "rw"),  # not beneath /tmp
        line(26, "/usr", "ro"),
        line(27, "/tmp/with\\040space", "rw"),
    ]
)


def test_outermost_mounts_beneath_tmp_with_their_flags() -> None:
    got = mounts_below("/tmp", MOUNTINFO)
    assert got == [
        ("/tmp/datadojo-ci.x/venv", _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_RELATIME),
        ("/tmp/datadojo-pool-ab", _MS_RELATIME),  # kept: a remount in a user namespace must repeat it
        ("/tmp/with space", 0),
    ]


def test_tmp_itself_and_lookalikes_are_not_beneath_it() -> None:
    got = [p for p, _ in mounts_below("/tmp", MOUNTINFO)]
    assert "/tmp" not in got and "/tmpfoo" not in got and "/usr" not in got


def test_a_point_mounted_twice_counts_once_with_the_last_flags() -> None:
    info = "\n".join([line(1, "/tmp/x", "rw"), line(2, "/tmp/x", "ro")])
    assert mounts_below("/tmp", info) == [("/tmp/x", _MS_RDONLY)]


def test_short_or_empty_lines_are_skipped() -> None:
    assert mounts_below("/tmp", "\n\n12 1 0:1\n") == []


@given(st.text(alphabet=st.characters(codec="ascii", exclude_characters="/\x00"), min_size=1, max_size=12))
def test_escaped_names_come_back_as_written(name: str) -> None:
    escaped = "".join(f"\\{ord(c):03o}" if c in " \t\n\\" else c for c in name)
    if not escaped.strip() or any(c in name for c in "\r\x0b\x0c\x1c\x1d\x1e\x1f\x85"):
        return  # str.splitlines / str.split would cut such a line: the kernel escapes only the four above
    info = line(3, f"/tmp/{escaped}", "ro")
    assert mounts_below("/tmp", info) == [(f"/tmp/{name}", _MS_RDONLY)]
