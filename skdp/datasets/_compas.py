"""ProPublica COMPAS two-year recidivism loader."""

import csv

import numpy as np

from ._base import (
    RemoteFileMetadata,
    _check_bool,
    _check_categories,
    _check_option,
    _fetch_file,
    _make_bunch,
)

__all__ = ["fetch_compas"]

COMPAS = RemoteFileMetadata(
    filename="compas-scores-two-years.csv",
    urls=(
        "https://raw.githubusercontent.com/propublica/compas-analysis/master/"
        "compas-scores-two-years.csv",
    ),
    checksum="c451db85908b2f7fef1d83203bedf6b71ecda0d5af468d82ae62178f91d0cc7d",
)

# Features in the order they appear in `data`; "race" and "sex" are both
# candidates, the one that is the sensitive attribute is left out.
_NUMERIC = ["age", "priors_count", "juv_fel_count", "juv_misd_count", "juv_other_count"]
_CATEGORICAL = ["c_charge_degree", "sex", "race"]
_SCORE = "decile_score"
_TARGET = "two_year_recid"
_TARGET_NAMES = ["no recidivism", "recidivism"]

# Categories as published by ProPublica (the charge degree after its filter
# that removes ordinary traffic offences, "O").
_CATEGORIES = {
    "c_charge_degree": ["F", "M"],
    "sex": ["Female", "Male"],
    "race": ["African-American", "Asian", "Caucasian", "Hispanic", "Native American", "Other"],
}

_SENSITIVE_ATTRIBUTES = ("race", "sex")

_DESCR = """\
.. _compas_dataset:

ProPublica COMPAS two-year recidivism dataset
---------------------------------------------

**Data set characteristics:**

:Number of instances: 6,172 (of 7,214 in the file, after ProPublica's filters).
:Number of features: 5 numeric (``age``, ``priors_count``,
    ``juv_fel_count``, ``juv_misd_count``, ``juv_other_count``) and 2
    categorical (``c_charge_degree``: F felony / M misdemeanour, and ``sex``
    or ``race``, whichever is not the sensitive attribute); optionally the
    COMPAS ``decile_score``.
:Target: ``two_year_recid``, 1 if the person was charged with a new crime
    within two years of the COMPAS screening (about 46% positive).
:Sensitive attribute: ``race`` (the default: African-American 3,175,
    Caucasian 2,103, Hispanic 509, Other 343, Asian 31, Native American 11)
    or ``sex``.
:Source: ProPublica, "Machine Bias" (Angwin, Larson, Mattu and Kirchner,
    2016), https://github.com/propublica/compas-analysis.

Criminal defendants screened with the COMPAS risk assessment tool in Broward
County, Florida, in 2013-2014, followed for two years. The rows are those
kept by ProPublica's analysis (``Compas Analysis.ipynb``): the COMPAS
screening happened within 30 days of the arrest
(``-30 <= days_b_screening_arrest <= 30``, rows without a value dropped),
a recidivism record was found (``is_recid != -1``), the charge is not an
ordinary traffic offence (``c_charge_degree != 'O'``) and a score exists
(``score_text != 'N/A'``).

The COMPAS score itself (``decile_score``) is left out of the features by
default: it is the output of the tool under study, not a property of the
person. Some race groups are very small; a common choice is to compare
African-American with all other defendants (or with Caucasian defendants
only), e.g. ``sensitive == "African-American"``.
"""


def _read_compas(path):
    """Parse the CSV into a dict of raw string columns (first of duplicate names)."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader)
        rows = [row for row in reader if row]
    wanted = _NUMERIC + _CATEGORICAL + [
        _SCORE,
        _TARGET,
        "days_b_screening_arrest",
        "is_recid",
        "score_text",
    ]
    position = {}
    for j, name in enumerate(header):
        position.setdefault(name, j)  # the file repeats some names (decile_score, priors_count)
    absent = [name for name in wanted if name not in position]
    if absent:
        raise ValueError(f"{str(path)!r} lacks the columns {absent}.")
    bad = [i for i, row in enumerate(rows, start=2) if len(row) != len(header)]
    if bad:
        raise ValueError(f"Line {bad[0]} of {str(path)!r} does not have {len(header)} fields.")
    table = np.array(rows, dtype=object)
    return {name: table[:, position[name]] for name in wanted}


def _to_float(values):
    out = np.full(values.shape, np.nan)
    present = values != ""
    out[present] = values[present].astype(np.float64)
    return out


def fetch_compas(
    *,
    data_home=None,
    sensitive_attribute="race",
    include_sensitive_in_features=False,
    include_decile_score=False,
    as_frame=False,
    download_if_missing=True,
):
    """Load ProPublica's COMPAS two-year recidivism dataset (classification).

    Predict whether a defendant is charged with a new crime within two years,
    with ``race`` (or ``sex``) as the sensitive attribute. The rows are those
    of ProPublica's analysis. Read more in the ``DESCR`` of the returned
    bunch.

    =================   ============================================
    Samples             6,172
    Features            7 (5 numeric, 2 categorical: the charge
                        degree and the demographic column that is
                        not sensitive); 8 with the decile score
    Classes             2 (about 46% positive)
    =================   ============================================

    The dataset has no predefined train/test split; use
    :func:`~sklearn.model_selection.train_test_split` (stratified, with a
    fixed ``random_state``) to make one.

    Parameters
    ----------
    data_home : str or path-like, default=None
        The data folder; the file is
        ``<data_home>/compas/compas-scores-two-years.csv``, downloaded there
        if missing. If None, the ``SKDP_DATA`` environment variable, else
        ``~/skdp_data`` (see :func:`get_data_home`). Unlike Adult and German
        credit, COMPAS is not shipped with skdp (ProPublica's terms are not
        CC BY), so without a local copy it needs the network once.
    sensitive_attribute : {"race", "sex"}, default="race"
        The column returned as ``sensitive``; the other one stays among the
        features. ``race`` has six values, two of them with fewer than 40
        people.
    include_sensitive_in_features : bool, default=False
        Whether the sensitive column is also kept among the features.
    include_decile_score : bool, default=False
        Whether to add the COMPAS ``decile_score`` (1-10) as a numeric
        feature. It is the tool's own prediction, left out by default.
    as_frame : bool, default=False
        If True, ``data`` is a pandas DataFrame, ``target`` and
        ``sensitive`` are Series and ``frame`` holds all of them. Requires
        pandas.
    download_if_missing : bool, default=True
        If False, raise a FileNotFoundError when the data is not in
        ``data_home`` instead of downloading it from ProPublica's repository.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        Dictionary-like object with the attributes ``data``, ``target``
        (1 = recidivism within two years), ``sensitive``, ``frame`` (None
        unless ``as_frame``), ``feature_names``, ``numeric_features``,
        ``categorical_features``, ``categories``, ``target_names``,
        ``sensitive_attribute`` and ``DESCR``, as described in
        :func:`fetch_adult`.

    Raises
    ------
    FileNotFoundError
        If the file is not in ``data_home`` and cannot (or may not) be
        downloaded. The message gives the full expected path.
    OSError
        If the file's SHA256 checksum is not the published one.

    See Also
    --------
    make_preprocessor : The standard preprocessing for the returned data.

    Examples
    --------
    >>> from skdp.datasets import fetch_compas
    >>> compas = fetch_compas()  # doctest: +SKIP
    >>> compas.data.shape  # doctest: +SKIP
    (6172, 7)
    >>> compas.categorical_features  # doctest: +SKIP
    ['c_charge_degree', 'sex']
    >>> is_black = compas.sensitive == "African-American"  # doctest: +SKIP
    """
    _check_option(sensitive_attribute, "sensitive_attribute", _SENSITIVE_ATTRIBUTES)
    for name, value in [
        ("include_sensitive_in_features", include_sensitive_in_features),
        ("include_decile_score", include_decile_score),
        ("as_frame", as_frame),
        ("download_if_missing", download_if_missing),
    ]:
        _check_bool(value, name)

    path = _fetch_file(
        "compas", COMPAS, data_home=data_home, download_if_missing=download_if_missing
    )
    raw = _read_compas(path)

    days = _to_float(raw["days_b_screening_arrest"])
    with np.errstate(invalid="ignore"):
        keep = (
            (np.abs(days) <= 30)  # NaN compares False, as in ProPublica's R filter
            & (_to_float(raw["is_recid"]) != -1)
            & (raw["c_charge_degree"] != "O")
            & (raw["score_text"] != "N/A")
        )

    numeric = _NUMERIC + ([_SCORE] if include_decile_score else [])
    other = "sex" if sensitive_attribute == "race" else "race"
    order = numeric + ["c_charge_degree", other, sensitive_attribute]
    columns = {}
    for name in order:
        values = raw[name][keep]
        columns[name] = _to_float(values) if name in numeric else values
    for name in numeric:
        if np.isnan(columns[name]).any():
            raise ValueError(f"Column {name!r} of {str(path)!r} has missing values.")
    _check_categories(columns, _CATEGORIES, "compas")
    target = _to_float(raw[_TARGET][keep])
    if not np.isin(target, (0, 1)).all():
        raise ValueError(f"Column {_TARGET!r} of {str(path)!r} must hold 0 and 1 only.")

    return _make_bunch(
        columns=columns,
        numeric=numeric,
        categorical=_CATEGORICAL,
        target=target.astype(np.int64),
        target_column=_TARGET,
        target_names=_TARGET_NAMES,
        sensitive=columns[sensitive_attribute],
        sensitive_name=sensitive_attribute,
        source_columns=[sensitive_attribute],
        include_sensitive_in_features=include_sensitive_in_features,
        as_frame=as_frame,
        categories=_CATEGORIES,
        descr=_DESCR,
    )
