"""UCI Statlog German credit loader."""

import numpy as np

from ._base import (
    RemoteFileMetadata,
    _check_bool,
    _check_categories,
    _check_option,
    _load_file,
    _make_bunch,
)

__all__ = ["fetch_german"]

GERMAN = RemoteFileMetadata(
    filename="german.data",
    urls=(
        "https://archive.ics.uci.edu/ml/machine-learning-databases/statlog/german/german.data",
    ),
    checksum="b21f3d81db8071257d5ff1deaeba1fd4303b62712e6fcc9715c7a86202cb5871",
)

# The 20 attributes in file order: (readable name, code -> value for the
# qualitative ones, None for the numerical ones), after the dataset's
# documentation (german.doc).
_ATTRIBUTES = [
    ("checking_status", {
        "A11": "<0 DM",
        "A12": "0<=X<200 DM",
        "A13": ">=200 DM or salary assignment",
        "A14": "no checking account",
    }),
    ("duration_months", None),
    ("credit_history", {
        "A30": "no credits taken or all paid back duly",
        "A31": "all credits at this bank paid back duly",
        "A32": "existing credits paid back duly till now",
        "A33": "delay in paying off in the past",
        "A34": "critical account or other credits elsewhere",
    }),
    ("purpose", {
        "A40": "car (new)",
        "A41": "car (used)",
        "A42": "furniture/equipment",
        "A43": "radio/television",
        "A44": "domestic appliances",
        "A45": "repairs",
        "A46": "education",
        "A47": "vacation",
        "A48": "retraining",
        "A49": "business",
        "A410": "others",
    }),
    ("credit_amount", None),
    ("savings", {
        "A61": "<100 DM",
        "A62": "100<=X<500 DM",
        "A63": "500<=X<1000 DM",
        "A64": ">=1000 DM",
        "A65": "unknown or no savings account",
    }),
    ("employment_since", {
        "A71": "unemployed",
        "A72": "<1 year",
        "A73": "1<=X<4 years",
        "A74": "4<=X<7 years",
        "A75": ">=7 years",
    }),
    ("installment_rate", None),
    ("personal_status", {
        "A91": "male: divorced/separated",
        "A92": "female: divorced/separated/married",
        "A93": "male: single",
        "A94": "male: married/widowed",
        "A95": "female: single",
    }),
    ("other_debtors", {"A101": "none", "A102": "co-applicant", "A103": "guarantor"}),
    ("residence_since", None),
    ("property", {
        "A121": "real estate",
        "A122": "building society savings agreement or life insurance",
        "A123": "car or other",
        "A124": "unknown or no property",
    }),
    ("age", None),
    ("other_installment_plans", {"A141": "bank", "A142": "stores", "A143": "none"}),
    ("housing", {"A151": "rent", "A152": "own", "A153": "for free"}),
    ("existing_credits", None),
    ("job", {
        "A171": "unemployed or unskilled non-resident",
        "A172": "unskilled resident",
        "A173": "skilled employee or official",
        "A174": "management, self-employed or highly qualified",
    }),
    ("num_dependents", None),
    ("telephone", {"A191": "none", "A192": "yes, registered"}),
    ("foreign_worker", {"A201": "yes", "A202": "no"}),
]
_NUMERIC = [name for name, codes in _ATTRIBUTES if codes is None]
_CATEGORICAL = [name for name, codes in _ATTRIBUTES if codes is not None]
_CATEGORIES = {name: list(codes.values()) for name, codes in _ATTRIBUTES if codes is not None}
_TARGET = "credit"
_TARGET_NAMES = ["bad", "good"]

_SEX_OF_STATUS = {"A91": "Male", "A92": "Female", "A93": "Male", "A94": "Male", "A95": "Female"}
_AGE_THRESHOLD = 25
_AGE_GROUPS = (f"age<{_AGE_THRESHOLD}", f"age>={_AGE_THRESHOLD}")

# sensitive attribute -> (name of the returned Series, the columns it derives from)
_SENSITIVE_ATTRIBUTES = {"sex": ("sex", ["personal_status"]), "age": ("age_group", ["age"])}

_DESCR = """\
.. _german_dataset:

Statlog (German credit data) dataset
------------------------------------

**Data set characteristics:**

:Number of instances: 1,000
:Number of attributes: 20 (7 numerical, 13 qualitative), given readable
    names and values here.
:Target: ``credit``, 1 for a good credit risk (700 rows), 0 for a bad one
    (300 rows); the file codes them 1 and 2.
:Sensitive attribute: ``sex`` (the default), derived from attribute 9
    "personal status and sex", or ``age`` (``age>=25`` / ``age<25``).
:Missing values: none.
:Source: UCI Machine Learning Repository,
    https://archive.ics.uci.edu/dataset/144/statlog+german+credit+data
    (Hans Hofmann, 1994), licence CC BY 4.0.

Each row is a loan applicant described by the state of their accounts, the
loan, and personal attributes. The documentation gives a cost matrix in which
classifying a bad customer as good costs 5 and the converse costs 1.

Attribute 9 ("personal status and sex") mixes sex and marital status:
A91 male divorced/separated, A92 female divorced/separated/married,
A93 male single, A94 male married/widowed, A95 female single (A95 does not
occur in the data). Since its values determine sex, the ``personal_status``
column is left out of the features when ``sex`` is the sensitive attribute
(unless ``include_sensitive_in_features=True``), as is ``age`` when the
sensitive attribute is the age group.
"""


def _read_german(text, source):
    """Parse german.data into an array of shape (n_rows, 21) of strings.

    ``text`` is the file's content and ``source`` names it in error messages.
    """
    rows = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != len(_ATTRIBUTES) + 1:
            raise ValueError(
                f"Line {lineno} of {source!r} has {len(fields)} fields; "
                f"{len(_ATTRIBUTES) + 1} were expected."
            )
        rows.append(fields)
    return np.array(rows, dtype=object)


def fetch_german(
    *,
    data_home=None,
    sensitive_attribute="sex",
    include_sensitive_in_features=False,
    as_frame=False,
    download_if_missing=True,
):
    """Load the UCI Statlog German credit dataset (classification).

    Predict whether a loan applicant is a good credit risk, with ``sex`` (or
    an age group) as the sensitive attribute. Read more in the ``DESCR`` of
    the returned bunch.

    =================   ============================================
    Samples             1,000
    Features            19 (7 numeric, 12 categorical) with sex as
                        the sensitive attribute; 19 (6 numeric, 13
                        categorical) with age
    Classes             2 (70% good)
    =================   ============================================

    The dataset has no predefined train/test split; use
    :func:`~sklearn.model_selection.train_test_split` (stratified, with a
    fixed ``random_state``) to make one.

    Parameters
    ----------
    data_home : str or path-like, default=None
        A data folder holding ``<data_home>/german/german.data``; a missing
        file is downloaded into it. If None, the file is read from the
        folder named by the ``SKDP_DATA`` environment variable when it holds
        it, else from the compressed copy shipped with skdp (no download, no
        network). See :func:`get_data_home`.
    sensitive_attribute : {"sex", "age"}, default="sex"
        ``"sex"``: "Female" / "Male", derived from attribute 9 "personal
        status and sex" (A92, A95 female; A91, A93, A94 male); the Series is
        named ``sex``. ``"age"``: "age>=25" / "age<25"; the Series is named
        ``age_group``.
    include_sensitive_in_features : bool, default=False
        Whether the column the sensitive attribute is derived from
        (``personal_status`` for sex, ``age`` for the age group) is kept
        among the features.
    as_frame : bool, default=False
        If True, ``data`` is a pandas DataFrame, ``target`` and
        ``sensitive`` are Series and ``frame`` holds all of them. Requires
        pandas.
    download_if_missing : bool, default=True
        If False, raise a FileNotFoundError when the file is not in
        ``data_home`` instead of downloading it from the UCI repository.
        Without ``data_home`` the shipped copy is used and nothing is
        downloaded.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        Dictionary-like object with the attributes ``data``, ``target``
        (1 = good credit risk, 0 = bad), ``sensitive``, ``frame`` (None
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
        If the file's SHA256 checksum (for the shipped copy, that of its
        decompressed bytes) is not the published one.

    See Also
    --------
    make_preprocessor : The standard preprocessing for the returned data.

    Examples
    --------
    >>> from skdp.datasets import fetch_german
    >>> german = fetch_german()
    >>> german.data.shape, float(german.target.mean())
    ((1000, 19), 0.7)
    >>> german.sensitive[:3]
    array(['Male', 'Female', 'Male'], dtype=object)
    """
    _check_option(sensitive_attribute, "sensitive_attribute", tuple(_SENSITIVE_ATTRIBUTES))
    for name, value in [
        ("include_sensitive_in_features", include_sensitive_in_features),
        ("as_frame", as_frame),
        ("download_if_missing", download_if_missing),
    ]:
        _check_bool(value, name)

    text, source = _load_file(
        "german", GERMAN, data_home=data_home, download_if_missing=download_if_missing
    )
    table = _read_german(text, source)

    columns = {}
    for j, (name, codes) in enumerate(_ATTRIBUTES):
        values = table[:, j]
        if codes is None:
            columns[name] = values.astype(np.float64)
            continue
        unknown = sorted(set(values) - set(codes))
        if unknown:
            raise ValueError(f"Attribute {name!r} of {source!r} has unknown codes {unknown}.")
        columns[name] = np.array([codes[code] for code in values], dtype=object)
    _check_categories(columns, _CATEGORIES, "german")

    labels = table[:, -1]
    if not set(labels) <= {"1", "2"}:
        raise ValueError(f"The class column of {source!r} must hold 1 (good) and 2 (bad).")
    target = (labels == "1").astype(np.int64)

    sensitive_name, source_columns = _SENSITIVE_ATTRIBUTES[sensitive_attribute]
    if sensitive_attribute == "sex":
        sensitive = np.array([_SEX_OF_STATUS[code] for code in table[:, 8]], dtype=object)
    else:
        sensitive = np.where(columns["age"] >= _AGE_THRESHOLD, _AGE_GROUPS[1], _AGE_GROUPS[0])
        sensitive = sensitive.astype(object)

    return _make_bunch(
        columns=columns,
        numeric=_NUMERIC,
        categorical=_CATEGORICAL,
        target=target,
        target_column=_TARGET,
        target_names=_TARGET_NAMES,
        sensitive=sensitive,
        sensitive_name=sensitive_name,
        source_columns=source_columns,
        include_sensitive_in_features=include_sensitive_in_features,
        as_frame=as_frame,
        categories=_CATEGORIES,
        descr=_DESCR,
    )
