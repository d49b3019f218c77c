"""Write the small example data that the README, the docs, the demo and the tests use.

Run ``python examples/make_examples.py`` to regenerate ``examples/data/`` of a checkout; the code lives in
the package (``datadojo.demo.make_examples``) so that ``datadojo demo`` installed from a wheel, with no
checkout, generates the same files into its output folder. Everything is generated from a
fixed seed, so the output is the same on every machine (the files are also committed, so a fresh clone
has them without running this).

What it writes:

* ``data/sales.csv`` — 240 rows of orders (date, region, product, units, unit price, discount, returned).
* ``data/budget.xlsx`` — a workbook with two sheets: ``Summary`` (a merged two-row header, formulas with
  cached values) and ``Lines`` (plain rows).
* ``data/shop.sqlite`` — customers, products, orders and order_items with primary and foreign keys.
* ``data/station_survey/`` — a small nested "scientific dataset" folder: README, a datapackage.json, a
  CSV of measurements per site, a JSON site list and a FASTA file of sequences.
* ``scidata_tasks.jsonl`` (beside this script, not in ``data/``, so corpus scans of ``data/`` see only
  data) — SciDataSailor-Bench tasks over ``data/station_survey/`` (three QA tasks and one Meta task, in
  the task format of ``datadojo eval scidata``); the reference answers are computed from the files on
  disk, so they stay right when the folder is regenerated. Try it with
  ``datadojo eval scidata --data examples/scidata_tasks.jsonl --model SPEC --judge SPEC --out runs/sd``.
"""

from __future__ import annotations

import csv
import json
import random
import sqlite3
from datetime import date, timedelta
from pathlib import Path

#: The fixed seed: the files are the same on every machine.
SEED = 20240601

REGIONS = ["North", "South", "East", "West"]
PRODUCTS = [("Widget", 4.5), ("Gadget", 12.0), ("Doohickey", 7.25), ("Sprocket", 2.1), ("Gizmo", 19.99)]


def write_sales_csv(rng: random.Random, path: Path) -> None:
    start = date(2024, 1, 1)
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["order_id", "date", "region", "product", "units", "unit_price", "discount", "returned"])
        for i in range(240):
            product, price = rng.choice(PRODUCTS)
            d = start + timedelta(days=rng.randrange(0, 366))
            units = rng.randint(1, 40)
            discount = rng.choice([0.0, 0.0, 0.05, 0.1, 0.15])
            returned = "yes" if rng.random() < 0.07 else "no"
            w.writerow(
                [1000 + i, d.isoformat(), rng.choice(REGIONS), product, units, price, discount, returned]
            )


def write_budget_xlsx(rng: random.Random, path: Path) -> None:
    from openpyxl import Workbook

    wb = Workbook()
    ws = wb.active
    ws.title = "Summary"
    # Two-row header: "Budget" spans B1:C1, "Actual" spans D1:E1.
    ws["A1"] = "Department"
    ws.merge_cells("A1:A2")
    ws["B1"] = "Budget"
    ws.merge_cells("B1:C1")
    ws["D1"] = "Actual"
    ws.merge_cells("D1:E1")
    ws["B2"], ws["C2"], ws["D2"], ws["E2"] = "H1", "H2", "H1", "H2"
    ws["F1"] = "Variance"
    ws.merge_cells("F1:F2")
    departments = ["Research", "Sales", "Support", "Operations", "Legal", "Marketing"]
    for r, dept in enumerate(departments, start=3):
        b1, b2 = rng.randint(50, 200) * 1000, rng.randint(50, 200) * 1000
        a1, a2 = int(b1 * rng.uniform(0.8, 1.2)), int(b2 * rng.uniform(0.8, 1.2))
        ws.cell(r, 1, dept)
        ws.cell(r, 2, b1)
        ws.cell(r, 3, b2)
        ws.cell(r, 4, a1)
        ws.cell(r, 5, a2)
        ws.cell(r, 6, f"=D{r}+E{r}-B{r}-C{r}")
    lines = wb.create_sheet("Lines")
    lines.append(["line_id", "department", "category", "amount", "approved"])
    cats = ["travel", "equipment", "software", "training", "catering"]
    for i in range(60):
        lines.append(
            [
                i + 1,
                rng.choice(departments),
                rng.choice(cats),
                round(rng.uniform(100, 9000), 2),
                rng.random() < 0.8,
            ]
        )
    wb.save(path)
    _cache_formula_values(path, departments_rows=range(3, 3 + len(departments)))


def _cache_formula_values(path: Path, departments_rows: range) -> None:
    """openpyxl writes formulas without cached values; compute and store them like Excel would.

    Readers that open workbooks with ``data_only=True`` see the cached value, as they would for a file
    saved by Excel or LibreOffice.
    """
    import re
    import shutil
    import tempfile
    import zipfile

    from openpyxl import load_workbook

    wb = load_workbook(path)
    ws = wb["Summary"]
    values = {
        r: ws.cell(r, 4).value + ws.cell(r, 5).value - ws.cell(r, 2).value - ws.cell(r, 3).value
        for r in departments_rows
    }
    tmp = Path(tempfile.mkdtemp()) / "out.xlsx"
    with zipfile.ZipFile(path) as zin, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename == "xl/worksheets/sheet1.xml":
                text = data.decode()
                for r, v in values.items():
                    text = re.sub(
                        rf'(<c r="F{r}"[^>]*>)<f>([^<]*)</f><v\s*/>', rf"\1<f>\2</f><v>{v}</v>", text
                    )
                    text = re.sub(
                        rf'(<c r="F{r}"[^>]*>)<f>([^<]*)</f>(?!<v>)', rf"\1<f>\2</f><v>{v}</v>", text
                    )
                data = text.encode()
            zout.writestr(item, data)
    shutil.move(tmp, path)


def write_shop_sqlite(rng: random.Random, path: Path) -> None:
    if path.exists():
        path.unlink()
    con = sqlite3.connect(path)
    con.executescript(
        """
        PRAGMA foreign_keys = ON;
        CREATE TABLE customers (
            customer_id INTEGER PRIMARY KEY,
            name TEXT NOT NULL,
            city TEXT NOT NULL,
            segment TEXT NOT NULL,
            joined DATE NOT NULL
        );
        CREATE TABLE products (
            product_id INTEGER PRIMARY KEY,
            name TEXT NOT NULL,
            category TEXT NOT NULL,
            price REAL NOT NULL
        );
        CREATE TABLE orders (
            order_id INTEGER PRIMARY KEY,
            customer_id INTEGER NOT NULL REFERENCES customers(customer_id),
            order_date DATE NOT NULL,
            status TEXT NOT NULL
        );
        CREATE TABLE order_items (
            order_id INTEGER NOT NULL REFERENCES orders(order_id),
            product_id INTEGER NOT NULL REFERENCES products(product_id),
            quantity INTEGER NOT NULL,
            PRIMARY KEY (order_id, product_id)
        );
        """
    )
    cities = ["Lyon", "Porto", "Graz", "Turku", "Ghent", "Split", "Brno", "Cork"]
    segments = ["consumer", "business", "education"]
    first = ["Ana", "Ben", "Chloe", "Dev", "Eva", "Finn", "Gia", "Hugo", "Ines", "Jon", "Kim", "Luca"]
    last = ["Moreau", "Silva", "Huber", "Virtanen", "Peeters", "Horvat", "Novak", "Murphy"]
    for cid in range(1, 61):
        joined = date(2021, 1, 1) + timedelta(days=rng.randrange(0, 1000))
        con.execute(
            "INSERT INTO customers VALUES (?,?,?,?,?)",
            (
                cid,
                f"{rng.choice(first)} {rng.choice(last)}",
                rng.choice(cities),
                rng.choice(segments),
                joined.isoformat(),
            ),
        )
    categories = {
        "Widget": "hardware",
        "Gadget": "hardware",
        "Doohickey": "accessories",
        "Sprocket": "parts",
        "Gizmo": "electronics",
        "Thingamajig": "accessories",
        "Whatsit": "parts",
        "Contraption": "electronics",
    }
    for pid, (name, cat) in enumerate(categories.items(), start=1):
        con.execute("INSERT INTO products VALUES (?,?,?,?)", (pid, name, cat, round(rng.uniform(2, 60), 2)))
    statuses = ["shipped", "shipped", "shipped", "delivered", "cancelled", "pending"]
    for oid in range(1, 201):
        d = date(2023, 1, 1) + timedelta(days=rng.randrange(0, 540))
        con.execute(
            "INSERT INTO orders VALUES (?,?,?,?)",
            (oid, rng.randint(1, 60), d.isoformat(), rng.choice(statuses)),
        )
        for pid in rng.sample(range(1, len(categories) + 1), rng.randint(1, 4)):
            con.execute("INSERT INTO order_items VALUES (?,?,?)", (oid, pid, rng.randint(1, 12)))
    con.commit()
    con.close()


def write_station_survey(rng: random.Random, root: Path) -> None:
    (root / "raw").mkdir(parents=True, exist_ok=True)
    (root / "meta").mkdir(parents=True, exist_ok=True)
    sites = [
        {
            "site": f"S{i:02d}",
            "lat": round(rng.uniform(40, 60), 4),
            "lon": round(rng.uniform(-5, 25), 4),
            "habitat": rng.choice(["wetland", "forest", "meadow"]),
        }
        for i in range(1, 9)
    ]
    (root / "meta" / "sites.json").write_text(json.dumps(sites, indent=2) + "\n", encoding="utf-8")
    with (root / "raw" / "measurements.csv").open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["site", "date", "temperature_c", "ph", "nitrate_mg_l", "species_count"])
        for s in sites:
            for k in range(12):
                d = date(2023, 1 + k, 15)
                w.writerow(
                    [
                        s["site"],
                        d.isoformat(),
                        round(rng.gauss(12 + k % 6, 3), 2),
                        round(rng.uniform(5.5, 8.2), 2),
                        round(abs(rng.gauss(2.5, 1.2)), 2),
                        rng.randint(3, 40),
                    ]
                )
    bases = "ACGT"
    with (root / "raw" / "barcodes.fasta").open("w", encoding="ascii") as fh:
        for s in sites:
            seq = "".join(rng.choice(bases) for _ in range(120))
            fh.write(f">{s['site']}_COI sample barcode\n{seq[:60]}\n{seq[60:]}\n")
    (root / "README.md").write_text(
        "# Station survey (synthetic)\n\n"
        "Monthly water measurements at eight sampling sites in 2023, with site metadata and one COI\n"
        "barcode sequence per site. Generated by DataDojo's `examples/make_examples.py`.\n\n"
        "- `raw/measurements.csv`: site, date, temperature_c, ph, nitrate_mg_l, species_count\n"
        "- `meta/sites.json`: site id, latitude, longitude, habitat\n"
        "- `raw/barcodes.fasta`: one sequence per site\n",
        encoding="utf-8",
    )
    (root / "datapackage.json").write_text(
        json.dumps(
            {
                "name": "station-survey",
                "title": "Station survey (synthetic)",
                "licenses": [{"name": "CC0-1.0"}],
                "resources": [
                    {"name": "measurements", "path": "raw/measurements.csv", "format": "csv"},
                    {"name": "sites", "path": "meta/sites.json", "format": "json"},
                ],
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )


def _scidata_task(tid: str, track: str, level: str, seed: str, question: str, answer: str) -> dict:
    return {
        "id": tid,
        "question": question,
        "files": [{"path": "data/station_survey", "kind": "dir"}],
        "answer": answer,
        "answer_kind": f"sailor_{track}",
        "source": "scidata",
        "category": track,
        "difficulty": level,
        "extra": {"track": track, "seed_id": seed, "intent": question},
    }


def write_scidata_tasks(folder: Path, path: Path) -> None:
    """SciDataSailor-Bench tasks over ``folder`` (station_survey), answers computed from its files."""
    with (folder / "raw" / "measurements.csv").open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    sites = json.loads((folder / "meta" / "sites.json").read_text(encoding="utf-8"))
    habitat = {s["site"]: s["habitat"] for s in sites}
    fasta = (folder / "raw" / "barcodes.fasta").read_text(encoding="ascii").split(">")[1:]
    lengths = sorted({len("".join(rec.splitlines()[1:])) for rec in fasta})
    licence = json.loads((folder / "datapackage.json").read_text(encoding="utf-8"))["licenses"][0]["name"]
    mean_ph = sum(float(r["ph"]) for r in rows) / len(rows)
    nitrate: dict[str, list[float]] = {}
    for r in rows:
        nitrate.setdefault(habitat[r["site"]], []).append(float(r["nitrate_mg_l"]))
    by_habitat = {h: sum(v) / len(v) for h, v in nitrate.items()}
    top = max(by_habitat, key=by_habitat.__getitem__)
    dates = sorted(r["date"] for r in rows)
    columns = list(rows[0])
    tasks = [
        _scidata_task(
            "station-survey-qa-ph",
            "qa",
            "L1",
            "example-L1-statistics",
            "What is the mean pH over all measurements in raw/measurements.csv? Round to two decimals.",
            f"{mean_ph:.2f}",
        ),
        _scidata_task(
            "station-survey-qa-habitat",
            "qa",
            "L2",
            "example-L2-cross-file",
            "Joining raw/measurements.csv to the site list in meta/sites.json, which habitat has the highest "
            "mean nitrate concentration (nitrate_mg_l), and what is that mean (mg/L, two decimals)?",
            f"{top}, {by_habitat[top]:.2f} mg/L",
        ),
        _scidata_task(
            "station-survey-qa-fasta",
            "qa",
            "L0",
            "example-L0-dataset-map",
            "How many sequences does raw/barcodes.fasta hold, and how many bases long is each?",
            f"{len(fasta)} sequences" + (f" of {lengths[0]} bases each" if len(lengths) == 1 else ""),
        ),
        _scidata_task(
            "station-survey-meta-map",
            "meta",
            "L0",
            "example-L0-dataset-map",
            "Map this dataset repository: its directory organization, file formats, schemas and metadata, key "
            "counts, and how the files relate.",
            f"A small synthetic field-survey dataset ({licence} licence per datapackage.json) with a README.md, a "
            f"datapackage.json listing two resources, and two folders. raw/measurements.csv is a CSV table of "
            f"{len(rows)} monthly measurements ({dates[0]} to {dates[-1]}) with columns {', '.join(columns)}, "
            f"{len(habitat)} sites x {len(rows) // len(habitat)} months. meta/sites.json is a JSON list of "
            f"{len(sites)} sites with site id, lat, lon and habitat ({', '.join(sorted(set(habitat.values())))}). "
            f"raw/barcodes.fasta is a FASTA file with {len(fasta)} COI barcode sequences, one per site. The "
            "site column links measurements to the site list and the FASTA headers (site id + '_COI').",
        ),
    ]
    path.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tasks), encoding="utf-8")


def write_examples(root: Path) -> Path:
    """Write the example data under ``root/data`` and ``root/scidata_tasks.jsonl``; return ``root/data``."""
    rng = random.Random(SEED)
    out = root / "data"
    out.mkdir(parents=True, exist_ok=True)
    write_sales_csv(rng, out / "sales.csv")
    write_budget_xlsx(rng, out / "budget.xlsx")
    write_shop_sqlite(rng, out / "shop.sqlite")
    write_station_survey(rng, out / "station_survey")
    write_scidata_tasks(out / "station_survey", root / "scidata_tasks.jsonl")
    return out
