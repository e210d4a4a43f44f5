"""Shared machinery for the dataset loaders.

The data home, download with SHA256 verification, the verification cache for
local copies, the assembly of the returned :class:`~sklearn.utils.Bunch`, and
:func:`make_preprocessor`.

A dataset ``<name>`` made of files ``<file>`` lives in
``<data_home>/<name>/<file>``. When a file is there it is read (after its
SHA256 has been checked); when it is not, it is downloaded from its public
source into a temporary file of the same folder, checked, and only then moved
into place, so that an interrupted or corrupted download never leaves a file
behind.

The small datasets whose licence allows it (Adult, German credit) are also
shipped inside the package, gzip-compressed, in ``skdp/datasets/data/``. A
loader reads the file, in order of precedence, from:

1. the ``data_home`` argument, when given (downloading it there if missing);
2. the folder named by the ``SKDP_DATA`` environment variable, when it holds
   the file;
3. the embedded copy, when the dataset has one;
4. the data home of :func:`get_data_home`, downloading it there if missing.

Embedded copies are checked against the same SHA256 as the original files.
"""

import gzip
import hashlib
import http.client
import importlib.resources
import os
import tempfile
from collections import namedtuple
from numbers import Real
from pathlib import Path
from urllib.error import URLError
from urllib.request import Request, urlopen

import numpy as np
from sklearn.compose import ColumnTransformer
from sklearn.preprocessing import FunctionTransformer, OneHotEncoder, StandardScaler
from sklearn.utils import Bunch

__all__ = ["get_data_home", "make_preprocessor"]

DATA_HOME_ENV = "SKDP_DATA"
"""Name of the environment variable that sets the default data home."""

_DEFAULT_DATA_HOME = "~/skdp_data"
_EMBEDDED_PACKAGE = "skdp.datasets.data"
_EMBEDDED_SUFFIX = ".gz"
_DOWNLOAD_TIMEOUT = 60.0
_CHUNK_SIZE = 1 << 16
_USER_AGENT = "skdp-datasets (Python urllib)"

RemoteFileMetadata = namedtuple("RemoteFileMetadata", ["filename", "urls", "checksum"])
RemoteFileMetadata.__doc__ = """A file of a dataset and where to download it from.

filename : str
    Name of the file inside ``<data_home>/<dataset>/``.
urls : tuple of str
    Public addresses of the file, tried in order.
checksum : str
    Expected SHA256 of the file, as 64 lower-case hexadecimal digits.
"""

# (resolved path, size, mtime_ns, expected checksum) of files verified in this
# process: checking a 4 MB file on every call of a loader would dominate the
# loaders' run time in test suites that load the same data many times.
_VERIFIED = set()


def get_data_home(data_home=None):
    """Return the path of the skdp data folder.

    The folder holds one sub-folder per dataset, for example
    ``<data_home>/adult/adult.data``. It is, in order of precedence:

    - the ``data_home`` argument, when it is not None;
    - the ``SKDP_DATA`` environment variable, when it is set and not empty;
    - ``~/skdp_data``.

    A leading ``~`` is expanded to the user's home folder. The folder is not
    created here: the loaders create it when they download a file, so that
    pointing ``data_home`` to a read-only folder of local copies works.

    :func:`fetch_adult` and :func:`fetch_german` only use this folder when
    ``data_home`` is given or ``SKDP_DATA`` holds their files; otherwise they
    read the compressed copies shipped with skdp.

    Parameters
    ----------
    data_home : str or path-like, default=None
        The path to the data folder. If None, the ``SKDP_DATA`` environment
        variable, else ``~/skdp_data``.

    Returns
    -------
    data_home : str
        The path to the data folder.

    Examples
    --------
    >>> import os
    >>> from skdp.datasets import get_data_home
    >>> get_data_home("/data/skdp")
    '/data/skdp'
    >>> os.path.basename(get_data_home())  # doctest: +SKIP
    'skdp_data'
    """
    if data_home is None:
        data_home = os.environ.get(DATA_HOME_ENV) or _DEFAULT_DATA_HOME
    elif not isinstance(data_home, (str, os.PathLike)):
        raise TypeError(
            f"data_home must be a str, a path-like object or None; got {type(data_home).__name__}."
        )
    return os.path.expanduser(os.fspath(data_home))


def _sha256(path):
    """SHA256 of the file at ``path`` as lower-case hexadecimal digits."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK_SIZE), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _where_hint(relative):
    return (
        f"Put the file there, or point the loader to a folder that holds '{relative}': pass "
        f"data_home=... or set the {DATA_HOME_ENV} environment variable."
    )


def _cache_key(path, remote):
    stat = path.stat()
    return (str(path.resolve()), stat.st_size, stat.st_mtime_ns, remote.checksum)


def _verify_local(path, remote):
    """Check the SHA256 of an existing local file, once per process and version."""
    key = _cache_key(path, remote)
    if key in _VERIFIED:
        return
    actual = _sha256(path)
    if actual != remote.checksum:
        raise OSError(
            f"The file {str(path)!r} has SHA256 checksum {actual} but {remote.checksum} was "
            "expected: it is corrupted or a different version of the data. Delete it to "
            f"download it again, or replace it with the original from {remote.urls[0]}."
        )
    _VERIFIED.add(key)


def _download(remote, path):
    """Download ``remote`` to ``path`` through a verified temporary file.

    Returns None on success and a string describing the failures when no
    address could be read. A checksum mismatch raises OSError. On failure no
    file is left behind, and the folders created for the file are removed.
    """
    created = []  # the folders this call creates, deepest first
    folder = path.parent
    while not folder.exists():
        created.append(folder)
        folder = folder.parent
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"cannot create the folder {str(path.parent)!r}: {exc}"
    done = False
    try:
        failure = _download_into(remote, path)
        done = failure is None
        return failure
    finally:
        if not done:
            for folder in created:
                try:
                    folder.rmdir()
                except OSError:
                    break


def _download_into(remote, path):
    failures = []
    for url in remote.urls:
        try:
            fd, tmp_name = tempfile.mkstemp(
                prefix=f".{remote.filename}.", suffix=".part", dir=path.parent
            )
        except OSError as exc:
            return f"cannot write into {str(path.parent)!r}: {exc}"
        tmp = Path(tmp_name)
        try:
            digest = hashlib.sha256()
            try:
                with os.fdopen(fd, "wb") as out:
                    request = Request(url, headers={"User-Agent": _USER_AGENT})
                    with urlopen(request, timeout=_DOWNLOAD_TIMEOUT) as response:
                        for chunk in iter(lambda: response.read(_CHUNK_SIZE), b""):
                            digest.update(chunk)
                            out.write(chunk)
            except (OSError, http.client.HTTPException, ValueError) as exc:
                # URLError, HTTPError, timeouts and connection resets are
                # OSErrors; a truncated response is an HTTPException.
                reason = exc.reason if isinstance(exc, URLError) else exc
                failures.append(f"{url} ({type(exc).__name__}: {reason})")
                continue
            actual = digest.hexdigest()
            if actual != remote.checksum:
                raise OSError(
                    f"The file downloaded from {url} has SHA256 checksum {actual} but "
                    f"{remote.checksum} was expected; it was not kept. The download may "
                    "have been corrupted, or the source may have changed: retry, or fetch "
                    f"the file by hand and put it at {str(path)!r}."
                )
            os.replace(tmp, path)
            _VERIFIED.add(_cache_key(path, remote))
            return None
        finally:
            if tmp.exists():
                tmp.unlink()
    return "; ".join(failures)


def _fetch_file(dataset, remote, *, data_home=None, download_if_missing=True):
    """Return the path of a verified local copy of one file of a dataset.

    Parameters
    ----------
    dataset : str
        Name of the dataset's folder inside the data home.
    remote : RemoteFileMetadata
        The file.
    data_home : str or path-like, default=None
        See :func:`get_data_home`.
    download_if_missing : bool, default=True
        Whether to download the file when it is not in the data home.

    Returns
    -------
    path : pathlib.Path
        Path of the verified file.

    Raises
    ------
    FileNotFoundError
        If the file is missing and cannot or may not be downloaded. The
        message names the full expected path.
    OSError
        If the file's SHA256 checksum is not the expected one.
    """
    relative = f"{dataset}/{remote.filename}"
    path = Path(get_data_home(data_home)) / dataset / remote.filename
    if path.is_file():
        _verify_local(path, remote)
        return path
    if not download_if_missing:
        raise FileNotFoundError(
            f"Dataset file '{relative}' was not found at {str(path)!r} and "
            f"download_if_missing=False. Download it from {remote.urls[0]}. "
            + _where_hint(relative)
        )
    failure = _download(remote, path)
    if failure is not None:
        raise FileNotFoundError(
            f"Dataset file '{relative}' was not found at {str(path)!r} and could not be "
            f"downloaded: {failure}. Download it by hand from {remote.urls[0]}. "
            + _where_hint(relative)
        )
    return path


def _embedded_data_dir():
    """Return the folder of the embedded copies (an importlib.resources Traversable)."""
    return importlib.resources.files(_EMBEDDED_PACKAGE)


def _read_embedded(remote):
    """Return the decompressed, verified embedded copy of a file, or None.

    Parameters
    ----------
    remote : RemoteFileMetadata
        The file; its copy is ``<filename>.gz`` in :func:`_embedded_data_dir`.

    Returns
    -------
    content : bytes or None
        The bytes of the original file, or None when skdp ships no copy of it.

    Raises
    ------
    OSError
        If the decompressed bytes do not have the file's published SHA256.
    """
    resource = _embedded_data_dir() / (remote.filename + _EMBEDDED_SUFFIX)
    if not resource.is_file():
        return None
    content = gzip.decompress(resource.read_bytes())
    actual = hashlib.sha256(content).hexdigest()
    if actual != remote.checksum:
        raise OSError(
            f"skdp's embedded copy of {remote.filename!r} ({str(resource)!r}) has SHA256 "
            f"checksum {actual} once decompressed but {remote.checksum} was expected: the "
            "installation is damaged. Reinstall skdp, or point the loader to a folder that "
            f"holds the original file from {remote.urls[0]}: pass data_home=... or set the "
            f"{DATA_HOME_ENV} environment variable."
        )
    return content


def _in_env_data_home(dataset, remote):
    """Whether the folder named by ``SKDP_DATA`` holds the file."""
    env_home = os.environ.get(DATA_HOME_ENV)
    if not env_home:
        return False
    return (Path(env_home).expanduser() / dataset / remote.filename).is_file()


def _load_file(dataset, remote, *, data_home=None, download_if_missing=True):
    """Return the verified content of one file of a dataset, and its origin.

    The file is read from, in order of precedence: ``data_home`` when it is
    not None (downloaded there if missing); the ``SKDP_DATA`` folder when it
    holds the file; skdp's embedded copy when there is one; the data home of
    :func:`get_data_home` (downloaded there if missing).

    Parameters
    ----------
    dataset : str
        Name of the dataset's folder inside the data home.
    remote : RemoteFileMetadata
        The file.
    data_home : str or path-like, default=None
        An explicit data folder; see :func:`get_data_home`.
    download_if_missing : bool, default=True
        Whether to download the file when it has to come from a data folder
        that does not hold it.

    Returns
    -------
    text : str
        The file's content decoded as UTF-8, line endings untouched.
    source : str
        Where the content was read from, for error messages.

    Raises
    ------
    FileNotFoundError
        If the file has to come from a data folder that does not hold it and
        it cannot or may not be downloaded.
    OSError
        If the file's SHA256 checksum is not the expected one.
    """
    if data_home is None and not _in_env_data_home(dataset, remote):
        content = _read_embedded(remote)
        if content is not None:
            return content.decode("utf-8"), f"<skdp embedded copy of {dataset}/{remote.filename}>"
    path = _fetch_file(
        dataset, remote, data_home=data_home, download_if_missing=download_if_missing
    )
    return path.read_bytes().decode("utf-8"), str(path)


def _check_pandas(caller):
    try:
        import pandas
    except ImportError as exc:  # pragma: no cover - pandas is installed in tests
        raise ImportError(
            f"{caller} requires pandas; install it with `pip install pandas`."
        ) from exc
    return pandas


def _check_bool(value, name):
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False; got {value!r}.")


def _check_option(value, name, options):
    if not isinstance(value, str) or value not in options:
        raise ValueError(f"{name} must be one of {list(options)}; got {value!r}.")


def _check_categories(columns, categories, source):
    """Raise if a categorical column holds a value its schema does not list."""
    for name, schema in categories.items():
        if name not in columns:
            continue
        values = columns[name]
        present = {v for v in set(values.tolist()) if isinstance(v, str)}
        unexpected = sorted(present - set(schema))
        if unexpected:
            raise ValueError(
                f"Column {name!r} of {source!r} holds values {unexpected[:5]} that are not in "
                f"its documented categories {list(schema)}; the file is not the expected one."
            )


def _make_bunch(
    *,
    columns,
    numeric,
    categorical,
    target,
    target_column,
    target_names,
    sensitive,
    sensitive_name,
    source_columns,
    include_sensitive_in_features,
    as_frame,
    categories,
    descr,
):
    """Assemble the Bunch returned by the loaders.

    ``columns`` maps every candidate feature, in order, to a 1-d array:
    float64 for the names in ``numeric``, object (str, or NaN for a missing
    value) for those in ``categorical``. ``source_columns`` are the columns
    the sensitive attribute is read or derived from; they are features only
    when ``include_sensitive_in_features`` is True.
    """
    feature_names = [
        name for name in columns if include_sensitive_in_features or name not in source_columns
    ]
    numeric_features = [name for name in feature_names if name in numeric]
    categorical_features = [name for name in feature_names if name in categorical]
    target = np.asarray(target, dtype=np.int64)
    sensitive = np.asarray(sensitive, dtype=object)
    feature_categories = {name: list(categories[name]) for name in categorical_features}

    if as_frame:
        pd = _check_pandas("as_frame=True")
        data = pd.DataFrame(
            {
                name: (
                    pd.Series(columns[name], dtype=np.float64)
                    if name in numeric
                    else pd.Series(pd.Categorical(columns[name], categories=categories[name]))
                )
                for name in feature_names
            }
        )
        target = pd.Series(target, name=target_column)
        sensitive = pd.Series(sensitive, name=sensitive_name, dtype=object)
        frame = data.copy()
        if sensitive_name not in frame.columns:
            frame[sensitive_name] = sensitive
        frame[target_column] = target
    else:
        data = np.empty((target.shape[0], len(feature_names)), dtype=object)
        for j, name in enumerate(feature_names):
            data[:, j] = columns[name]
        frame = None

    return Bunch(
        data=data,
        target=target,
        sensitive=sensitive,
        frame=frame,
        feature_names=feature_names,
        numeric_features=numeric_features,
        categorical_features=categorical_features,
        categories=feature_categories,
        target_names=list(target_names),
        sensitive_attribute=sensitive_name,
        DESCR=descr,
    )


def _scale_to_unit_interval(X, lower, upper):
    """Clip each column to ``[lower, upper]`` and map it affinely to ``[0, 1]``."""
    X = np.asarray(X, dtype=np.float64)
    return (np.clip(X, lower, upper) - lower) / (upper - lower)


def _check_bounds(bounds, numeric_features):
    if not hasattr(bounds, "items"):
        raise ValueError(
            "bounds must be 'data' or a dict mapping every numeric feature to a (lower, upper) "
            f"pair; got {bounds!r}."
        )
    unknown = sorted(set(bounds) - set(numeric_features))
    if unknown:
        raise ValueError(
            f"bounds has keys {unknown} that are not numeric features; the numeric features "
            f"are {numeric_features}."
        )
    missing = [name for name in numeric_features if name not in bounds]
    if missing:
        raise ValueError(
            f"bounds has no (lower, upper) pair for the numeric features {missing}; give one "
            "for every numeric feature."
        )
    lower, upper = [], []
    for name in numeric_features:
        pair = bounds[name]
        try:
            low, high = pair
        except (TypeError, ValueError):
            raise ValueError(
                f"bounds[{name!r}] must be a (lower, upper) pair; got {pair!r}."
            ) from None
        if not (
            isinstance(low, Real)
            and isinstance(high, Real)
            and np.isfinite(low)
            and np.isfinite(high)
            and low < high
        ):
            raise ValueError(
                f"bounds[{name!r}] must be finite numbers with lower < upper; got {pair!r}."
            )
        lower.append(float(low))
        upper.append(float(high))
    return np.array(lower), np.array(upper)


def make_preprocessor(bunch, *, bounds="data", categories="data", epsilon=None, delta=1e-6,
                      random_state=None):
    """Return the standard, unfitted preprocessing for a loaded dataset.

    A :class:`~sklearn.compose.ColumnTransformer` that scales the bunch's
    ``numeric_features`` and one-hot encodes its ``categorical_features``
    (``OneHotEncoder(handle_unknown="ignore", sparse_output=False)``, dense
    output). With the defaults it is the benchmark convention of the papers
    behind skdp (numeric columns standardized, categoricals one-hot encoded;
    about 100 inputs for Adult).

    .. warning::
       With ``bounds="data"`` the numeric columns go through a
       :class:`~sklearn.preprocessing.StandardScaler`, whose means and
       standard deviations are computed from the training data *without
       privacy*; with ``categories="data"`` the encoder's vocabulary (which
       categories occur) is likewise read from the data. Neither is covered
       by the privacy guarantee of a DP estimator fitted afterwards. For an
       end-to-end guarantee, pass public ``bounds`` (ranges fixed without
       looking at the private data, e.g. from a data dictionary or domain
       knowledge) and ``categories="schema"``: the transformer then learns
       nothing from the data.

    Parameters
    ----------
    bunch : Bunch
        A dataset returned by :func:`fetch_adult`, :func:`fetch_compas` or
        :func:`fetch_german`, with ``as_frame`` True (columns are selected by
        name) or False (by position).
    bounds : "data" or dict, default="data"
        ``"data"``: standardize the numeric features with a
        :class:`~sklearn.preprocessing.StandardScaler`. A dict mapping *every*
        numeric feature to a public ``(lower, upper)`` pair: clip each numeric
        feature to its range and map the range affinely onto ``[0, 1]`` with a
        stateless :class:`~sklearn.preprocessing.FunctionTransformer`.
    categories : {"data", "schema"}, default="data"
        ``"data"``: the one-hot encoder learns the categories present in the
        data it is fitted on. ``"schema"``: it uses ``bunch.categories``, the
        categories listed in the dataset's public documentation. Values not in
        the list (and missing values) are then encoded as all zeros.

    epsilon : float or None, default=None
        None: the scikit-learn steps above. A float: private steps from
        :mod:`skdp.preprocessing` whose privacy adds up to this budget
        (:func:`skdp.model_selection.spent` composes them with the model's). The
        numeric features go through a
        :class:`~skdp.preprocessing.DPStandardScaler` clipped to the public
        ``bounds`` (a dict is then required: ranges read from the data would
        not be private). The categorical features go through a
        :class:`~skdp.preprocessing.DPOneHotEncoder`: with
        ``categories="schema"`` it uses the public categories and spends
        nothing, so the scaler gets all of ``epsilon``; with
        ``categories="data"`` it keeps the documented categories that are
        frequent enough in the data, chosen privately with ``epsilon / 2``
        (the scaler gets the other half).
    delta : float, default=1e-6
        Delta of each private step (``epsilon`` given only).
    random_state : int, RandomState instance or None, default=None
        Seeds the private steps' noise (``epsilon`` given only); None draws
        it from the operating system's CSPRNG.

    Returns
    -------
    preprocessor : sklearn.compose.ColumnTransformer
        Unfitted; the numeric block comes first, then the one-hot block.

    Examples
    --------
    >>> from skdp.datasets import fetch_adult, make_preprocessor
    >>> adult = fetch_adult(as_frame=True)
    >>> make_preprocessor(adult).fit_transform(adult.data).shape
    (30162, 102)

    Public ranges, so that the preprocessing learns nothing from the data:

    >>> bounds = {"age": (16, 100), "fnlwgt": (0, 1.5e6), "education-num": (1, 16),
    ...           "capital-gain": (0, 1e5), "capital-loss": (0, 5e3),
    ...           "hours-per-week": (0, 100)}
    >>> pre = make_preprocessor(adult, bounds=bounds, categories="schema")
    >>> pre.fit_transform(adult.data).shape
    (30162, 103)

    Private preprocessing, covered by an epsilon of its own:

    >>> from skdp.model_selection import spent
    >>> pre = make_preprocessor(adult, bounds=bounds, categories="schema", epsilon=0.1,
    ...                         random_state=0).fit(adult.data)
    >>> round(spent(pre).epsilon, 2)
    0.1
    """
    for key in ("data", "numeric_features", "categorical_features", "feature_names"):
        if key not in bunch:
            raise ValueError(
                f"bunch has no {key!r}; pass a dataset returned by one of the skdp.datasets "
                "fetch_* loaders."
            )
    _check_option(categories, "categories", ("data", "schema"))
    numeric = list(bunch.numeric_features)
    categorical = list(bunch.categorical_features)
    if hasattr(bunch.data, "columns"):
        numeric_columns, categorical_columns = numeric, categorical
    else:
        position = {name: j for j, name in enumerate(bunch.feature_names)}
        numeric_columns = [position[name] for name in numeric]
        categorical_columns = [position[name] for name in categorical]

    if epsilon is not None:
        return _private_preprocessor(
            bunch, numeric, categorical, numeric_columns, categorical_columns, bounds,
            categories, epsilon, delta, random_state,
        )
    if isinstance(bounds, str):
        _check_option(bounds, "bounds", ("data",))
        scaler = StandardScaler()
    else:
        lower, upper = _check_bounds(bounds, numeric)
        scaler = FunctionTransformer(
            _scale_to_unit_interval,
            kw_args={"lower": lower, "upper": upper},
            feature_names_out="one-to-one",
        )

    if categories == "schema":
        schema = bunch.get("categories")
        if schema is None or any(name not in schema for name in categorical):
            raise ValueError(
                "categories='schema' needs bunch.categories with the categories of every "
                "categorical feature; this bunch has none."
            )
        encoder = OneHotEncoder(
            categories=[list(schema[name]) for name in categorical],
            handle_unknown="ignore",
            sparse_output=False,
        )
    else:
        encoder = OneHotEncoder(handle_unknown="ignore", sparse_output=False)

    transformers = []
    if numeric_columns:
        transformers.append(("num", scaler, numeric_columns))
    if categorical_columns:
        transformers.append(("cat", encoder, categorical_columns))
    return ColumnTransformer(transformers, remainder="drop", sparse_threshold=0.0)


def _private_preprocessor(bunch, numeric, categorical, numeric_columns, categorical_columns,
                          bounds, categories, epsilon, delta, random_state):
    """The private variant of :func:`make_preprocessor` (``epsilon`` given)."""
    from ..preprocessing import DPOneHotEncoder, DPStandardScaler

    if isinstance(epsilon, bool) or not isinstance(epsilon, Real) or not (
        np.isfinite(epsilon) and epsilon > 0
    ):
        raise ValueError(f"epsilon must be a positive finite number or None; got {epsilon!r}.")
    if isinstance(delta, bool) or not isinstance(delta, Real) or not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1); got {delta!r}.")
    if numeric and isinstance(bounds, str):
        raise ValueError(
            f"bounds={bounds!r} reads the ranges of the numeric features from the private "
            "data, which no epsilon covers. With epsilon given, pass bounds as a dict of "
            "public (lower, upper) pairs for every numeric feature (from a data dictionary "
            "or domain knowledge)."
        )
    schema = bunch.get("categories")
    if categorical and (schema is None or any(name not in schema for name in categorical)):
        raise ValueError(
            "A private preprocessor needs bunch.categories with the documented categories of "
            "every categorical feature (as candidates or as the public schema); this bunch "
            "has none."
        )
    private_categories = bool(categorical) and categories == "data"
    split = bool(numeric) and private_categories
    transformers = []
    if numeric_columns:
        lower, upper = _check_bounds(bounds, numeric)
        scaler = DPStandardScaler(
            epsilon=epsilon / 2 if split else epsilon, delta=delta, bounds=(lower, upper),
            random_state=random_state,
        )
        transformers.append(("num", scaler, numeric_columns))
    if categorical_columns:
        lists = [list(schema[name]) for name in categorical]
        if private_categories:
            encoder = DPOneHotEncoder(
                categories="private", candidate_categories=lists,
                epsilon=epsilon / 2 if split else epsilon, delta=delta,
                random_state=random_state,
            )
        else:
            encoder = DPOneHotEncoder(categories=lists)
        transformers.append(("cat", encoder, categorical_columns))
    return ColumnTransformer(transformers, remainder="drop", sparse_threshold=0.0)
