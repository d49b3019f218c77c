"""Static policy: refuse obviously dangerous agent code *before* it runs, by walking its AST.

Why a static check at all, when the code runs in an isolated process anyway: DataMind (§4, "security
sandboxing") filters "insecure function calls" before execution, and a rejection is a *useful observation*
for the model ("subprocess is not available; do it in pandas"), where a crash inside the sandbox teaches it
nothing. The policy is the first line of defence only. It cannot see through code that is assembled at run
time (a ``.py`` file the agent writes and then imports, objects reached through containers, ...); process
isolation (``sandbox/isolation.py``) is the second line and contains whatever slips through here.

What is checked (every set is configurable through :class:`PolicyConfig`):

* **Imports** of blocked modules (``subprocess``, ``socket``, ``ctypes``, ``multiprocessing``, ``signal``,
  ``importlib``, network clients, ...). A dotted entry blocks the module and its submodules
  (``urllib.request`` blocks ``urllib.request.urlopen`` but not ``urllib.parse``).
* **References** (calls *or* values) to blocked dotted names: ``os.system``, ``os.fork``, ``os.kill``,
  ``eval``, ``exec``, ``__import__``, ``globals``, ``sys.modules``, ... Names are resolved through import
  aliases (``import os as o; o.system``), ``from`` imports (``from os import system``), plain re-binding
  (``o = os; o.system``), ``builtins.X`` and literal ``getattr(os, "system")``.
* **Attributes** that reach interpreter internals on any object (``__subclasses__``, ``__globals__``,
  ``__builtins__``, ``__dict__``, frame attributes such as ``f_globals``), and process-control method names
  on objects the checker cannot resolve (``x.system``, ``x.popen``, ``x.chmod``) -- which also catches
  chains such as ``pd.io.common.os.system``.
* **Dynamic attribute access**: ``getattr``/``setattr``/``delattr`` with a non-literal name.
* **File system**: writes (``open(..., "w")``, ``df.to_csv``, ``Path.write_text``, ``np.save``, ...),
  deletions and renames (``os.remove``, ``shutil.rmtree``, ``Path.unlink``, ...) and ``os.chdir`` whose
  path is a *static* expression that leaves the working directory: absolute (outside the workspace and
  :attr:`PolicyConfig.allowed_write_roots`), ``~``-relative, or escaping with ``..``. Paths computed at
  run time pass; isolation decides about them.
* **Network URLs** given as literals to readers (``pd.read_csv("https://...")``).

A ``SyntaxError`` is *not* a policy violation: :func:`check_code` returns ``[]`` and the worker reports the
error as the normal Python traceback the model expects.
"""

from __future__ import annotations

import ast
import posixpath
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pydantic import ConfigDict, Field

from datadojo.config import Settings

__all__ = [
    "DEFAULT_ALLOWED_NAMES",
    "DEFAULT_BLOCKED_ATTRIBUTES",
    "DEFAULT_BLOCKED_CALLS",
    "DEFAULT_BLOCKED_MODULES",
    "DEFAULT_DELETE_CALLS",
    "DEFAULT_SUSPICIOUS_ATTRIBUTES",
    "DEFAULT_WRITE_METHODS",
    "PolicyConfig",
    "PolicyViolation",
    "check_code",
    "format_violations",
]

DEFAULT_BLOCKED_MODULES: frozenset[str] = frozenset(
    {
        # processes
        "subprocess", "_posixsubprocess", "multiprocessing", "concurrent.futures.process", "pty",
        "posix", "nt", "_winapi", "pexpect", "sh", "plumbum",
        # signals, limits, terminals
        "signal", "_signal", "resource", "termios", "tty",
        # native code
        "ctypes", "_ctypes", "cffi", "_cffi_backend",
        # dynamic code / imports
        "importlib", "runpy", "code", "codeop", "imp", "zipimport", "pickletools", "marshal", "_pickle",
        # network
        "socket", "_socket", "ssl", "_ssl", "socketserver", "select", "selectors",
        "urllib.request", "urllib3", "http.client", "http.server", "http.cookiejar", "requests", "httpx",
        "aiohttp", "websocket", "websockets", "ftplib", "smtplib", "poplib", "imaplib", "nntplib",
        "telnetlib", "xmlrpc", "webbrowser", "paramiko", "pycurl", "asyncio.subprocess",
        # interpreter internals
        "sys.monitoring",
    }
)  # fmt: skip

DEFAULT_BLOCKED_CALLS: frozenset[str] = frozenset(
    {
        # dynamic code and the builtins namespace
        "eval", "exec", "compile", "__import__", "globals", "vars", "breakpoint", "__builtins__",
        "__loader__", "__spec__",
        # processes
        "os.system", "os.popen", "os.fork", "os.forkpty", "os.vfork", "os.execl", "os.execle", "os.execlp",
        "os.execlpe", "os.execv", "os.execve", "os.execvp", "os.execvpe", "os.spawnl", "os.spawnle",
        "os.spawnlp", "os.spawnlpe", "os.spawnv", "os.spawnve", "os.spawnvp", "os.spawnvpe",
        "os.posix_spawn", "os.posix_spawnp", "os.startfile", "os.register_at_fork",
        "asyncio.create_subprocess_exec", "asyncio.create_subprocess_shell",
        "concurrent.futures.ProcessPoolExecutor", "pandas.read_clipboard", "pandas.io.clipboard",
        # signals and other processes
        "os.kill", "os.killpg", "os.pidfd_open", "os.setsid", "os.setpgid", "os.setpgrp",
        # identity and permissions
        "os.chmod", "os.fchmod", "os.lchmod", "os.chown", "os.fchown", "os.lchown", "os.chroot",
        "os.setuid", "os.seteuid", "os.setreuid", "os.setresuid", "os.setgid", "os.setegid",
        "os.setregid", "os.setresgid", "os.setgroups", "os.umask", "shutil.chown",
        # leaving the interpreter abruptly
        "os._exit", "os.abort",
        # environment changes leak into every later cell of a persistent session
        "os.putenv", "os.unsetenv",
        # network
        "asyncio.open_connection", "asyncio.start_server", "asyncio.open_unix_connection",
        "asyncio.start_unix_server",
        # interpreter internals
        "sys.modules", "sys._getframe", "sys.settrace", "sys.setprofile", "sys.addaudithook",
        "sys.meta_path", "sys.path_hooks", "sys.remote_exec", "sys.set_asyncgen_hooks",
        "inspect.currentframe", "inspect.stack", "inspect.trace", "inspect.getouterframes",
        "inspect.getinnerframes", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
        # deserialization that can call arbitrary functions
        "pickle.loads", "pickle.load", "pickle.Unpickler", "pandas.read_pickle",
        "shelve.open", "dill.loads", "dill.load", "joblib.load", "cloudpickle.loads",
        "operator.attrgetter", "operator.methodcaller",
    }
)  # fmt: skip

# Attribute names refused on *any* object: they reach interpreter internals (sandbox escapes go through
# them: ``().__class__.__base__.__subclasses__()``, ``f.__globals__["os"]``, frame walking).
DEFAULT_BLOCKED_ATTRIBUTES: frozenset[str] = frozenset(
    {
        "__subclasses__", "__bases__", "__base__", "__mro__", "mro", "__globals__", "__code__",
        "__closure__", "__builtins__", "__loader__", "__spec__", "__dict__", "__getattribute__",
        "__getattr__", "__setattr__", "__delattr__", "__reduce__", "__reduce_ex__", "__import__",
        "__self__", "__func__", "__wrapped__", "__init_subclass__", "__class_getitem__", "__set_name__",
        "__traceback__", "__frame__", "__objclass__",
        "f_globals", "f_locals", "f_builtins", "f_back", "f_code", "gi_frame", "gi_code", "cr_frame",
        "cr_code", "ag_frame", "ag_code", "tb_frame", "tb_next", "co_code", "func_globals",
    }
)  # fmt: skip

# Method names refused when the object is not a statically known, allowed name (``x.system(...)``,
# ``Path(p).chmod(...)``, ``pd.io.common.os.system``). A DataFrame column that happens to have one of these
# names is still reachable as ``df["system"]``; the message says so.
DEFAULT_SUSPICIOUS_ATTRIBUTES: frozenset[str] = frozenset(
    {
        "system", "popen", "fork", "forkpty", "execv", "execve", "execl", "execle", "execlp", "execlpe",
        "execvp", "execvpe", "spawnv", "spawnve", "spawnl", "spawnle", "spawnlp", "spawnlpe", "spawnvp",
        "spawnvpe", "posix_spawn", "posix_spawnp", "killpg", "_exit", "chmod", "lchmod", "chown",
        "lchown", "fchmod", "fchown", "setuid", "setgid", "_getframe", "subprocess", "ctypes",
        "check_output", "check_call", "Popen", "getoutput", "getstatusoutput", "create_subprocess_exec",
        "create_subprocess_shell", "subprocess_exec", "subprocess_shell", "load_extension",
        "enable_load_extension",
    }
)  # fmt: skip

# Dotted names that are harmless although a suspicious attribute name appears in them.
DEFAULT_ALLOWED_NAMES: frozenset[str] = frozenset({"platform.system", "os.path"})

# Calls whose positional path arguments must stay inside the workspace (delete, move, rename, ...).
# For the copy functions only the destination (second argument) counts: their source is only read.
DEFAULT_DELETE_CALLS: frozenset[str] = frozenset(
    {
        "os.remove", "os.unlink", "os.rmdir", "os.removedirs", "os.rename", "os.renames", "os.replace",
        "os.truncate", "os.link", "os.symlink", "os.mkdir", "os.makedirs", "os.utime", "os.mkfifo",
        "os.mknod", "shutil.rmtree", "shutil.move", "shutil.copy", "shutil.copy2", "shutil.copyfile",
        "shutil.copytree", "shutil.copymode", "shutil.copystat", "shutil.unpack_archive",
        "shutil.make_archive", "pathlib.Path.unlink",
    }
)  # fmt: skip
_COPY_CALLS = frozenset(
    {
        "shutil.copy",
        "shutil.copy2",
        "shutil.copyfile",
        "shutil.copytree",
        "shutil.copymode",
        "shutil.copystat",
    }
)

# Functions and methods (by their last name) that write their first path argument (or ``path=`` etc.).
DEFAULT_WRITE_METHODS: frozenset[str] = frozenset(
    {
        "to_csv", "to_excel", "to_parquet", "to_json", "to_pickle", "to_feather", "to_hdf", "to_html",
        "to_latex", "to_markdown", "to_stata", "to_xml", "to_orc", "to_string", "savefig", "save", "savez",
        "savez_compressed", "savetxt", "tofile", "ExcelWriter", "write_csv", "write_parquet",
        "write_table", "imsave", "imwrite",
    }
)  # fmt: skip

# Path-object methods that change the path they are called on (``Path("/x").unlink()``).
_PATH_MUTATORS = frozenset(
    {"unlink", "rmdir", "rename", "replace", "write_text", "write_bytes", "touch", "mkdir", "symlink_to",
     "hardlink_to", "chmod", "lchmod", "rmtree"}
)  # fmt: skip
_PATH_CONSTRUCTORS = frozenset(
    {"pathlib.Path", "pathlib.PosixPath", "pathlib.PurePath", "pathlib.PurePosixPath", "Path", "PosixPath"}
)
_OPEN_FUNCTIONS = frozenset({"open", "io.open", "codecs.open", "gzip.open", "bz2.open", "lzma.open"})
_PATH_KEYWORDS = (
    "path",
    "path_or_buf",
    "fname",
    "file",
    "filename",
    "excel_writer",
    "buf",
    "where",
    "target",
)
_READER_PREFIXES = ("read_",)
_READER_NAMES = frozenset({"open", "urlopen", "loadtxt", "genfromtxt", "fromfile", "ExcelFile", "load"})
_OS_WRITE_FLAGS = frozenset({"O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND"})


class PolicyConfig(Settings):
    """What the static policy refuses. Every field can be replaced to tighten or loosen it.

    ``allowed_write_roots`` are absolute paths (besides the workspace) that may be written, e.g. ``/tmp``
    when the sandbox mounts a private tmpfs there; by default only ``/dev/null``.
    """

    model_config = ConfigDict(validate_default=False)  # built per sandbox: defaults are trusted constants

    enabled: bool = Field(True, description="run the static policy check before each cell")
    blocked_modules: frozenset[str] = Field(
        DEFAULT_BLOCKED_MODULES, description="modules whose import is refused"
    )
    blocked_calls: frozenset[str] = Field(
        DEFAULT_BLOCKED_CALLS, description="calls refused (names or dotted names)"
    )
    blocked_attributes: frozenset[str] = Field(
        DEFAULT_BLOCKED_ATTRIBUTES, description="attributes whose access is refused"
    )
    suspicious_attributes: frozenset[str] = Field(
        DEFAULT_SUSPICIOUS_ATTRIBUTES, description="attributes whose access is recorded as suspicious"
    )
    allowed_names: frozenset[str] = Field(
        DEFAULT_ALLOWED_NAMES, description="names allowed even where a blocked rule would match"
    )
    delete_calls: frozenset[str] = Field(
        DEFAULT_DELETE_CALLS, description="calls that delete files (refused outside the workspace)"
    )
    write_methods: frozenset[str] = Field(
        DEFAULT_WRITE_METHODS,
        description="methods that write files (refused outside the workspace and allowed_write_roots)",
    )
    allowed_write_roots: tuple[str, ...] = Field(
        ("/dev/null",), description="absolute paths besides the workspace that may be written (e.g. /tmp)"
    )
    allow_dynamic_getattr: bool = Field(False, description="allow getattr with a computed name")
    check_paths: bool = Field(True, description="check literal file paths against the workspace")
    block_network_urls: bool = Field(True, description="refuse literal network URLs")
    url_schemes: tuple[str, ...] = Field(
        ("http://", "https://", "ftp://", "ftps://", "s3://", "gs://", "file://"),
        description="URL prefixes counted as network URLs",
    )


@dataclass(frozen=True)
class PolicyViolation:
    """One refused construct: ``rule`` (a stable identifier), a message for the model, the 1-based line."""

    rule: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line is not None else "code"
        return f"{where}: {self.message} [{self.rule}]"


# --- messages -------------------------------------------------------------------------------------------

_CATEGORIES: dict[str, tuple[str, str, str]] = {
    # category: (rule, why, what to do instead)
    "process": (
        "process",
        "starting processes or shell commands is not allowed in this sandbox",
        "do the work in Python with pandas/numpy/pathlib instead of shell tools",
    ),
    "network": (
        "network",
        "there is no network access in this sandbox",
        "use the data files in the working directory",
    ),
    "native": (
        "native_code",
        "loading native code is not allowed",
        "use numpy/pandas for fast computation",
    ),
    "process_control": (
        "process_control",
        "signals, resource limits and terminal control are managed by the sandbox",
        "compute directly (the sandbox already enforces time and memory limits)",
    ),
    "dynamic_code": (
        "dynamic_code",
        "running code built from strings or imported dynamically is not allowed",
        "write the code directly and use ordinary import statements",
    ),
    "introspection": (
        "introspection",
        "reaching interpreter internals is not allowed",
        "refer to objects directly by name",
    ),
    "permission": (
        "permission",
        "changing file permissions, owners or user ids is not allowed",
        "write new files in the working directory instead",
    ),
    "exit": (
        "exit",
        "terminating the interpreter abruptly is not allowed",
        "let the code finish, or raise an exception to report a failure",
    ),
    "environment": (
        "environment",
        "changing the process environment is not allowed",
        "pass values as ordinary Python variables",
    ),
    "deserialization": (
        "deserialization",
        "loading pickled objects can run arbitrary code and is not allowed",
        "read data with pd.read_csv / pd.read_parquet / json instead",
    ),
}

_NAME_CATEGORY: dict[str, str] = {
    "eval": "dynamic_code", "exec": "dynamic_code", "compile": "dynamic_code", "__import__": "dynamic_code",
    "importlib": "dynamic_code", "runpy": "dynamic_code", "code": "dynamic_code", "codeop": "dynamic_code",
    "imp": "dynamic_code", "zipimport": "dynamic_code", "breakpoint": "dynamic_code",
    "operator.attrgetter": "dynamic_code", "operator.methodcaller": "dynamic_code",
    "globals": "introspection", "vars": "introspection", "__builtins__": "introspection",
    "__loader__": "introspection", "__spec__": "introspection", "sys": "introspection",
    "inspect": "introspection", "gc": "introspection",
    "subprocess": "process", "_posixsubprocess": "process", "multiprocessing": "process", "pty": "process",
    "posix": "process", "nt": "process", "_winapi": "process", "pexpect": "process", "sh": "process",
    "plumbum": "process", "concurrent": "process", "asyncio.subprocess": "process",
    "asyncio.create_subprocess_exec": "process", "asyncio.create_subprocess_shell": "process",
    "pandas.read_clipboard": "process", "pandas.io.clipboard": "process",
    "signal": "process_control", "_signal": "process_control", "resource": "process_control",
    "termios": "process_control", "tty": "process_control", "os.kill": "process_control",
    "os.killpg": "process_control", "os.pidfd_open": "process_control", "os.setsid": "process_control",
    "os.setpgid": "process_control", "os.setpgrp": "process_control",
    "ctypes": "native", "_ctypes": "native", "cffi": "native", "_cffi_backend": "native",
    "os._exit": "exit", "os.abort": "exit",
    "os.putenv": "environment", "os.unsetenv": "environment",
    "pickle": "deserialization", "_pickle": "deserialization", "marshal": "deserialization",
    "pickletools": "deserialization", "shelve": "deserialization", "dill": "deserialization",
    "joblib": "deserialization", "cloudpickle": "deserialization", "pandas.read_pickle": "deserialization",
}  # fmt: skip
_NETWORK_ROOTS = frozenset(
    {"socket", "_socket", "ssl", "_ssl", "socketserver", "select", "selectors", "urllib", "urllib3", "http",
     "requests", "httpx", "aiohttp", "websocket", "websockets", "ftplib", "smtplib", "poplib", "imaplib",
     "nntplib", "telnetlib", "xmlrpc", "webbrowser", "paramiko", "pycurl", "asyncio.open_connection",
     "asyncio.start_server", "asyncio.open_unix_connection", "asyncio.start_unix_server"}
)  # fmt: skip


def _category(dotted: str) -> tuple[str, str, str] | None:
    """The (rule, why, instead) for a blocked dotted name: longest matching prefix wins."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        prefix = ".".join(parts[:i])
        if prefix in _NAME_CATEGORY:
            return _CATEGORIES[_NAME_CATEGORY[prefix]]
        if prefix in _NETWORK_ROOTS:
            return _CATEGORIES["network"]
    if dotted.startswith("os.") and any(k in dotted for k in ("exec", "spawn", "fork", "popen", "system")):
        return _CATEGORIES["process"]
    if dotted.startswith(("os.ch", "os.fch", "os.lch", "os.set", "shutil.chown")) or dotted == "os.umask":
        return _CATEGORIES["permission"]
    return None


def _blocked_message(kind: str, dotted: str) -> tuple[str, str]:
    """Rule and message for a blocked module import or name reference."""
    cat = _category(dotted)
    if cat is None:
        return "blocked_name", (
            f"{kind} '{dotted}' is blocked by the sandbox policy; "
            "solve the task with data-analysis libraries (pandas, numpy, scipy) instead"
        )
    rule, why, instead = cat
    return rule, f"{kind} '{dotted}' is not allowed: {why}; {instead}"


# --- static evaluation helpers --------------------------------------------------------------------------


def _matches_prefix(dotted: str, names: Iterable[str]) -> str | None:
    """The entry of ``names`` equal to ``dotted`` or one of its dotted prefixes (module semantics)."""
    parts = dotted.split(".")
    for i in range(1, len(parts) + 1):
        prefix = ".".join(parts[:i])
        if prefix in names:
            return prefix
    return None


def _const_str(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str):
            return node.value
        if isinstance(node.value, bytes):
            return node.value.decode("utf-8", "replace")
    return None


_MAX_ALIAS_PASSES = 32


class _TooComplex(Exception):
    """The code is beyond what the checker analyses completely (refused, not waved through)."""


@dataclass
class _StaticPath:
    """A path known (fully, or only its leading part) at check time."""

    text: str
    complete: bool = True


@dataclass
class _Scope:
    """Names the whole module binds: import aliases and plain re-bindings, path literals, other names."""

    aliases: dict[str, set[tuple[str, bool]]] = field(default_factory=dict)
    paths: dict[str, list[_StaticPath]] = field(default_factory=dict)
    bound: set[str] = field(default_factory=set)


class _Checker(ast.NodeVisitor):
    """Collects :class:`PolicyViolation` objects for one module. See the module docstring for the rules."""

    def __init__(self, config: PolicyConfig, workspace: str | None) -> None:
        self.config = config
        self.workspace = posixpath.normpath(workspace) if workspace else None
        self.scope = _Scope()
        self.violations: list[PolicyViolation] = []
        self._seen: set[tuple[str, int | None, str]] = set()
        self._callees: set[int] = set()  # id() of nodes in call position (``f`` in ``f(x)``)

    # -- bookkeeping ------------------------------------------------------------------------------------

    def add(self, rule: str, message: str, node: ast.AST | None, key: str) -> None:
        line = getattr(node, "lineno", None)
        if (rule, line, key) in self._seen:
            return
        self._seen.add((rule, line, key))
        self.violations.append(PolicyViolation(rule=rule, message=message, line=line))

    # -- pre-pass: aliases and bindings -------------------------------------------------------------------

    def collect(self, tree: ast.AST) -> None:
        """Record every import alias and every simple re-binding anywhere in the module.

        Scopes are deliberately merged: an alias made inside a function still counts everywhere, which
        can only make the check stricter.
        """
        aliases = self.scope.aliases
        assigns: list[tuple[str, ast.expr]] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        aliases.setdefault(a.asname, set()).add((a.name, True))
                    else:
                        root = a.name.split(".")[0]
                        aliases.setdefault(root, set()).add((root, True))
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    if a.name != "*":
                        aliases.setdefault(a.asname or a.name, set()).add((f"{node.module}.{a.name}", True))
            elif isinstance(node, ast.Assign | ast.AnnAssign | ast.NamedExpr):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                value = node.value
                if value is None:
                    continue
                for t in targets:
                    if isinstance(t, ast.Name):
                        assigns.append((t.id, value))
                    self._bind_target(t)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                self.scope.bound.add(node.name)
            elif isinstance(node, ast.arg):
                self.scope.bound.add(node.arg)
            elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension | ast.AugAssign):
                self._bind_target(node.target)
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                self._bind_target(node.optional_vars)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                self.scope.bound.add(node.name)
        # Re-bindings of resolvable names (``o = os``; ``s = o``) propagate to a fixed point. Each pass
        # follows chains written in source order completely; only chains written backwards need more
        # passes. Code that still changes after _MAX_ALIAS_PASSES is refused rather than half-checked
        # (and cannot make the harness spend quadratic time).
        for _ in range(_MAX_ALIAS_PASSES):
            changed = False
            for name, value in assigns:
                for rooted in self.resolve_rooted(value):
                    if rooted not in aliases.setdefault(name, set()):
                        aliases[name].add(rooted)
                        changed = True
            if not changed:
                break
        else:
            raise _TooComplex
        for name, value in assigns:
            p = self.static_path(value)
            if p is not None:
                self.scope.paths.setdefault(name, []).append(p)

    def _bind_target(self, target: ast.AST) -> None:
        for n in ast.walk(target):
            if isinstance(n, ast.Name):
                self.scope.bound.add(n.id)

    # -- name resolution ----------------------------------------------------------------------------------

    def resolve(self, node: ast.AST) -> set[str]:
        """The dotted names ``node`` may stand for (empty when unknown)."""
        return {d for d, _ in self.resolve_rooted(node)}

    def resolve_rooted(self, node: ast.AST) -> set[tuple[str, bool]]:
        """Like :meth:`resolve`, with a flag: is the root imported or re-bound *in this code*?

        A name this code does not bind is taken to be a builtin or a module imported by an earlier cell
        (``os`` in ``os.system``), but only for matching :attr:`PolicyConfig.blocked_calls`: a module of
        that name cannot have been imported earlier (the import would have been refused), so an unbound
        ``signal`` or ``requests`` in a later cell is a variable, not the module.
        """
        if isinstance(node, ast.Name):
            if node.id in self.scope.aliases:
                return set(self.scope.aliases[node.id])
            if node.id in self.scope.bound:
                return set()
            return {(node.id, False)}
        if isinstance(node, ast.Attribute):
            return {(f"{d}.{node.attr}", e) for d, e in self.resolve_rooted(node.value)}
        if isinstance(node, ast.NamedExpr):
            return self.resolve_rooted(node.value)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) >= 2
            and (lit := _const_str(node.args[1])) is not None
        ):
            return {(f"{d}.{lit}", e) for d, e in self.resolve_rooted(node.args[0])}
        return set()

    @staticmethod
    def _normalize(dotted: str) -> str:
        for prefix in ("builtins.", "__builtins__."):
            if dotted.startswith(prefix):
                return dotted[len(prefix) :]
        if dotted.startswith("pd."):
            return "pandas." + dotted[3:]
        if dotted.startswith("np."):
            return "numpy." + dotted[3:]
        return dotted

    def check_dotted(self, dotted: str, node: ast.AST, kind: str = "use of", explicit: bool = True) -> bool:
        """Report ``dotted`` when it is a blocked name or (``explicit`` roots only) inside a blocked module.

        True when reported.
        """
        dotted = self._normalize(dotted)
        cfg = self.config
        if dotted in cfg.allowed_names:
            return False
        hit = _matches_prefix(dotted, cfg.blocked_calls)
        if hit is None and explicit:
            hit = _matches_prefix(dotted, cfg.blocked_modules)
        if hit is None:
            return False
        rule, message = _blocked_message(kind, hit)
        self.add(rule, message, node, hit)
        return True

    # -- static paths ------------------------------------------------------------------------------------

    def static_path(self, node: ast.AST | None) -> _StaticPath | None:
        """Evaluate a path expression made of literals, ``Path(...)``, ``/``, ``os.path.join``, names."""
        if node is None:
            return None
        s = _const_str(node)
        if s is not None:
            return _StaticPath(s)
        if isinstance(node, ast.JoinedStr):
            head = ""
            for v in node.values:
                lit = _const_str(v)
                if lit is None:
                    return _StaticPath(head, complete=False) if head else None
                head += lit
            return _StaticPath(head)
        if isinstance(node, ast.Name):
            found = self.scope.paths.get(node.id)
            return found[0] if found and len(found) == 1 else None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            left = self.static_path(node.left)
            if left is None or not left.complete:
                return left
            right = self.static_path(node.right)
            if right is None:
                return _StaticPath(left.text.rstrip("/") + "/", complete=False)
            return _StaticPath(posixpath.join(left.text, right.text), right.complete)
        if isinstance(node, ast.Call):
            names = {self._normalize(d) for d in self.resolve(node.func)}
            if names & (_PATH_CONSTRUCTORS | {"os.path.join", "posixpath.join"}) and node.args:
                parts = [self.static_path(a) for a in node.args]
                first = parts[0]
                if first is None:
                    return None
                text = first.text
                for p in parts[1:]:
                    if p is None or not first.complete:
                        return _StaticPath(text.rstrip("/") + "/", complete=False)
                    text = posixpath.join(text, p.text)
                    first = p
                return _StaticPath(text, first.complete)
            if names & {"os.path.expanduser", "os.path.abspath", "os.path.normpath", "str", "os.fspath"}:
                return self.static_path(node.args[0]) if node.args else None
            if names & {"pathlib.Path.home", "Path.home", "os.path.expanduser"}:
                return _StaticPath("~")
            if isinstance(node.func, ast.Attribute) and node.func.attr in {
                "resolve",
                "absolute",
                "expanduser",
            }:
                return self.static_path(node.func.value)
        return None

    def outside(self, p: _StaticPath) -> bool:
        """Whether a static path leaves the working directory (and the allowed roots)."""
        text = p.text
        if not text:
            return False
        if text.startswith("~"):
            return True
        if text.startswith("/"):
            norm = posixpath.normpath(text) if p.complete else text
            roots = list(self.config.allowed_write_roots)
            if self.workspace:
                roots.append(self.workspace)
            for root in roots:
                root = posixpath.normpath(root)
                if norm == root or norm.startswith(root.rstrip("/") + "/"):
                    return False
            return True
        norm = posixpath.normpath(text)
        return norm == ".." or norm.startswith("../")

    def check_path(self, node: ast.AST | None, call: ast.Call, action: str, rule: str) -> None:
        if not self.config.check_paths:
            return
        p = self.static_path(node)
        if p is None or not self.outside(p):
            return
        shown = p.text + ("..." if not p.complete else "")
        self.add(
            rule,
            f"{action} '{shown}' is outside the working directory; "
            "use a relative path inside the working directory (e.g. 'out.csv') instead",
            call,
            shown,
        )

    # -- visitors ----------------------------------------------------------------------------------------

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.check_dotted(a.name, node, "import of")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            return  # relative imports cannot reach the standard library
        if self.check_dotted(node.module, node, "import of"):
            return
        for a in node.names:
            if a.name == "*":
                hidden = [n for n in self.config.blocked_calls if n.startswith(node.module + ".")]
                if hidden:
                    self.add(
                        "star_import",
                        f"'from {node.module} import *' would hide blocked names such as "
                        f"'{sorted(hidden)[0]}'; import the names you need explicitly",
                        node,
                        node.module,
                    )
                continue
            self.check_dotted(f"{node.module}.{a.name}", node, "import of")

    def visit_Name(self, node: ast.Name) -> None:
        if not isinstance(node.ctx, ast.Load):
            return
        rooted = sorted(self.resolve_rooted(node))
        for dotted, explicit in rooted:
            self.check_dotted(dotted, node, explicit=explicit)
        dynamic = {"getattr", "setattr", "delattr"} & {self._normalize(d) for d, _ in rooted}
        if dynamic and id(node) not in self._callees and not self.config.allow_dynamic_getattr:
            # ``functools.reduce(getattr, ["system"], os)`` hides the attribute name from the call check
            fn = sorted(dynamic)[0]
            self.add(
                "dynamic_attribute",
                f"passing {fn} around as a value is not allowed (it hides which attribute is reached); "
                "call it directly with a literal attribute name instead",
                node,
                fn,
            )

    def visit_Attribute(self, node: ast.Attribute) -> None:
        cfg = self.config
        if node.attr in cfg.blocked_attributes:
            _, why, instead = _CATEGORIES["introspection"]
            self.add(
                "introspection", f"attribute '.{node.attr}' is not allowed: {why}; {instead}", node, node.attr
            )
        else:
            rooted = self.resolve_rooted(node)
            resolved = {d for d, _ in rooted}
            reported = any([self.check_dotted(d, node, explicit=e) for d, e in sorted(rooted)])
            allowed = any(self._normalize(d) in cfg.allowed_names for d in resolved)
            if not reported and not allowed and node.attr in cfg.suspicious_attributes:
                self.add(
                    "suspicious_attribute",
                    f"attribute '.{node.attr}' is not allowed (process control, permissions or native code); "
                    f"if it is a DataFrame column, write df[{node.attr!r}] instead",
                    node,
                    node.attr,
                )
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        self._callees.add(id(node.func))
        names = {self._normalize(d) for d in self.resolve(node.func)}
        attr = node.func.attr if isinstance(node.func, ast.Attribute) else None
        self._check_dynamic_attribute(node, names)
        if self.config.check_paths:
            self._check_file_effects(node, names, attr)
        if self.config.block_network_urls:
            self._check_urls(node, names, attr)
        if attr in {"format", "format_map"} and (fmt := _const_str(node.func.value)) is not None:
            for bad in self.config.blocked_attributes:
                if bad in fmt:
                    self.add(
                        "introspection",
                        f"format string reaches '{bad}': reaching interpreter internals is not allowed; "
                        "format the values you need directly",
                        node,
                        bad,
                    )
        self.generic_visit(node)

    def _check_dynamic_attribute(self, node: ast.Call, names: set[str]) -> None:
        if not names & {"getattr", "setattr", "delattr", "hasattr"} or len(node.args) < 2:
            return
        fn = next(iter(names & {"getattr", "setattr", "delattr", "hasattr"}))
        lit = _const_str(node.args[1])
        if lit is None:
            if not self.config.allow_dynamic_getattr and fn != "hasattr":
                self.add(
                    "dynamic_attribute",
                    f"{fn}() with a computed attribute name is not allowed; "
                    "use a literal attribute (obj.name) or a dict that maps names to values",
                    node,
                    fn,
                )
            return
        if lit in self.config.blocked_attributes:
            self.add(
                "introspection",
                f"{fn}(..., {lit!r}) is not allowed: reaching interpreter internals is not allowed; "
                "refer to objects directly by name",
                node,
                lit,
            )
        elif fn == "getattr":
            rooted = {(f"{d}.{lit}", e) for d, e in self.resolve_rooted(node.args[0])}
            reported = any([self.check_dotted(d, node, explicit=e) for d, e in sorted(rooted)])
            if not reported and lit in self.config.suspicious_attributes:
                self.add(
                    "suspicious_attribute",
                    f"getattr(..., {lit!r}) is not allowed (process control, permissions or native code)",
                    node,
                    lit,
                )

    def _check_file_effects(self, node: ast.Call, names: set[str], attr: str | None) -> None:
        cfg = self.config
        kwargs = {k.arg: k.value for k in node.keywords if k.arg}
        # open(path, mode) and friends
        if names & _OPEN_FUNCTIONS or (attr == "open" and self.static_path(node.func.value) is not None):  # type: ignore[union-attr]
            is_method = not names & _OPEN_FUNCTIONS
            args = node.args
            path_node = node.func.value if is_method else (args[0] if args else kwargs.get("file"))  # type: ignore[union-attr]
            mode_node = (args[0] if is_method else args[1] if len(args) > 1 else None) if args else None
            mode_node = mode_node if mode_node is not None else kwargs.get("mode")
            mode = _const_str(mode_node) if mode_node is not None else "r"
            if mode is None or any(c in mode for c in "wax+"):
                self.check_path(path_node, node, "writing", "write_outside_workspace")
            return
        if "os.open" in names and node.args:
            flags = node.args[1] if len(node.args) > 1 else kwargs.get("flags")
            flag_names = {n.attr for n in ast.walk(flags) if isinstance(n, ast.Attribute)} if flags else set()
            flag_names |= {n.id for n in ast.walk(flags) if isinstance(n, ast.Name)} if flags else set()
            if flags is None or flag_names & _OS_WRITE_FLAGS or not flag_names:
                self.check_path(node.args[0], node, "writing", "write_outside_workspace")
            return
        deletes = {n for n in names if n in cfg.delete_calls}
        if deletes:
            dotted = sorted(deletes)[0]
            positions = [1] if dotted in _COPY_CALLS else range(len(node.args))
            for i in positions:
                if i < len(node.args):
                    self.check_path(node.args[i], node, f"{dotted}() on", "delete_outside_workspace")
            for k in ("dst", "path", "src"):
                if k in kwargs and not (k == "src" and dotted in _COPY_CALLS):
                    self.check_path(kwargs[k], node, f"{dotted}() on", "delete_outside_workspace")
            return
        if names & {"os.chdir"} and node.args:
            self.check_path(node.args[0], node, "changing directory to", "leave_workspace")
            return
        if attr is None:
            return
        receiver = node.func.value  # type: ignore[union-attr]
        if attr in _PATH_MUTATORS and self.static_path(receiver) is not None:
            rule = (
                "write_outside_workspace"
                if attr.startswith(("write", "touch", "mkdir"))
                else "delete_outside_workspace"
            )
            self.check_path(receiver, node, f".{attr}() on", rule)
            if attr in {"rename", "replace", "symlink_to", "hardlink_to"} and node.args:
                self.check_path(node.args[0], node, f".{attr}() to", rule)
            return
        if attr in cfg.write_methods:
            target = (
                node.args[0] if node.args else next((kwargs[k] for k in _PATH_KEYWORDS if k in kwargs), None)
            )
            self.check_path(target, node, "writing", "write_outside_workspace")

    def _check_urls(self, node: ast.Call, names: set[str], attr: str | None) -> None:
        last = attr or next((n.rsplit(".", 1)[-1] for n in names), None)
        if last is None or not (last.startswith(_READER_PREFIXES) or last in _READER_NAMES):
            return
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            text = _const_str(arg)
            if text is None and isinstance(arg, ast.JoinedStr) and arg.values:
                text = _const_str(arg.values[0])
            if text and text.lower().lstrip().startswith(self.config.url_schemes):
                _, why, instead = _CATEGORIES["network"]
                self.add(
                    "network",
                    f"reading from the URL '{text[:80]}' is not possible: {why}; {instead}",
                    node,
                    text,
                )


def check_code(
    code: str, config: PolicyConfig = PolicyConfig(), *, workspace: str | None = None
) -> list[PolicyViolation]:
    """Check agent code against the policy; return the violations (empty when the code may run).

    ``workspace`` is the absolute path of the working directory, if known: absolute paths inside it may
    be written. Unparsable code returns ``[]`` (a syntax error is the model's bug, reported by Python
    itself, not a policy matter). Code too deeply nested for the checker is refused rather than let
    through unchecked.
    """
    if not config.enabled:
        return []
    try:
        tree = ast.parse(code, mode="exec")
    except (SyntaxError, ValueError, OverflowError):
        return []
    except (RecursionError, MemoryError):
        return [_too_deep()]
    checker = _Checker(config, workspace)
    try:
        checker.collect(tree)
        checker.visit(tree)
    except (RecursionError, _TooComplex):
        return [_too_deep()]
    return sorted(checker.violations, key=lambda v: v.line if v.line is not None else 0)


def _too_deep() -> PolicyViolation:
    return PolicyViolation(
        rule="too_complex",
        message="the code is nested too deeply (or re-binds names too many times) to be checked; "
        "split it into simpler statements",
        line=None,
    )


def format_violations(violations: Sequence[PolicyViolation]) -> str:
    """The observation shown to the model when code is refused: one line per violation, nothing ran."""
    if not violations:
        return ""
    lines = ["PolicyError: the sandbox refused to run this code (nothing was executed):"]
    lines += [f"  - {v}" for v in violations]
    lines.append("Rewrite the code without these constructs and run it again.")
    return "\n".join(lines)
