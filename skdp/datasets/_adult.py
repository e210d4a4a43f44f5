"""UCI Adult (census income) loader."""

import numpy as np

from ._base import (
    RemoteFileMetadata,
    _check_bool,
    _check_categories,
    _check_option,
    _load_file,
    _make_bunch,
)

__all__ = ["fetch_adult"]

_URL = "https://archive.ics.uci.edu/ml/machine-learning-databases/adult/"

ADULT_TRAIN = RemoteFileMetadata(
    filename="adult.data",
    urls=(_URL + "adult.data",),
    checksum="5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d",
)
ADULT_TEST = RemoteFileMetadata(
    filename="adult.test",
    urls=(_URL + "adult.test",),
    checksum="a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05",
)

_COLUMNS = [
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
]
_NUMERIC = ["age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"]
_CATEGORICAL = [name for name in _COLUMNS if name not in _NUMERIC]
_TARGET = "income"
_TARGET_NAMES = ["<=50K", ">50K"]
_MISSING = "?"

# The categories listed in the dataset's public description (adult.names).
_CATEGORIES = {
    "workclass": [
        "Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov", "Local-gov",
        "State-gov", "Without-pay", "Never-worked",
    ],
    "education": [
        "Bachelors", "Some-college", "11th", "HS-grad", "Prof-school", "Assoc-acdm",
        "Assoc-voc", "9th", "7th-8th", "12th", "Masters", "1st-4th", "10th", "Doctorate",
        "5th-6th", "Preschool",
    ],
    "marital-status": [
        "Married-civ-spouse", "Divorced", "Never-married", "Separated", "Widowed",
        "Married-spouse-absent", "Married-AF-spouse",
    ],
    "occupation": [
        "Tech-support", "Craft-repair", "Other-service", "Sales", "Exec-managerial",
        "Prof-specialty", "Handlers-cleaners", "Machine-op-inspct", "Adm-clerical",
        "Farming-fishing", "Transport-moving", "Priv-house-serv", "Protective-serv",
        "Armed-Forces",
    ],
    "relationship": [
        "Wife", "Own-child", "Husband", "Not-in-family", "Other-relative", "Unmarried",
    ],
    "race": ["White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"],
    "sex": ["Female", "Male"],
    "native-country": [
        "United-States", "Cambodia", "England", "Puerto-Rico", "Canada", "Germany",
        "Outlying-US(Guam-USVI-etc)", "India", "Japan", "Greece", "South", "China", "Cuba",
        "Iran", "Honduras", "Philippines", "Italy", "Poland", "Jamaica", "Vietnam", "Mexico",
        "Portugal", "Ireland", "France", "Dominican-Republic", "Laos", "Ecuador", "Taiwan",
        "Haiti", "Columbia", "Hungary", "Guatemala", "Nicaragua", "Scotland", "Thailand",
        "Yugoslavia", "El-Salvador", "Trinadad&Tobago", "Peru", "Hong", "Holand-Netherlands",
    ],
}

_SENSITIVE_ATTRIBUTES = ("sex", "race")

_DESCR = """\
.. _adult_dataset:

UCI Adult (census income) dataset
---------------------------------

**Data set characteristics:**

:Number of instances: 32,561 (train) and 16,281 (test); 30,162 and 15,060
    without the rows that have a missing value.
:Number of attributes: 14 (6 numeric, 8 categorical), one of which is the
    sensitive attribute.
:Target: 1 if the yearly income is above 50K USD, 0 otherwise (about 24%
    positive).
:Sensitive attribute: ``sex`` (Female / Male, the default) or ``race``.
:Missing values: ``workclass``, ``occupation`` and ``native-country`` ("?"
    in the files).
:Source: UCI Machine Learning Repository, https://archive.ics.uci.edu/dataset/2/adult
    (Becker and Kohavi, 1996), licence CC BY 4.0.

Extracted by Barry Becker from the 1994 US Census database. Each row is a
person; the task is to predict whether the person's income exceeds 50K USD a
year. The training and test files are the split distributed by UCI.

Following the benchmark convention of the fairness literature (and of the
RaCO-DP and DP-FERMI papers) the label is ``income > 50K``, the sensitive
attribute is ``sex``, it is *not* a model input, numeric columns are
standardized and categorical ones one-hot encoded (see
:func:`skdp.datasets.make_preprocessor`; about 100 inputs).

``fnlwgt`` ("final weight") is a survey weight: the number of people in the
population the census believes each row represents, computed from
demographic controls. It is not a property of the person and is weakly
related to the label, but the benchmark convention keeps it as a feature.

The files' trailing '.' on the test labels and their leading comment line are
removed, and whitespace around every value is stripped.
"""


def _read_adult(text, source):
    """Parse one Adult file into an array of shape (n_rows, 15) of stripped strings.

    ``text`` is the file's content and ``source`` names it in error messages.
    """
    n_fields = len(_COLUMNS) + 1
    # Skip blank lines and the test file's leading "|1x3 Cross validator".
    lines = [line for line in text.splitlines() if line.strip() and line[0] != "|"]
    fields = ",".join(lines).split(",")
    if len(fields) != n_fields * len(lines):
        bad = next(line for line in lines if line.count(",") != n_fields - 1)
        raise ValueError(
            f"{source!r} has a line with {bad.count(',') + 1} comma-separated fields "
            f"where {n_fields} were expected: {bad[:80]!r}."
        )
    return np.char.strip(np.array(fields, dtype=str)).reshape(len(lines), n_fields)


def fetch_adult(
    *,
    data_home=None,
    subset="train",
    sensitive_attribute="sex",
    include_sensitive_in_features=False,
    as_frame=False,
    drop_missing=True,
    download_if_missing=True,
):
    """Load the UCI Adult (census income) dataset (classification).

    Predict whether a person's yearly income exceeds 50K USD from 1994 US
    census data, with ``sex`` (or ``race``) as the sensitive attribute. Read
    more in the ``DESCR`` of the returned bunch.

    =================   ============================================
    Samples             32,561 train / 16,281 test (30,162 / 15,060
                        with ``drop_missing=True``)
    Features            13 (6 numeric, 7 categorical) plus the
                        sensitive attribute
    Classes             2 (about 24% positive)
    =================   ============================================

    Parameters
    ----------
    data_home : str or path-like, default=None
        A data folder holding ``<data_home>/adult/adult.data`` and
        ``<data_home>/adult/adult.test``; a missing file is downloaded into
        it. If None, the files are read from the folder named by the
        ``SKDP_DATA`` environment variable when it holds them, else from
        the compressed copies shipped with skdp (no download, no network).
        See :func:`get_data_home`.
    subset : {"train", "test", "all"}, default="train"
        The UCI split to load; ``"all"`` is the training rows followed by the
        test rows.
    sensitive_attribute : {"sex", "race"}, default="sex"
        The column returned as ``sensitive``.
    include_sensitive_in_features : bool, default=False
        Whether the sensitive column is also kept among the features in
        ``data``. The benchmark convention leaves it out.
    as_frame : bool, default=False
        If True, ``data`` is a pandas DataFrame (numeric columns float64,
        categorical columns ``category`` with the documented categories),
        ``target`` and ``sensitive`` are Series and ``frame`` holds all of
        them. Requires pandas.
    drop_missing : bool, default=True
        If True, rows with a missing value ("?" in the files) are removed.
        If False they are kept and the missing values are NaN (the one-hot
        encoder of :func:`make_preprocessor` then encodes them as a category
        of their own).
    download_if_missing : bool, default=True
        If False, raise a FileNotFoundError when a file is not in
        ``data_home`` instead of downloading it from the UCI repository.
        Without ``data_home`` the shipped copies are used and nothing is
        downloaded.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        Dictionary-like object with the following attributes.

        data : ndarray of shape (n_samples, n_features) of object, or DataFrame
            The features, in the file's column order: numbers as floats,
            categories as strings.
        target : ndarray of shape (n_samples,) of int, or Series
            1 for income > 50K, 0 otherwise.
        sensitive : ndarray of shape (n_samples,) of object, or Series
            The sensitive attribute, e.g. "Female" / "Male".
        frame : DataFrame or None
            With ``as_frame=True``, the features, the sensitive attribute and
            the target (column ``"income"``) in one DataFrame.
        feature_names : list of str
            The columns of ``data``.
        numeric_features, categorical_features : list of str
            The numeric and the categorical columns of ``data``, to build a
            :class:`~sklearn.compose.ColumnTransformer` (or use
            :func:`make_preprocessor`).
        categories : dict of str to list of str
            For each categorical feature, the categories listed in the
            dataset's public documentation.
        target_names : list of str
            ``["<=50K", ">50K"]``: the meaning of targets 0 and 1.
        sensitive_attribute : str
            The name of the sensitive attribute.
        DESCR : str
            Description of the dataset.

    Raises
    ------
    FileNotFoundError
        If a file is not in ``data_home`` and cannot (or, with
        ``download_if_missing=False``, may not) be downloaded. The message
        gives the full path where the file is expected.
    OSError
        If a file's SHA256 checksum (for a shipped copy, that of its
        decompressed bytes) is not the published one.

    See Also
    --------
    make_preprocessor : The standard preprocessing for the returned data.

    Notes
    -----
    ``fnlwgt`` is a survey weight rather than a property of the person; it is
    kept as a feature, as in the benchmark convention.

    skdp ships gzip-compressed copies of ``adult.data`` and ``adult.test``
    (CC BY 4.0; citation in ``skdp/datasets/data/README.txt``), checked
    against the SHA256 of the UCI files when read.

    Examples
    --------
    >>> from skdp.datasets import fetch_adult
    >>> adult = fetch_adult()
    >>> adult.data.shape, float(adult.target.mean().round(3))
    ((30162, 13), 0.249)
    >>> sorted(set(adult.sensitive))
    ['Female', 'Male']
    >>> "sex" in adult.feature_names
    False
    """
    _check_option(subset, "subset", ("train", "test", "all"))
    _check_option(sensitive_attribute, "sensitive_attribute", _SENSITIVE_ATTRIBUTES)
    for name, value in [
        ("include_sensitive_in_features", include_sensitive_in_features),
        ("as_frame", as_frame),
        ("drop_missing", drop_missing),
        ("download_if_missing", download_if_missing),
    ]:
        _check_bool(value, name)

    remotes = {"train": [ADULT_TRAIN], "test": [ADULT_TEST], "all": [ADULT_TRAIN, ADULT_TEST]}
    tables = []
    for remote in remotes[subset]:
        text, source = _load_file(
            "adult", remote, data_home=data_home, download_if_missing=download_if_missing
        )
        tables.append(_read_adult(text, source))
    table = np.concatenate(tables)
    missing = table == _MISSING
    if drop_missing:
        keep = ~missing.any(axis=1)
        table, missing = table[keep], missing[keep]

    labels = np.char.rstrip(table[:, -1], ".")
    unknown = sorted(set(np.unique(labels).tolist()) - set(_TARGET_NAMES))
    if unknown:
        raise ValueError(f"Unexpected income labels {unknown} in the Adult files.")
    target = (labels == ">50K").astype(np.int64)

    columns = {}
    for j, name in enumerate(_COLUMNS):
        if name in _NUMERIC:
            columns[name] = np.where(missing[:, j], "nan", table[:, j]).astype(np.float64)
        else:
            columns[name] = table[:, j].astype(object)
            columns[name][missing[:, j]] = np.nan
    _check_categories(columns, _CATEGORIES, "adult")

    return _make_bunch(
        columns=columns,
        numeric=_NUMERIC,
        categorical=_CATEGORICAL,
        target=target,
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
