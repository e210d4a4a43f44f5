"""Shared helpers for the benchmark scripts (data, timing, tables)."""

import os
import statistics
import time
from pathlib import Path

import numpy as np

from skdp.datasets import fetch_adult, make_preprocessor

REPO = Path(__file__).resolve().parents[1]


def data_home():
    """``SKDP_DATA`` if set, else None: the loaders' embedded copies."""
    return os.environ.get("SKDP_DATA") or None


def load_adult():
    """Adult with the papers' convention: label >50K, sex as the group (not an
    input), numeric columns standardized, categoricals one-hot encoded.

    Returns ``X_train, y_train, s_train, X_test, y_test, s_test`` (dense
    float arrays; groups as strings).
    """
    # Rows with missing values are kept, their "?" encoded as a category of its
    # own (the UCI files as published: 32,561 / 16,281 rows, 105 inputs).
    train = fetch_adult(data_home=data_home(), subset="train", as_frame=True, drop_missing=False)
    test = fetch_adult(data_home=data_home(), subset="test", as_frame=True, drop_missing=False)
    prep = make_preprocessor(train)
    X_train = np.asarray(prep.fit_transform(train.data), dtype=np.float64)
    X_test = np.asarray(prep.transform(test.data), dtype=np.float64)
    return (
        X_train, np.asarray(train.target), np.asarray(train.sensitive, dtype=str),
        X_test, np.asarray(test.target), np.asarray(test.sensitive, dtype=str),
    )


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


def median(values):
    return statistics.median(values)


def print_table(title, header, rows):
    print(f"\n{title}")
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(header)]
    line = "  ".join(str(h).ljust(w) for h, w in zip(header, widths))
    print(line)
    print("-" * len(line))
    for row in rows:
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths)))
