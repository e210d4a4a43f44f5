"""Columns of ``X`` that ``fit`` reads and the model does not use.

With metadata routing off, the groups and the unit ids can be columns of
``X`` named by a parameter (``sensitive_columns``, ``unit_column``; DP-FERMI
adds ``silo_column``): they are taken out before validation, and
prediction accepts ``X`` with or without them.
"""

from numbers import Integral

import numpy as np

from .._groups import _is_dataframe, select_columns
from ..models import is_row_store

__all__ = ["column_list", "drop_columns", "split_fit_only_columns", "split_sensitive_columns",
           "without_fit_only_columns"]


def split_sensitive_columns(X, sensitive_columns, *, name="sensitive_columns",
                            argument="sensitive_features"):
    """Take the ``sensitive_columns`` out of ``X``.

    Returns ``(X_without, sensitive)`` where ``sensitive`` is None when
    ``sensitive_columns`` is None. Columns are names of a DataFrame's columns
    or integer positions (see :func:`skdp._groups.select_columns`). ``name``
    and ``argument`` (the parameter and the fit argument that the columns
    stand for) go into error messages.
    """
    if sensitive_columns is None:
        return X, None
    if is_row_store(X):
        raise ValueError(
            f"{name} cannot take columns out of a row store ({type(X).__name__}): that would "
            f"read it whole. Keep those columns out of the store and pass {argument}= to fit."
        )
    columns = column_list(sensitive_columns)
    if _is_dataframe(X) and columns and all(isinstance(c, str) for c in columns):
        missing = [c for c in columns if c not in X.columns]
        if missing:
            raise ValueError(
                f"{name} {missing} are not columns of X: they are gone (a "
                "preprocessing step dropped them?); X has columns "
                f"{list(X.columns)[:20]}. In a Pipeline, make the preprocessing pass "
                "these columns through (e.g. ColumnTransformer(..., remainder="
                "'passthrough', verbose_feature_names_out=False).set_output("
                f"transform='pandas')), or pass {argument}= to fit."
            )
    sensitive = select_columns(X, columns, name=name)
    return drop_columns(X, columns), sensitive


def column_list(columns):
    """A column parameter (one name or position, or several) as a list."""
    if columns is None:
        return []
    return [columns] if isinstance(columns, (str, Integral)) else list(columns)


def drop_columns(X, columns):
    """``X`` without ``columns`` (names of a DataFrame, or positions)."""
    if _is_dataframe(X):
        labels = columns if isinstance(columns[0], str) else list(X.columns[columns])
        return X.drop(columns=labels)
    X = np.asarray(X) if not hasattr(X, "shape") else X
    keep = np.setdiff1d(np.arange(X.shape[1]), np.mod(columns, X.shape[1]))
    return X[:, keep]


def split_fit_only_columns(X, sensitive_columns, unit_column):
    """Take ``sensitive_columns`` and the ``unit_column`` out of ``X``.

    Both are read from ``X`` as given (so positions refer to the same
    columns whichever is taken first) and dropped together. Returns
    ``(X_without, sensitive, unit_ids)``, None for a parameter that is None.
    """
    if unit_column is None:
        X, sensitive = split_sensitive_columns(X, sensitive_columns)
        return X, sensitive, None
    _, units = split_sensitive_columns(X, unit_column, name="unit_column",
                                       argument="unit_ids")
    _, sensitive = split_sensitive_columns(X, sensitive_columns)
    columns = column_list(sensitive_columns) + [unit_column]
    if _is_dataframe(X) and not all(isinstance(c, str) for c in columns):
        columns = [X.columns[c] if isinstance(c, Integral) else c for c in columns]
    return drop_columns(X, columns), sensitive, np.asarray(units).reshape(-1)


def without_fit_only_columns(X, columns, n_features_in, estimator_name):
    """``X`` for prediction, with or without the fit-only ``columns``: named
    columns of a DataFrame are dropped when present; otherwise ``X`` must
    have either the model's ``n_features_in`` columns or those plus the
    fit-only ones (dropped by position)."""
    if not columns:
        return X
    if _is_dataframe(X) and all(isinstance(c, str) for c in columns):
        present = [c for c in columns if c in X.columns]
        return X.drop(columns=present) if present else X
    n_columns = (X.shape if hasattr(X, "shape") else np.shape(X))[1]
    if n_columns == n_features_in:
        return X
    if n_columns != n_features_in + len(columns):
        raise ValueError(
            f"X has {n_columns} columns; {estimator_name} was fitted on "
            f"{n_features_in} features, plus the columns {columns} that only fit "
            f"reads: pass {n_features_in} columns (without them) or "
            f"{n_features_in + len(columns)} (with them)."
        )
    if not all(isinstance(c, Integral) for c in columns):
        raise ValueError(
            f"X has no column names, so the columns {columns} cannot be found; predict "
            f"on a DataFrame, or on the {n_features_in} model features only."
        )
    if _is_dataframe(X):
        return X.drop(columns=X.columns[np.mod(columns, n_columns)])
    X = np.asarray(X) if not hasattr(X, "shape") else X
    keep = np.setdiff1d(np.arange(n_columns), np.mod(columns, n_columns))
    return X[:, keep]
