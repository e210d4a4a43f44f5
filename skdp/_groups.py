"""Validation and integer encoding of sensitive features (group labels).

Used by the fairness metrics and scorers in :mod:`skdp.metrics` and by the
estimators, so that every part of skdp agrees on what a group is:

* one column of labels (strings, ints, bools, or a mix of types) gives one
  group per distinct label;
* several columns (a 2-D array or a DataFrame) give intersectional groups, one
  per distinct row, labelled by a tuple;
* groups are numbered ``0 .. n_groups - 1`` in sorted label order, so that the
  numbering does not depend on the order of the rows.

pandas is never imported here unless the input is a pandas object or an
object array that may hold pandas' missing-value markers.
"""

import warnings
from numbers import Integral, Real

import numpy as np

__all__ = ["check_sensitive_features", "encode_groups", "select_columns", "warn_if_misaligned"]


def _is_dataframe(X):
    return hasattr(X, "columns") and hasattr(X, "iloc")


def _is_series(X):
    return hasattr(X, "iloc") and not hasattr(X, "columns")


def _is_sparse(X):
    return hasattr(X, "tocsr") and hasattr(X, "nnz")


def _asarray(values):
    """Array from user input without turning mixed types into strings.

    ``np.asarray(["a", 1])`` gives ``array(['a', '1'])``, which would merge
    the groups ``1`` and ``"1"``; lists that numpy would make a string array
    are kept as objects instead.
    """
    if isinstance(values, np.ndarray):
        return values
    array = np.asarray(values)
    if array.dtype.kind in "US":
        array = np.asarray(values, dtype=object)
    return array


def _missing_mask(column):
    """Boolean mask of None / NaN / NaT / pandas.NA entries in a 1-D array."""
    kind = column.dtype.kind
    if kind in "fc":
        return np.isnan(column)
    if kind in "mM":
        return np.isnat(column)
    if kind != "O":
        return np.zeros(column.shape, dtype=bool)
    try:
        import pandas
    except ImportError:  # pragma: no cover - pandas is a test dependency
        is_missing = np.frompyfunc(lambda v: v is None or (isinstance(v, float) and v != v), 1, 1)
        return is_missing(column).astype(bool)
    return np.asarray(pandas.isna(column), dtype=bool)


def _to_columns(sensitive_features, n_samples, name):
    """List of 1-D arrays, one per column, checked for length and missing values."""
    if sensitive_features is None:
        raise ValueError(f"{name} is None; pass one group label per row of X.")
    if _is_sparse(sensitive_features):
        raise ValueError(
            f"{name} is a sparse matrix; pass a dense 1-D array, a 2-D array or a pandas "
            "DataFrame of group labels."
        )
    if _is_dataframe(sensitive_features):
        n_columns = sensitive_features.shape[1]
        columns = [np.asarray(sensitive_features.iloc[:, j]) for j in range(n_columns)]
        length = sensitive_features.shape[0]
    elif _is_series(sensitive_features):
        columns = [np.asarray(sensitive_features)]
        length = columns[0].shape[0]
    else:
        array = _asarray(sensitive_features)
        if array.ndim == 0:
            raise ValueError(
                f"{name} must be array-like with one group label per row of X; got the scalar "
                f"{sensitive_features!r}. To take the groups from a column of X, name the "
                "column with sensitive_columns (estimators) or sensitive_column (scorers)."
            )
        if array.ndim > 2:
            raise ValueError(
                f"{name} must be 1-D (one label per row) or 2-D (several columns forming "
                f"intersectional groups); got an array with shape {array.shape}."
            )
        length = array.shape[0]
        columns = [array] if array.ndim == 1 else [array[:, j] for j in range(array.shape[1])]
    if length == 0:
        raise ValueError(f"{name} is empty; pass one group label per row of X.")
    if not columns:
        raise ValueError(f"{name} has no columns; pass at least one column of group labels.")
    if n_samples is not None and length != n_samples:
        raise ValueError(
            f"{name} has {length} entries but X has {n_samples} rows; it must have one entry "
            "per row of X (several sensitive columns go in a 2-D array of shape "
            "(n_samples, n_columns) or a DataFrame)."
        )
    for j, column in enumerate(columns):
        n_missing = int(_missing_mask(column).sum())
        if n_missing:
            where = f" (column {j})" if len(columns) > 1 else ""
            noun = "value" if n_missing == 1 else "values"
            raise ValueError(
                f"{name} has {n_missing} missing {noun} (None/NaN){where}; every row needs a "
                "group label. Fill them, for example with their own label such as 'unknown'."
            )
    return columns


def warn_if_misaligned(X, values, name="sensitive_features"):
    """Warn when ``X`` and ``values`` are both pandas objects whose indexes
    differ: they are used by position, as scikit-learn uses them."""
    index_x, index_v = getattr(X, "index", None), getattr(values, "index", None)
    if index_x is None or index_v is None or not hasattr(index_v, "equals"):
        return
    if len(index_x) == len(index_v) and not index_x.equals(index_v):
        warnings.warn(
            f"{name} and X have different pandas indexes; they are matched by position "
            f"(row i of X with row i of {name}), as scikit-learn does, not by index label. "
            f"If that is not what you meant, align them first, e.g. {name}.loc[X.index].",
            UserWarning, stacklevel=4,
        )


def check_sensitive_features(sensitive_features, n_samples, *, name="sensitive_features"):
    """Validate sensitive features and return them as a 2-D array.

    Parameters
    ----------
    sensitive_features : array-like of shape (n_samples,) or (n_samples, n_columns)
        Group label of each row: a list, a 1-D or 2-D numpy array, a pandas
        Series or a DataFrame. Several columns form intersectional groups.
    n_samples : int or None
        Number of rows of ``X``; ``None`` skips the length check.
    name : str, default="sensitive_features"
        Name of the argument, used in error messages.

    Returns
    -------
    sensitive_features : ndarray of shape (n_samples, n_columns)
        The labels, with the columns' common dtype, or dtype object when the
        columns have different kinds of labels.

    Raises
    ------
    ValueError
        If the input is a scalar, is empty, has more than two dimensions,
        has a length different from ``n_samples``, or has missing values
        (None, NaN, NaT, pandas.NA).

    Examples
    --------
    >>> from skdp._groups import check_sensitive_features
    >>> check_sensitive_features(["a", "b", "a"], 3)
    array([['a'],
           ['b'],
           ['a']], dtype=object)
    >>> check_sensitive_features([[0, 1], [1, 1]], 2).shape
    (2, 2)
    >>> check_sensitive_features(["a", "b"], 3)
    Traceback (most recent call last):
        ...
    ValueError: sensitive_features has 2 entries but X has 3 rows; it must have one entry per row of X (several sensitive columns go in a 2-D array of shape (n_samples, n_columns) or a DataFrame).
    """
    columns = _to_columns(sensitive_features, n_samples, name)
    kinds = {column.dtype for column in columns}
    dtype = kinds.pop() if len(kinds) == 1 else object
    out = np.empty((columns[0].shape[0], len(columns)), dtype=dtype)
    for j, column in enumerate(columns):
        out[:, j] = column
    return out


def _label_sort_key(value):
    """Sort key for labels of mixed types: numbers < strings < other types.

    Numbers and strings sort by value; other labels by type name, then repr.
    """
    if isinstance(value, (Real, np.bool_)):
        return (0, "", value)
    if isinstance(value, str):
        return (1, "", value)
    return (2, type(value).__qualname__, repr(value))


def _unique_objects(column):
    """``np.unique(..., return_inverse=True)`` that also copes with mixed types.

    numpy sorts object arrays with ``<``, which fails for mixed types (str and
    int) and gives wrong results for partial orders (sets); those fall back to
    hashing with :func:`_label_sort_key` ordering. That path needs one Python
    call per row, as any work on object arrays does.
    """
    try:
        uniques, codes = np.unique(column, return_inverse=True)
        if len(set(uniques.tolist())) == uniques.shape[0]:
            return uniques, codes
    except TypeError:
        pass
    values = column.tolist()
    try:
        distinct = sorted(dict.fromkeys(values), key=_label_sort_key)
    except TypeError as exc:
        raise ValueError(f"group labels must be hashable values; {exc}") from None
    index = {label: i for i, label in enumerate(distinct)}
    codes = np.fromiter((index[v] for v in values), dtype=np.int64, count=len(values))
    uniques = np.empty(len(distinct), dtype=object)
    uniques[:] = distinct
    return uniques, codes


def _factorize_objects(column):
    """Hash-based encoding of an object column (pandas.factorize), sorted after.

    Sorting the few distinct labels instead of all rows makes object columns
    (e.g. strings from a DataFrame) about ten times faster than np.unique.
    Returns None when pandas is missing or the labels are not hashable.
    """
    try:
        import pandas
    except ImportError:  # pragma: no cover - pandas is a test dependency
        return None
    try:
        codes, distinct = pandas.factorize(column, sort=False)
    except TypeError:
        return None
    sorted_labels, position = _unique_objects(np.asarray(distinct, dtype=object))
    return sorted_labels, np.ravel(position)[codes]


def _encode_column(column):
    """Sorted distinct labels (object array) and int64 codes of one column."""
    if column.dtype.kind == "O":
        encoded = _factorize_objects(column)
        uniques, codes = encoded if encoded is not None else _unique_objects(column)
    else:
        uniques, codes = np.unique(column, return_inverse=True)
    return uniques.astype(object), np.ravel(codes).astype(np.int64, copy=False)


def _encode_columns(columns):
    """Codes and labels of the distinct rows of several columns."""
    encoded = [_encode_column(column) for column in columns]
    if len(encoded) == 1:
        return encoded[0][1], encoded[0][0]
    # Mixed-radix combination, compressed after each column so it cannot
    # overflow; np.unique keeps the lexicographic order of the label tuples.
    combined = encoded[0][1]
    for uniques, codes in encoded[1:]:
        combined = combined * len(uniques) + codes
        _, combined = np.unique(combined, return_inverse=True)
        combined = np.ravel(combined).astype(np.int64, copy=False)
    _, first = np.unique(combined, return_index=True)
    parts = [uniques[codes[first]].tolist() for uniques, codes in encoded]
    groups = np.empty(first.shape[0], dtype=object)
    groups[:] = list(zip(*parts))
    return combined, groups


def _as_group_array(groups):
    """1-D object array of group labels (tuples stay whole)."""
    if isinstance(groups, np.ndarray) and groups.ndim == 1:
        return groups.astype(object, copy=False)
    if isinstance(groups, np.ndarray):
        raise ValueError(f"groups must be a 1-D array of group labels; got shape {groups.shape}.")
    labels = list(groups)
    out = np.empty(len(labels), dtype=object)
    out[:] = labels
    return out


def encode_groups(sensitive_features, n_samples=None, *, groups=None, name="sensitive_features"):
    """Encode sensitive features as integer group codes.

    Parameters
    ----------
    sensitive_features : array-like of shape (n_samples,) or (n_samples, n_columns)
        Group label of each row (see :func:`check_sensitive_features`).
        Several columns form intersectional groups labelled by tuples.
    n_samples : int, default=None
        Number of rows of ``X``; ``None`` skips the length check.
    groups : array-like of shape (n_groups,), default=None
        Group labels from an earlier call (for example an estimator's
        ``groups_``). When given, the rows are encoded against these labels
        and rows of a group not among them get code ``-1``.
    name : str, default="sensitive_features"
        Name of the argument, used in error messages.

    Returns
    -------
    codes : ndarray of shape (n_samples,), dtype int64
        Index of each row's group in ``groups``; ``-1`` for unseen groups.
    groups : ndarray of shape (n_groups,), dtype object
        Distinct group labels in sorted order: scalars for one column,
        tuples for several. When ``groups`` was passed, it is returned
        unchanged (as an object array).

    Examples
    --------
    >>> from skdp._groups import encode_groups
    >>> codes, groups = encode_groups(["b", "a", "b", "c"])
    >>> codes
    array([1, 0, 1, 2])
    >>> groups
    array(['a', 'b', 'c'], dtype=object)
    >>> encode_groups([[1, "x"], [0, "y"], [1, "x"]])[1]
    array([(0, 'y'), (1, 'x')], dtype=object)
    >>> encode_groups(["a", "d"], groups=groups)[0]
    array([ 0, -1])
    """
    columns = _to_columns(sensitive_features, n_samples, name)
    codes, found = _encode_columns(columns)
    if groups is None:
        return codes, found
    groups = _as_group_array(groups)
    if groups.shape[0] == 0:
        raise ValueError("groups is empty; pass the group labels found at fit time.")
    n_columns = len(columns)
    labels = groups.tolist()
    if n_columns > 1 and not all(isinstance(g, tuple) and len(g) == n_columns for g in labels):
        raise ValueError(
            f"{name} has {n_columns} columns, but groups are not all tuples of {n_columns} "
            "labels; pass the same sensitive columns as at fit time."
        )
    if n_columns == 1 and all(isinstance(g, tuple) for g in labels):
        raise ValueError(
            f"{name} has 1 column, but groups are tuples of {len(groups[0])} labels; pass "
            "the same sensitive columns as at fit time."
        )
    index = {}
    for i, label in enumerate(labels):
        index.setdefault(label, i)
    if len(index) != groups.shape[0]:
        raise ValueError("groups has repeated labels; pass each group label once.")
    lookup = np.fromiter(
        (index.get(label, -1) for label in found.tolist()), dtype=np.int64, count=found.shape[0]
    )
    return lookup[codes], groups


def select_columns(X, columns, *, name="sensitive_column"):
    """Take group columns out of ``X``.

    Parameters
    ----------
    X : array-like, sparse matrix or pandas DataFrame of shape (n_samples, n_features)
        Data holding the group column(s).
    columns : str, int or list of str or int
        Column names of a DataFrame ``X``, or integer positions (in an array
        or a DataFrame). A list gives several columns (intersectional groups).
    name : str, default="sensitive_column"
        Name of the argument, used in error messages.

    Returns
    -------
    values : ndarray of shape (n_samples,) or (n_samples, n_columns)
        1-D for a single column given as a scalar, 2-D for a list.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp._groups import select_columns
    >>> X = np.array([[1.0, 0.0], [2.0, 1.0]])
    >>> select_columns(X, 1)
    array([0., 1.])
    >>> select_columns(X, [1, 0]).shape
    (2, 2)
    """
    single = isinstance(columns, (str, Integral))
    keys = [columns] if single else list(columns)
    if not keys:
        raise ValueError(f"{name} is empty; name at least one column of X.")
    if _is_dataframe(X):
        if all(isinstance(k, str) for k in keys):
            missing = [k for k in keys if k not in X.columns]
            if missing:
                raise ValueError(
                    f"{name}={columns!r}: {missing} not among the columns of X "
                    f"({list(X.columns)[:20]}). The scorer sees the X given to GridSearchCV "
                    "or cross_validate, before any Pipeline step."
                )
            values = X[keys].to_numpy()
            return values[:, 0] if single else values
        if all(isinstance(k, Integral) and not isinstance(k, bool) for k in keys):
            values = X.iloc[:, keys].to_numpy()
            return values[:, 0] if single else values
        raise ValueError(
            f"{name} must be column names (str) or positions (int), not a mix; got {columns!r}."
        )
    if not all(isinstance(k, Integral) and not isinstance(k, bool) for k in keys):
        raise ValueError(
            f"{name}={columns!r} names columns, but X is a {type(X).__name__} without column "
            "names, so the column is gone: a preprocessing step (e.g. a ColumnTransformer "
            "without set_output(transform='pandas')) dropped the names, or the column "
            "itself. Keep it by name, e.g. ColumnTransformer(..., remainder='passthrough', "
            "verbose_feature_names_out=False).set_output(transform='pandas'), or pass the "
            "groups to fit directly (sensitive_features=..., with metadata routing in a "
            "Pipeline). Integer positions are only safe when you know where the column is "
            "after every preprocessing step."
        )
    if _is_sparse(X):
        values = X.tocsc()[:, keys].toarray()
    else:
        values = _asarray(X)
        if values.ndim != 2:
            raise ValueError(f"X must be 2-D to take {name} out of it; got shape {values.shape}.")
        n_columns = values.shape[1]
        bad = [k for k in keys if not -n_columns <= k < n_columns]
        if bad:
            raise ValueError(
                f"{name}={columns!r}: positions {bad} are out of range for X with "
                f"{n_columns} columns."
            )
        values = values[:, keys]
    return values[:, 0] if single else values
