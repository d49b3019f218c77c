"""A tiny KramaBench repository in the official layout (``workload/<domain>.json``,
``data/<domain>/input/``): a ``legal`` domain with numeric_exact (and a list_exact subtask),
numeric_approximate and string_approximate (judge-only) questions, and a ``wildfire`` list_exact one.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["LEGAL", "WILDFIRE", "make_kramabench"]

LEGAL = [
    {
        "id": "legal-easy-1",
        "query": "How many fraud reports were filed in 2024?",
        "answer": 1135291,
        "answer_type": "numeric_exact",
        "data_sources": ["csn-data-book-2024-csv/CSVs/2024_CSN_Report_Count.csv"],
        "subtasks": [
            {
                "id": "legal-easy-1-1",
                "query": "Which file holds the report counts?",
                "answer": ["2024_CSN_Report_Count.csv"],
                "answer_type": "list_exact",
                "data_sources": "./",
            }
        ],
    },
    {
        "id": "legal-hard-2",
        "query": "What is the ratio of reports in 2024 to 2001?",
        "answer": 13.16279420289855,
        "answer_type": "numeric_approximate",
        "data_sources": ["csn-data-book-2024-csv/CSVs/2024_CSN_Report_Count.csv"],
    },
    {
        "id": "legal-hard-3",
        "query": "Describe the trend of identity theft reports.",
        "answer": "the reports rose every year",
        "answer_type": "string_approximate",
        "data_sources": ["csn-data-book-2024-csv/CSVs/2024_CSN_Report_Count.csv"],
    },
]
WILDFIRE = [
    {
        "id": "wildfire-easy-1",
        "query": "Which states had more than 100 fires?",
        "answer": ["CA", "OR"],
        "answer_type": "list_exact",
        "accepted_answers": [["CA", "OR", "WA"]],
        "data_sources": ["nifc_wildfires.csv"],
    }
]


def make_kramabench(tmp_path: Path) -> Path:
    """Write ``tmp_path/Kramabench`` and return it."""
    root = tmp_path / "Kramabench"
    (root / "workload").mkdir(parents=True)
    (root / "workload" / "legal.json").write_text(json.dumps(LEGAL), encoding="utf-8")
    (root / "workload" / "wildfire.json").write_text(json.dumps(WILDFIRE), encoding="utf-8")
    csvs = root / "data" / "legal" / "input" / "csn-data-book-2024-csv" / "CSVs"
    csvs.mkdir(parents=True)
    (csvs / "2024_CSN_Report_Count.csv").write_text("year,reports\n2001,86250\n2024,1135291\n")
    fire = root / "data" / "wildfire" / "input"
    fire.mkdir(parents=True)
    (fire / "nifc_wildfires.csv").write_text("state,fires\nCA,300\nOR,120\n")
    return root
