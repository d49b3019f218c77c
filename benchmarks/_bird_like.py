"""BIRD-like SQLite databases generated on the spot (no download): held-out-sized, 60+ MB each.

BIRD's development databases are tens to hundreds of MB: a few dimension tables, one or two large fact
tables joined by foreign keys, dates, categories, measures and free-text columns. :func:`make_retail_db`
writes one such database from a seed: ``customers`` (dimension), ``products`` (dimension with long
descriptions), ``orders`` (fact, FK to customers, a comment text) and ``order_items`` (fact, FKs to orders
and products, quantities and prices). The same seed gives the same file.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

__all__ = ["make_retail_db"]

_CITIES = [f"City{i:03d}" for i in range(120)]
_SEGMENTS = ["consumer", "corporate", "home office", "small business", "government"]
_CATEGORIES = ["furniture", "office supplies", "technology", "books", "garden", "toys", "food", "apparel"]
_STATUS = ["shipped", "delivered", "returned", "cancelled", "pending"]
_CHANNELS = ["web", "store", "phone", "partner"]
_WORDS = [
    "quality",
    "fast",
    "delivery",
    "broken",
    "excellent",
    "late",
    "refund",
    "polite",
    "packaging",
    "damaged",
    "price",
    "value",
    "support",
    "recommend",
    "again",
    "never",
    "colour",
    "size",
    "fits",
    "perfect",
    "cheap",
    "sturdy",
    "fragile",
    "manual",
    "missing",
    "extra",
    "gift",
]


def _texts(rng: np.random.Generator, n: int, words: int) -> list[str]:
    idx = rng.integers(0, len(_WORDS), size=(n, words))
    vocab = np.array(_WORDS)
    return [" ".join(r) for r in vocab[idx]]


def make_retail_db(path: Path, *, seed: int = 0, scale: float = 1.0) -> Path:
    """Write the database to ``path`` (replaced if present); ``scale=1`` gives about 65 MB."""
    rng = np.random.default_rng(seed)
    n_cust, n_prod = int(42_000 * scale), int(3_200 * scale)
    n_ord, n_item = int(190_000 * scale), int(380_000 * scale)
    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    con.executescript(
        """
        CREATE TABLE customers (customer_id INTEGER PRIMARY KEY, name TEXT, city TEXT, segment TEXT,
                                signup_date TEXT, credit_limit REAL);
        CREATE TABLE products (product_id INTEGER PRIMARY KEY, category TEXT, brand TEXT, list_price REAL,
                               description TEXT);
        CREATE TABLE orders (order_id INTEGER PRIMARY KEY,
                             customer_id INTEGER REFERENCES customers(customer_id),
                             order_date TEXT, status TEXT, channel TEXT, shipping_cost REAL, comment TEXT);
        CREATE TABLE order_items (item_id INTEGER PRIMARY KEY,
                                  order_id INTEGER REFERENCES orders(order_id),
                                  product_id INTEGER REFERENCES products(product_id),
                                  quantity INTEGER, unit_price REAL, discount REAL);
        """
    )
    days = np.datetime64("2018-01-01") + rng.integers(0, 6 * 365, size=n_cust)
    con.executemany(
        "INSERT INTO customers VALUES (?,?,?,?,?,?)",
        zip(
            range(1, n_cust + 1),
            (f"Customer {i:06d}" for i in range(1, n_cust + 1)),
            rng.choice(_CITIES, n_cust).tolist(),
            rng.choice(_SEGMENTS, n_cust).tolist(),
            days.astype(str).tolist(),
            np.round(rng.lognormal(8, 0.6, n_cust), 2).tolist(),
            strict=True,
        ),
    )
    con.executemany(
        "INSERT INTO products VALUES (?,?,?,?,?)",
        zip(
            range(1, n_prod + 1),
            rng.choice(_CATEGORIES, n_prod).tolist(),
            (f"Brand{b:02d}" for b in rng.integers(0, 60, n_prod)),
            np.round(rng.lognormal(3.5, 0.8, n_prod), 2).tolist(),
            _texts(rng, n_prod, 40),
            strict=True,
        ),
    )
    odays = np.datetime64("2020-01-01") + rng.integers(0, 4 * 365, size=n_ord)
    con.executemany(
        "INSERT INTO orders VALUES (?,?,?,?,?,?,?)",
        zip(
            range(1, n_ord + 1),
            rng.integers(1, n_cust + 1, n_ord).tolist(),
            odays.astype(str).tolist(),
            rng.choice(_STATUS, n_ord, p=[0.3, 0.5, 0.08, 0.07, 0.05]).tolist(),
            rng.choice(_CHANNELS, n_ord).tolist(),
            np.round(rng.gamma(2.0, 4.0, n_ord), 2).tolist(),
            _texts(rng, n_ord, 30),
            strict=True,
        ),
    )
    con.executemany(
        "INSERT INTO order_items VALUES (?,?,?,?,?,?)",
        zip(
            range(1, n_item + 1),
            rng.integers(1, n_ord + 1, n_item).tolist(),
            rng.integers(1, n_prod + 1, n_item).tolist(),
            rng.integers(1, 8, n_item).tolist(),
            np.round(rng.lognormal(3.5, 0.8, n_item), 2).tolist(),
            rng.choice([0.0, 0.05, 0.1, 0.15, 0.2], n_item).tolist(),
            strict=True,
        ),
    )
    con.commit()
    con.close()
    return path
