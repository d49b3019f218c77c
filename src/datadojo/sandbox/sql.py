"""Read-only SQLite execution for the agent's SQL tool, with the result shown as an aligned text table.

Why several layers for "read-only": the database handed to the agent is benchmark data (Spider/BIRD) that
must stay byte-identical across thousands of rollouts, and a model *will* try ``DROP TABLE`` or
``UPDATE`` when a task goes badly. So:

1. the file is opened through a ``file:...?mode=ro`` URI (SQLite itself refuses to write the file);
2. ``PRAGMA query_only = ON`` on the connection;
3. an authorizer refuses every action except reading: no INSERT/UPDATE/DELETE/CREATE/DROP/ALTER, no
   temporary tables, no ATTACH/DETACH (which would open other files), no transactions, no PRAGMA that sets
   a value or has side effects (table-introspection pragmas such as ``PRAGMA table_info(t)`` stay allowed),
   no ``load_extension``-style functions;
4. extension loading is disabled on the connection.

Limits: a progress handler aborts a query after ``timeout_s`` seconds (the whole result is read, so the
count in the footer is exact); only ``row_limit`` rows are kept and shown. **One statement per call**:
several statements (``SELECT 1; SELECT 2``) are refused with a message saying to send them one at a time,
so the model always knows which result it is looking at. A trailing ``;`` and comments are fine.

Table rendering: ``|``-separated columns padded to equal width, numbers right-aligned, ``NULL`` for
NULL, blobs as ``<blob N bytes>``, newlines/tabs inside values escaped, and each cell cut to
:data:`MAX_CELL_CHARS` characters (with ``...``) so that one long text column does not push every other
column out of the observation. The footer says how many rows the query returned and how many are shown.

With ``save_csv`` the *full* result (not just the shown rows) is written to that CSV path via a temporary
file and a rename, so a reader never sees half a file.
"""

from __future__ import annotations

import csv
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datadojo.fs import atomic_path

__all__ = ["MAX_CELL_CHARS", "SqlResult", "format_table", "run_sql", "split_statements"]

MAX_CELL_CHARS = 60
_PROGRESS_STEPS = 1000  # VM instructions between timeout checks (cheap; ~microseconds apart)

_ALLOWED_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION}
_RECURSIVE = getattr(sqlite3, "SQLITE_RECURSIVE", 33)
_ALLOWED_ACTIONS.add(_RECURSIVE)
_PRAGMA = sqlite3.SQLITE_PRAGMA
# Pragmas that only read, even when given an argument (the argument names a table or index).
_READ_PRAGMAS_WITH_ARG = frozenset(
    {"table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo",
     "foreign_key_list", "foreign_key_check", "integrity_check", "quick_check", "pragma_list"}
)  # fmt: skip
# Pragmas that change state even without an argument.
_SIDE_EFFECT_PRAGMAS = frozenset(
    {"optimize", "shrink_memory", "incremental_vacuum", "wal_checkpoint", "analysis_limit", "vacuum"}
)
_DENIED_FUNCTIONS = frozenset({"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"})

_ACTION_CODE_NAMES = (
    "CREATE_INDEX", "CREATE_TABLE", "CREATE_TEMP_INDEX", "CREATE_TEMP_TABLE", "CREATE_TEMP_TRIGGER",
    "CREATE_TEMP_VIEW", "CREATE_TRIGGER", "CREATE_VIEW", "DELETE", "DROP_INDEX", "DROP_TABLE",
    "DROP_TEMP_INDEX", "DROP_TEMP_TABLE", "DROP_TEMP_TRIGGER", "DROP_TEMP_VIEW", "DROP_TRIGGER", "DROP_VIEW",
    "INSERT", "PRAGMA", "READ", "SELECT", "TRANSACTION", "UPDATE", "ATTACH", "DETACH", "ALTER_TABLE",
    "REINDEX", "ANALYZE", "CREATE_VTABLE", "DROP_VTABLE", "FUNCTION", "SAVEPOINT", "RECURSIVE",
)  # fmt: skip
# Authorizer action code -> words for the message ("DROP TABLE on singer is not allowed").
_ACTION_NAMES = {
    getattr(sqlite3, f"SQLITE_{n}"): n.replace("_", " ")
    for n in _ACTION_CODE_NAMES
    if hasattr(sqlite3, f"SQLITE_{n}")
}
_ACTION_NAMES[sqlite3.SQLITE_TRANSACTION] = "a transaction statement"


@dataclass
class SqlResult:
    """What one SQL call produced: the text shown to the model plus the structured result.

    ``rows`` holds at most ``row_limit`` rows; ``n_rows`` is the number of rows the query returned in
    total; ``truncated`` says ``rows`` is shorter than that. ``error`` is ``None`` on success, else the
    same message as ``text``.
    """

    text: str
    columns: list[str] = field(default_factory=list)
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    n_rows: int = 0
    truncated: bool = False
    error: str | None = None
    csv_path: str | None = None


class _Refused(Exception):
    """Raised by our own checks before SQLite runs anything (multiple statements, missing file)."""


def split_statements(sql: str) -> list[str]:
    """Split SQL text into statements at top-level ``;``, respecting quotes and comments.

    Empty statements (only whitespace/comments) are dropped. Used to refuse multi-statement input with a
    clear message instead of SQLite's terse "You can only execute one statement at a time".
    """
    statements: list[str] = []
    buf: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c in "'\"`[":
            close = "]" if c == "[" else c
            j = i + 1
            while j < n:
                if sql[j] == close:
                    if close != "]" and j + 1 < n and sql[j + 1] == close:  # doubled quote escapes
                        j += 2
                        continue
                    break
                j += 1
            buf.append(sql[i : j + 1])
            i = j + 1
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            j = n if j < 0 else j
            buf.append(sql[i:j])
            i = j
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            j = n if j < 0 else j + 2
            buf.append(sql[i:j])
            i = j
        elif c == ";":
            statements.append("".join(buf))
            buf = []
            i += 1
        else:
            buf.append(c)
            i += 1
    statements.append("".join(buf))
    return [s for s in statements if _strip_comments(s).strip()]


def _strip_comments(stmt: str) -> str:
    out, i, n = [], 0, len(stmt)
    while i < n:
        if stmt.startswith("--", i):
            j = stmt.find("\n", i)
            i = n if j < 0 else j
        elif stmt.startswith("/*", i):
            j = stmt.find("*/", i + 2)
            i = n if j < 0 else j + 2
        else:
            out.append(stmt[i])
            i += 1
    return "".join(out)


# --- rendering ----------------------------------------------------------------------------------------


def _cell_text(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<blob {len(bytes(value))} bytes>"
    text = str(value)
    text = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    if len(text) > MAX_CELL_CHARS:
        text = text[: MAX_CELL_CHARS - 3] + "..."
    return text


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def format_table(columns: list[str], rows: list[tuple[Any, ...]], n_rows: int | None = None) -> str:
    """Render rows as an aligned text table with a header, a rule and a ``(N rows...)`` footer."""
    n_rows = len(rows) if n_rows is None else n_rows
    header = [_cell_text(c) for c in columns]
    body = [[_cell_text(v) for v in row] for row in rows]
    widths = [len(h) for h in header]
    for cells in body:
        for i, cell in enumerate(cells):
            widths[i] = max(widths[i], len(cell))
    numeric = [
        all(_is_number(r[i]) or r[i] is None for r in rows) and rows != [] for i in range(len(columns))
    ]

    def line(cells: list[str]) -> str:
        parts = [c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, numeric, strict=True)]
        return " | ".join(parts).rstrip()

    out = [line(header), "-+-".join("-" * w for w in widths)]
    out += [line(cells) for cells in body]
    noun = "row" if n_rows == 1 else "rows"
    if len(rows) < n_rows:
        out.append(f"({n_rows} {noun}, showing first {len(rows)})")
    else:
        out.append(f"({n_rows} {noun})")
    return "\n".join(out)


# --- execution ----------------------------------------------------------------------------------------


class _Authorizer:
    """SQLite authorizer callback that allows reading only, remembering why it denied something."""

    def __init__(self, statement: str) -> None:
        self.denied: str | None = None
        # Preparing a query on a table-valued pragma (``SELECT * FROM pragma_table_info('t')``) makes SQLite
        # ask for UPDATE on sqlite_master while it sets up the virtual table. A statement starting with
        # SELECT/VALUES/EXPLAIN/PRAGMA cannot contain an UPDATE, so that request is harmless there (and
        # the file is read-only underneath anyway); after WITH it could be a real UPDATE, so it stays denied.
        self.schema_setup_ok = _verb(statement) in ("SELECT", "VALUES", "EXPLAIN", "PRAGMA")

    def __call__(
        self, action: int, arg1: str | None, arg2: str | None, db: str | None, src: str | None
    ) -> int:
        if action == _PRAGMA:
            name = (arg1 or "").lower()
            if name in _READ_PRAGMAS_WITH_ARG or (arg2 is None and name not in _SIDE_EFFECT_PRAGMAS):
                return sqlite3.SQLITE_OK
            self.denied = f"PRAGMA {arg1}" + (f" = {arg2}" if arg2 is not None else "")
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_FUNCTION:
            fname = (arg2 or "").lower()
            if fname in _DENIED_FUNCTIONS:
                self.denied = f"the function {fname}()"
                return sqlite3.SQLITE_DENY
            return sqlite3.SQLITE_OK
        if action in _ALLOWED_ACTIONS:
            return sqlite3.SQLITE_OK
        if (
            action == sqlite3.SQLITE_UPDATE
            and self.schema_setup_ok
            and arg1 in ("sqlite_master", "sqlite_temp_master")
        ):
            return sqlite3.SQLITE_OK
        what = _ACTION_NAMES.get(action, f"action {action}")
        self.denied = what + (f" on {arg1}" if arg1 and action not in (sqlite3.SQLITE_TRANSACTION,) else "")
        return sqlite3.SQLITE_DENY


def _connect(db_path: str) -> sqlite3.Connection:
    path = Path(db_path)
    if not path.exists():
        raise _Refused(f"database file not found: {db_path}")
    if path.is_dir():
        raise _Refused(f"{db_path} is a directory, not an SQLite database file")
    uri = path.resolve().as_uri() + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    conn.text_factory = lambda b: b.decode("utf-8", errors="replace")
    if hasattr(conn, "enable_load_extension"):
        conn.enable_load_extension(False)
    conn.execute("PRAGMA query_only = ON")
    return conn


def _write_csv_atomic(target: str, columns: list[str], first: list[tuple[Any, ...]], rest: Any) -> int:
    """Write the header, ``first`` and every row left in the cursor ``rest``; return the total row count."""
    count = 0
    with atomic_path(target) as tmp, tmp.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(columns)
        for row in first:
            writer.writerow(["" if v is None else v for v in row])
            count += 1
        for row in rest:
            writer.writerow(["" if v is None else v for v in row])
            count += 1
    return count


def _verb(statement: str) -> str:
    """The statement's first keyword, upper-cased ("" when there is none)."""
    words = _strip_comments(statement).split(None, 1)
    return words[0].upper().rstrip("(") if words else ""


def _denied_what(statement: str, denied: str) -> str:
    """Name what was refused: the statement's verb ("DROP statements are"), or the detail inside a query.

    SQLite reports a ``DROP TABLE`` as a DELETE on ``sqlite_master``; the verb is what the model wrote.
    """
    verb = _verb(statement)
    if verb in ("SELECT", "WITH", "VALUES", "PRAGMA", "EXPLAIN", ""):
        return f"{denied} is"
    return f"{verb} statements are"


def _error(message: str) -> SqlResult:
    text = f"SQL error: {message}"
    return SqlResult(text=text, error=text)


def run_sql(
    db_path: str,
    query: str,
    *,
    row_limit: int = 200,
    timeout_s: float = 30.0,
    save_csv: str | None = None,
) -> SqlResult:
    """Run one read-only SQL statement on the SQLite file ``db_path`` and render its result.

    Never raises for a bad query: errors come back as ``SqlResult.error`` with text such as
    ``SQL error: no such table: foo`` (the model's observation). ``row_limit`` bounds the rows kept and
    shown; ``timeout_s`` bounds the time spent in SQLite; ``save_csv`` writes the full result to that path.
    """
    if row_limit < 0:
        raise ValueError(f"row_limit must be >= 0, got {row_limit}")
    statements = split_statements(query)
    if not statements:
        return _error("the query is empty")
    if len(statements) > 1:
        return _error(
            f"only one statement per call is allowed (found {len(statements)}); send them one at a time"
        )
    try:
        conn = _connect(db_path)
    except _Refused as exc:
        return _error(str(exc))
    except sqlite3.Error as exc:
        return _error(f"cannot open {db_path} read-only: {exc}")
    auth = _Authorizer(statements[0])
    deadline = time.monotonic() + timeout_s
    timed_out = False

    def progress() -> int:
        nonlocal timed_out
        if time.monotonic() > deadline:
            timed_out = True
            return 1
        return 0

    try:
        conn.set_authorizer(auth)
        conn.set_progress_handler(progress, _PROGRESS_STEPS)
        cur = conn.execute(statements[0])
        if cur.description is None:
            return SqlResult(text="(the statement returned no result set)")
        columns = [d[0] for d in cur.description]
        kept: list[tuple[Any, ...]] = []
        n_rows = 0
        csv_path = None
        if save_csv is not None:
            kept = [tuple(r) for r in cur.fetchmany(row_limit + 1)]
            n_rows = _write_csv_atomic(save_csv, columns, kept, cur)
            kept = kept[:row_limit]
            csv_path = save_csv
        else:
            for row in cur:
                if n_rows < row_limit:
                    kept.append(tuple(row))
                n_rows += 1
        text = format_table(columns, kept, n_rows)
        if csv_path is not None:
            text += f"\nSaved all {n_rows} rows to {csv_path}"
        return SqlResult(
            text=text,
            columns=columns,
            rows=kept,
            n_rows=n_rows,
            truncated=n_rows > len(kept),
            csv_path=csv_path,
        )
    except sqlite3.Error as exc:
        if timed_out:
            return _error(
                f"the query did not finish within {timeout_s:g} s and was stopped; "
                "make it cheaper (filter early, add LIMIT, avoid cross joins)"
            )
        if auth.denied is not None and str(exc).startswith(("not authorized", "authorization denied")):
            return _error(
                f"{_denied_what(statements[0], auth.denied)} not allowed: this SQL tool is read-only "
                "(no writes, ATTACH/DETACH, transactions, setting PRAGMAs or loading extensions); "
                "use SELECT queries only"
            )
        return _error(str(exc))
    except OSError as exc:
        return _error(f"cannot write the CSV file {save_csv}: {exc}")
    finally:
        conn.close()
