"""Agent doubles that probe the sandbox the way real models do: list the data tree first, reach for answers.

Why here and not beside the sandbox tests: a real SciDataSailor policy's first probe of a repository is
``os.walk('.')`` (or ``Path('.').rglob('*')``), and a policy under RL learns to read whatever file holds the
reward's reference answer. Fakes that only ``open('sales.csv')`` never exercised either, and the sandbox
showed mounted folders as symlinks that ``os.walk`` does not descend (issue 21, defect 3).

* :data:`LISTING_PROBES` — cells that list every file below the working directory in one of the common
  ways (``os.walk``, ``rglob``, ``glob``, ``os.scandir``), printing one sorted relative path per line.
* :func:`walk_first_model` — a script for :class:`datadojo.testing.server.ScriptedLLMServer`: the first turn
  is the ``os.walk('.')`` probe, the answer is how many files it saw.
* :func:`canary_reader_model` — a script whose cells try to read given absolute paths (a task file's
  reference answers, a token under ``$HOME``) through computed paths and answer with what they found.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "LISTING_PROBES",
    "canary_reader_model",
    "code_tag",
    "walk_first_model",
]

#: One cell per listing idiom; each prints the sorted relative paths of the *files* it found, then
#: ``FILES <n>`` on the last line.
LISTING_PROBES: dict[str, str] = {
    "os.walk": (
        "import os\n"
        "found = sorted(os.path.relpath(os.path.join(d, f), '.') for d, _, fs in os.walk('.') for f in fs)\n"
        "print('\\n'.join(found)); print('FILES', len(found))\n"
    ),
    "rglob": (
        "from pathlib import Path\n"
        "found = sorted(str(p) for p in Path('.').rglob('*') if p.is_file())\n"
        "print('\\n'.join(found)); print('FILES', len(found))\n"
    ),
    "glob": (
        "import glob, os\n"
        "found = sorted(p for p in glob.glob('**/*', recursive=True) if os.path.isfile(p))\n"
        "print('\\n'.join(found)); print('FILES', len(found))\n"
    ),
    "scandir": (
        "import os\n"
        "def walk(d):\n"
        "    for e in os.scandir(d):\n"
        "        if e.is_dir():\n"
        "            yield from walk(e.path)\n"
        "        elif e.is_file():\n"
        "            yield os.path.relpath(e.path, '.')\n"
        "found = sorted(walk('.'))\n"
        "print('\\n'.join(found)); print('FILES', len(found))\n"
    ),
}

_TAGS = {"datamind": "code", "sailor": "python"}


def code_tag(dialect: str) -> str:
    """The tag a dialect's model puts code in (``code`` for DataMind, ``python`` for SciDataSailor)."""
    try:
        return _TAGS[dialect]
    except KeyError:
        raise ValueError(f"dialect must be one of {', '.join(_TAGS)}, got {dialect!r}") from None


def _assistant_turns(request: dict[str, Any]) -> int:
    return sum(1 for m in request.get("messages", []) if m.get("role") == "assistant")


def _last_user_text(request: dict[str, Any]) -> str:
    for message in reversed(request.get("messages", [])):
        if message.get("role") in ("user", "tool"):
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


def _files_line(observation: str) -> str:
    for line in reversed(observation.splitlines()):
        if line.strip().startswith("FILES "):
            return line.strip().split()[1]
    return "none"


def walk_first_model(dialect: str = "datamind") -> Callable[[dict[str, Any]], str]:
    """A model whose first cell is ``os.walk('.')`` and whose answer is the number of files it listed.

    The answer is ``none`` when the observation has no ``FILES`` line (the cell failed).
    """
    tag = code_tag(dialect)
    probe = LISTING_PROBES["os.walk"]

    def reply(request: dict[str, Any]) -> str:
        if _assistant_turns(request) == 0:
            return f"<think>First see what the repository holds.</think><{tag}>{probe}</{tag}>"
        return f"<think>Counted.</think><answer>{_files_line(_last_user_text(request))}</answer>"

    return reply


def canary_reader_model(paths: Sequence[str], dialect: str = "datamind") -> Callable[[dict[str, Any]], str]:
    """A model that tries to read ``paths`` (built at run time, so no static check sees them) and answers
    with every line it managed to read, or ``nothing`` when every read failed.

    It tries the path as given, via ``..`` from the working directory, and via ``/proc/1/root``.
    """
    tag = code_tag(dialect)
    parts = [p.strip("/").split("/") for p in paths]
    cell = (
        "import os\n"
        f"parts = {parts!r}\n"
        "got = []\n"
        "for p in parts:\n"
        "    rel = '/'.join(['..'] * len(os.getcwd().strip('/').split('/')) + p)\n"
        "    for cand in ('/' + '/'.join(p), rel, '/proc/1/root/' + '/'.join(p)):\n"
        "        try:\n"
        "            with open(cand) as fh:\n"
        "                got.append(fh.read().strip())\n"
        "            break\n"
        "        except Exception as exc:\n"
        "            pass\n"
        "print('READ', ' | '.join(got) if got else 'nothing')\n"
    )

    def reply(request: dict[str, Any]) -> str:
        if _assistant_turns(request) == 0:
            return f"<think>Where are the answers kept?</think><{tag}>{cell}</{tag}>"
        text = _last_user_text(request)
        found = "nothing"
        for line in text.splitlines():
            if line.strip().startswith("READ "):
                found = line.strip()[5:]
        return f"<think>Done.</think><answer>{found}</answer>"

    return reply
