"""A tiny DABstep folder in the official layout (``data/tasks/{dev,all}.jsonl``, ``data/context/``): two dev
questions with public answers, two test questions whose answers are withheld (``""``), one payments table.
"""

from __future__ import annotations

import json
from pathlib import Path

from datadojo.bench.dabstep import CONTEXT_FILES

__all__ = ["DEV", "PAYMENTS", "TEST", "make_dabstep"]

PAYMENTS = "psp_reference,merchant,issuing_country,eur_amount\n1,Crossfit_Hanna,NL,10.0\n2,Golfclub,NL,20.5\n3,Golfclub,BE,7.25\n"

DEV = [
    {"task_id": "5", "question": "Which issuing country has the highest number of transactions?",
     "guidelines": "Answer must be just the country code.", "level": "easy", "answer": "NL"},
    {"task_id": "6", "question": "What is the total amount in EUR?",
     "guidelines": "Answer must be just a number rounded to 2 decimals.", "level": "hard", "answer": "37.75"},
]  # fmt: skip
TEST = [
    {"task_id": 1, "question": "How many total transactions are there in the dataset?", "level": "easy",
     "answer": "", "guidelines": "Answer must be just a number."},
    {"task_id": 2, "question": "Which merchant has the most transactions?", "level": "hard", "answer": "",
     "guidelines": "Answer must be just the merchant name."},
]  # fmt: skip


def make_dabstep(root: Path) -> Path:
    """Write the folder at ``root`` and return it."""
    (root / "data" / "tasks").mkdir(parents=True)
    (root / "data" / "context").mkdir(parents=True)
    for name in CONTEXT_FILES:
        (root / "data" / "context" / name).write_text("{}\n" if name.endswith(".json") else "x\n")
    (root / "data" / "context" / "payments.csv").write_text(PAYMENTS)
    (root / "data" / "tasks" / "dev.jsonl").write_text("".join(json.dumps(r) + "\n" for r in DEV))
    (root / "data" / "tasks" / "all.jsonl").write_text("".join(json.dumps(r) + "\n" for r in TEST))
    return root
