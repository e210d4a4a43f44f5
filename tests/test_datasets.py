"""skdp.datasets: loaders, embedded copies, checksums, download, data home,
preprocessing, and the synthetic generator.

Adult and German credit are read from the copies shipped in the package (or
from ``$SKDP_DATA`` when it is set), so their tests always run. COMPAS is not
shipped: its tests read ``$SKDP_DATA`` or ``../shared/datasets`` and skip
without it, except under CI (``CI`` set), where a missing copy fails. No test
touches the network: every test that could reach the downloader replaces
``urlopen``.
"""

import gzip
import hashlib
import io
import os
from pathlib import Path
from urllib.error import URLError

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.utils import Bunch

import skdp.datasets._base as base
from skdp.datasets import (
    fetch_adult,
    fetch_compas,
    fetch_german,
    get_data_home,
    make_fair_classification,
    make_preprocessor,
)
from skdp.datasets._adult import ADULT_TEST, ADULT_TRAIN
from skdp.datasets._compas import COMPAS
from skdp.datasets._german import GERMAN

pd = pytest.importorskip("pandas")

# The SHA256 of the original files, as published in ../shared/datasets/README.md.
PUBLISHED_SHA256 = {
    "adult.data": "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d",
    "adult.test": "a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05",
    "german.data": "b21f3d81db8071257d5ff1deaeba1fd4303b62712e6fcc9715c7a86202cb5871",
}


def _shared_datasets():
    env = os.environ.get("SKDP_DATA")
    if env:
        return Path(env).expanduser()
    return Path(__file__).resolve().parents[2] / "shared" / "datasets"


DATA = _shared_datasets()
GERMAN_LINE = "A11 6 A34 A43 1169 A65 A75 4 A93 A101 4 A121 67 A143 A152 2 A173 1 A192 A201 1\n"


def _in_ci():
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _require(*relative):
    """Return the folder of the local copies; skip (fail under CI) without them."""
    missing = [name for name in relative if not (DATA / name).is_file()]
    if missing:
        message = (
            f"local dataset copies {missing} not found under {DATA} (set SKDP_DATA to the "
            "folder holding compas/ to run these tests)"
        )
        if _in_ci():
            pytest.fail(message + "; CI is set, so a missing data set is an error")
        pytest.skip(message)
    return DATA


def _embedded_bytes(filename):
    """The decompressed bytes of the copy of ``filename`` shipped with skdp."""
    return gzip.decompress((base._embedded_data_dir() / f"{filename}.gz").read_bytes())


@pytest.fixture
def no_network(monkeypatch):
    """Make any download attempt fail as it would offline, and count attempts."""
    calls = []

    def offline(request, *args, **kwargs):
        calls.append(getattr(request, "full_url", request))
        raise URLError("network disabled in tests")

    monkeypatch.setattr(base, "urlopen", offline)
    return calls


def _serve(monkeypatch, payload):
    """Make urlopen return ``payload`` for any address; return the list of calls."""
    calls = []

    def fake_urlopen(request, *args, **kwargs):
        calls.append(request.full_url)
        return io.BytesIO(payload)

    monkeypatch.setattr(base, "urlopen", fake_urlopen)
    return calls


# --------------------------------------------------------------------------- Adult


# Without data_home the loaders read $SKDP_DATA when it holds the files, else
# the embedded copies: both are the same bytes. Loading Adult takes a fraction
# of a second: the common variants are loaded once per module.
@pytest.fixture(scope="module")
def adult():
    return fetch_adult()


@pytest.fixture(scope="module")
def adult_frame():
    return fetch_adult(as_frame=True)


@pytest.fixture(scope="module")
def adult_frame_with_missing():
    return fetch_adult(as_frame=True, drop_missing=False)


def _check_adult(bunch, n_rows):
    assert bunch.data.shape == (n_rows, 13)
    assert bunch.target.shape == bunch.sensitive.shape == (n_rows,)
    assert bunch.target.dtype == np.int64
    assert set(np.unique(bunch.target)) == {0, 1}
    assert 0.23 < bunch.target.mean() < 0.26
    assert set(bunch.sensitive) == {"Female", "Male"}
    assert 0.31 < np.mean(bunch.sensitive == "Female") < 0.35


def test_adult_default_shape(adult):
    _check_adult(adult, 30162)
    assert adult.frame is None


@pytest.mark.parametrize(
    "subset, drop_missing, n_rows",
    [("train", False, 32561), ("test", False, 16281), ("test", True, 15060)],
)
def test_adult_shapes(no_network, subset, drop_missing, n_rows):
    _check_adult(fetch_adult(subset=subset, drop_missing=drop_missing), n_rows)
    assert not no_network


def test_adult_all_is_train_then_test(adult):
    both = fetch_adult(subset="all")
    _check_adult(both, 30162 + 15060)
    np.testing.assert_array_equal(both.data[:30162], adult.data)
    np.testing.assert_array_equal(both.target[:30162], adult.target)


def test_adult_columns_and_values(adult):
    assert "sex" not in adult.feature_names
    assert adult.numeric_features == [
        "age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"
    ]
    assert adult.categorical_features == [
        "workclass", "education", "marital-status", "occupation", "relationship", "race",
        "native-country",
    ]
    assert sorted(adult.feature_names) == sorted(
        adult.numeric_features + adult.categorical_features
    )
    assert adult.target_names == ["<=50K", ">50K"]
    assert adult.sensitive_attribute == "sex"
    # First row of adult.data, whitespace stripped.
    assert adult.data[0].tolist() == [
        39.0, "State-gov", 77516.0, "Bachelors", 13.0, "Never-married", "Adm-clerical",
        "Not-in-family", "White", 2174.0, 0.0, 40.0, "United-States",
    ]
    assert adult.target[0] == 0
    # Every categorical value is one of the documented categories.
    for j, name in enumerate(adult.feature_names):
        if name in adult.categorical_features:
            assert set(adult.data[:, j]) <= set(adult.categories[name])
    assert "fnlwgt" in adult.DESCR


def test_adult_as_frame(adult_frame, adult):
    assert isinstance(adult_frame.data, pd.DataFrame)
    assert list(adult_frame.data.columns) == adult_frame.feature_names
    assert isinstance(adult_frame.target, pd.Series) and adult_frame.target.name == "income"
    assert isinstance(adult_frame.sensitive, pd.Series) and adult_frame.sensitive.name == "sex"
    assert list(adult_frame.frame.columns) == adult_frame.feature_names + ["sex", "income"]
    assert adult_frame.frame.shape == (30162, 15)
    assert adult_frame.data["workclass"].dtype == "category"
    assert adult_frame.data["age"].dtype == np.float64
    np.testing.assert_array_equal(adult_frame.target.to_numpy(), adult.target)
    np.testing.assert_array_equal(adult_frame.sensitive.to_numpy(), adult.sensitive)
    np.testing.assert_array_equal(adult_frame.data["age"].to_numpy(), adult.data[:, 0])


def test_adult_missing_values_kept_as_nan(adult_frame_with_missing):
    data = adult_frame_with_missing.data
    assert data.shape == (32561, 13)
    counts = data.isna().sum()
    assert set(counts[counts > 0].index) == {"workclass", "occupation", "native-country"}
    assert not (data["workclass"] == "?").any()


def test_adult_test_labels_lose_their_period():
    test = fetch_adult(subset="test", as_frame=True)
    # The test file writes "<=50K." and ">50K."; both map to a class.
    assert test.target.value_counts().to_dict() == {0: 11360, 1: 3700}


def test_adult_sensitive_options():
    with_sex = fetch_adult(include_sensitive_in_features=True)
    assert with_sex.data.shape == (30162, 14)
    assert "sex" in with_sex.categorical_features
    j = with_sex.feature_names.index("sex")
    np.testing.assert_array_equal(with_sex.data[:, j], with_sex.sensitive)

    by_race = fetch_adult(sensitive_attribute="race")
    assert "race" not in by_race.feature_names and "sex" in by_race.feature_names
    assert set(by_race.sensitive) == {
        "White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"
    }


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"subset": "validation"}, "subset"),
        ({"sensitive_attribute": "age"}, "sensitive_attribute"),
        ({"as_frame": "yes"}, "as_frame"),
    ],
)
def test_adult_bad_arguments(tmp_path, no_network, kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        fetch_adult(data_home=tmp_path, **kwargs)
    assert not no_network


def test_make_preprocessor_adult(adult_frame, adult, adult_frame_with_missing):
    Z_frame = make_preprocessor(adult_frame).fit_transform(adult_frame.data)
    Z_array = make_preprocessor(adult).fit_transform(adult.data)
    assert Z_frame.shape == (30162, 102)  # "about 100 inputs"
    np.testing.assert_allclose(Z_frame, Z_array)
    np.testing.assert_allclose(Z_frame[:, :6].mean(axis=0), 0, atol=1e-10)
    np.testing.assert_allclose(Z_frame[:, :6].std(axis=0), 1, atol=1e-10)
    # With drop_missing=False, NaN is a category of its own.
    data = adult_frame_with_missing.data
    n_inputs = 6 + sum(
        data[c].nunique(dropna=False) for c in adult_frame_with_missing.categorical_features
    )
    assert make_preprocessor(adult_frame_with_missing).fit_transform(data).shape[1] == n_inputs


def test_make_preprocessor_public_bounds_and_schema(adult_frame):
    adult = adult_frame
    bounds = {
        "age": (16, 100), "fnlwgt": (0, 1e6), "education-num": (1, 16),
        "capital-gain": (0, 1e5), "capital-loss": (0, 5e3), "hours-per-week": (0, 100),
    }
    pre = make_preprocessor(adult, bounds=bounds, categories="schema")
    Z = pre.fit_transform(adult.data)
    n_schema = sum(len(adult.categories[c]) for c in adult.categorical_features)
    assert Z.shape == (30162, 6 + n_schema)
    assert Z.min() >= 0 and Z.max() <= 1
    # Nothing learned from the data: fitting on one row gives the same transform.
    one_row = make_preprocessor(adult, bounds=bounds, categories="schema").fit(adult.data[:1])
    np.testing.assert_allclose(one_row.transform(adult.data), Z)
    age = adult.data["age"].to_numpy()
    np.testing.assert_allclose(Z[:, 0], (np.clip(age, 16, 100) - 16) / 84)

    with pytest.raises(ValueError, match="hours-per-week"):
        make_preprocessor(adult, bounds={k: v for k, v in bounds.items() if k != "hours-per-week"})
    with pytest.raises(ValueError, match="not numeric features"):
        make_preprocessor(adult, bounds={**bounds, "sex": (0, 1)})
    with pytest.raises(ValueError, match="lower < upper"):
        make_preprocessor(adult, bounds={**bounds, "age": (50, 10)})
    with pytest.raises(ValueError, match="bounds"):
        make_preprocessor(adult, bounds="minmax")
    with pytest.raises(ValueError, match="categories"):
        make_preprocessor(adult, categories="auto")
    with pytest.raises(ValueError, match="fetch_"):
        make_preprocessor(Bunch(data=np.zeros((2, 2))))


# --------------------------------------------------------------------------- COMPAS


@pytest.fixture(scope="module")
def compas_home():
    return _require("compas/compas-scores-two-years.csv")


def test_compas_default(compas_home, no_network):
    compas = fetch_compas(data_home=compas_home)
    # ProPublica's filters keep 6,172 of the 7,214 rows.
    assert compas.data.shape == (6172, 7)
    assert compas.feature_names == [
        "age", "priors_count", "juv_fel_count", "juv_misd_count", "juv_other_count",
        "c_charge_degree", "sex",
    ]
    assert "race" not in compas.feature_names
    assert "decile_score" not in compas.feature_names
    assert compas.categorical_features == ["c_charge_degree", "sex"]
    assert compas.target.sum() == 2809  # 45.5% recidivism, as in ProPublica's analysis
    values, counts = np.unique(compas.sensitive, return_counts=True)
    assert dict(zip(values, counts)) == {
        "African-American": 3175, "Caucasian": 2103, "Hispanic": 509, "Other": 343,
        "Asian": 31, "Native American": 11,
    }
    assert not no_network


def test_compas_options(compas_home):
    compas = fetch_compas(
        data_home=compas_home, sensitive_attribute="sex", include_decile_score=True, as_frame=True
    )
    assert "race" in compas.feature_names and "sex" not in compas.feature_names
    assert "decile_score" in compas.numeric_features
    assert compas.data.shape == (6172, 8)
    assert compas.sensitive.name == "sex"
    assert set(compas.sensitive) == {"Male", "Female"}
    assert compas.data["decile_score"].between(1, 10).all()
    assert list(compas.frame.columns) == compas.feature_names + ["sex", "two_year_recid"]
    kept = fetch_compas(data_home=compas_home, include_sensitive_in_features=True)
    assert kept.feature_names[-1] == "race"
    assert make_preprocessor(kept).fit_transform(kept.data).shape == (6172, 5 + 2 + 2 + 6)


# --------------------------------------------------------------------------- German


def test_german_default(no_network):
    german = fetch_german()
    assert german.data.shape == (1000, 19)
    assert german.target.sum() == 700
    assert german.target_names == ["bad", "good"]
    assert "personal_status" not in german.feature_names  # it determines sex
    assert len(german.numeric_features) == 7 and len(german.categorical_features) == 12
    values, counts = np.unique(german.sensitive, return_counts=True)
    assert dict(zip(values, counts)) == {"Female": 310, "Male": 690}
    # First line: A11 6 A34 A43 1169 A65 A75 4 A93 A101 4 A121 67 ... class 1.
    first = dict(zip(german.feature_names, german.data[0]))
    assert first["checking_status"] == "<0 DM"
    assert first["duration_months"] == 6
    assert first["credit_amount"] == 1169
    assert first["age"] == 67
    assert german.sensitive[0] == "Male" and german.target[0] == 1
    assert german.sensitive[1] == "Female" and german.target[1] == 0
    assert not no_network


def test_german_age_and_frame():
    german = fetch_german(sensitive_attribute="age", as_frame=True)
    assert "age" not in german.feature_names and "personal_status" in german.feature_names
    assert german.sensitive.name == "age_group"
    assert german.sensitive.value_counts().to_dict() == {"age>=25": 851, "age<25": 149}
    assert list(german.frame.columns) == german.feature_names + ["age_group", "credit"]
    kept = fetch_german(include_sensitive_in_features=True)
    assert kept.data.shape == (1000, 20) and "personal_status" in kept.feature_names
    Z = make_preprocessor(german, categories="schema").fit_transform(german.data)
    assert Z.shape[0] == 1000 and np.isfinite(Z).all()


# ------------------------------------------------------------------- embedded copies


@pytest.mark.parametrize("remote", [ADULT_TRAIN, ADULT_TEST, GERMAN], ids=lambda r: r.filename)
def test_embedded_copies_are_the_published_files(remote):
    content = _embedded_bytes(remote.filename)
    assert hashlib.sha256(content).hexdigest() == PUBLISHED_SHA256[remote.filename]
    assert remote.checksum == PUBLISHED_SHA256[remote.filename]
    assert base._read_embedded(remote) == content


def test_embedded_copies_are_small_and_attributed():
    folder = base._embedded_data_dir()
    shipped = sorted(f.name for f in folder.iterdir() if f.name.endswith(".gz"))
    assert shipped == ["adult.data.gz", "adult.test.gz", "german.data.gz"]
    assert sum(len((folder / name).read_bytes()) for name in shipped) < 2_000_000
    notice = (folder / "README.txt").read_text(encoding="utf-8")
    assert notice.count("CC BY 4.0") >= 2
    assert "Becker" in notice and "Hofmann" in notice
    # COMPAS is not CC BY: no copy is shipped.
    assert base._read_embedded(COMPAS) is None


@pytest.fixture
def offline_fresh_user(tmp_path, monkeypatch, no_network):
    """No SKDP_DATA, an empty home folder, no network: a fresh clone's situation."""
    monkeypatch.delenv("SKDP_DATA", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def test_adult_and_german_load_without_env_var_or_network(offline_fresh_user, no_network):
    assert fetch_adult(subset="train", drop_missing=False).data.shape[0] == 32_561
    assert fetch_adult(subset="test", drop_missing=False).data.shape[0] == 16_281
    assert fetch_adult(download_if_missing=False).data.shape == (30_162, 13)
    assert fetch_german().data.shape[0] == 1_000
    assert not no_network
    assert not list(offline_fresh_user.iterdir())  # nothing written to ~/skdp_data


def test_compas_without_local_copy_needs_the_download(offline_fresh_user, no_network):
    with pytest.raises(FileNotFoundError, match="network disabled") as info:
        fetch_compas()
    expected = offline_fresh_user / "skdp_data" / "compas" / "compas-scores-two-years.csv"
    assert str(expected) in str(info.value)
    assert no_network == list(COMPAS.urls)


def test_skdp_data_takes_precedence_over_the_embedded_copy(tmp_path, monkeypatch, no_network):
    (tmp_path / "german").mkdir()
    (tmp_path / "german" / "german.data").write_text(GERMAN_LINE)
    monkeypatch.setenv("SKDP_DATA", str(tmp_path))
    with pytest.raises(OSError, match="SHA256") as info:
        fetch_german()
    assert str(tmp_path / "german" / "german.data") in str(info.value)
    assert not no_network


def test_skdp_data_without_the_files_falls_back_to_the_embedded_copy(
    tmp_path, monkeypatch, no_network
):
    monkeypatch.setenv("SKDP_DATA", str(tmp_path))
    assert fetch_german().data.shape == (1000, 19)
    assert fetch_adult(subset="test").data.shape == (15_060, 13)
    assert not no_network
    assert not list(tmp_path.iterdir())


def test_explicit_data_home_is_not_replaced_by_the_embedded_copy(tmp_path, no_network):
    with pytest.raises(FileNotFoundError):
        fetch_german(data_home=tmp_path)
    assert no_network == list(GERMAN.urls)


def test_damaged_embedded_copy_is_rejected(tmp_path, monkeypatch, no_network):
    monkeypatch.delenv("SKDP_DATA", raising=False)
    (tmp_path / "german.data.gz").write_bytes(gzip.compress(GERMAN_LINE.encode()))
    monkeypatch.setattr(base, "_embedded_data_dir", lambda: tmp_path)
    with pytest.raises(OSError, match="embedded copy of 'german.data'.*SHA256"):
        fetch_german()
    assert not no_network


def test_embedded_and_local_copies_give_the_same_data(tmp_path, monkeypatch):
    monkeypatch.delenv("SKDP_DATA", raising=False)
    _copy_german(tmp_path)
    embedded, local = fetch_german(), fetch_german(data_home=tmp_path)
    np.testing.assert_array_equal(embedded.data, local.data)
    np.testing.assert_array_equal(embedded.target, local.target)
    np.testing.assert_array_equal(embedded.sensitive, local.sensitive)


# ------------------------------------------------------ data home, checksums, download


def test_get_data_home(tmp_path, monkeypatch):
    monkeypatch.delenv("SKDP_DATA", raising=False)
    assert get_data_home() == os.path.join(os.path.expanduser("~"), "skdp_data")
    monkeypatch.setenv("SKDP_DATA", str(tmp_path))
    assert get_data_home() == str(tmp_path)
    assert get_data_home(tmp_path / "other") == str(tmp_path / "other")
    assert get_data_home("~/x") == os.path.join(os.path.expanduser("~"), "x")
    monkeypatch.setenv("SKDP_DATA", "")
    assert get_data_home().endswith("skdp_data")
    with pytest.raises(TypeError, match="data_home"):
        get_data_home(3)


def _copy_german(home):
    (home / "german").mkdir(parents=True, exist_ok=True)
    (home / "german" / "german.data").write_bytes(_embedded_bytes("german.data"))


def test_skdp_data_env_var_is_honoured(tmp_path, monkeypatch, no_network):
    _copy_german(tmp_path)
    monkeypatch.setenv("SKDP_DATA", str(tmp_path))
    assert fetch_german().data.shape == (1000, 19)
    assert not no_network


def test_corrupted_local_file_is_rejected(tmp_path, no_network):
    (tmp_path / "german").mkdir()
    bad = tmp_path / "german" / "german.data"
    bad.write_text(GERMAN_LINE)
    with pytest.raises(OSError, match="SHA256") as info:
        fetch_german(data_home=tmp_path)
    assert str(bad) in str(info.value)
    assert bad.exists()  # a user's file is never deleted
    assert not no_network


def test_local_verification_is_cached_and_redone_on_change(tmp_path, monkeypatch):
    _copy_german(tmp_path)
    hashed = []
    real_sha256 = base._sha256
    monkeypatch.setattr(base, "_sha256", lambda path: hashed.append(path) or real_sha256(path))
    fetch_german(data_home=tmp_path)
    fetch_german(data_home=tmp_path)
    assert len(hashed) == 1
    # Corrupt the file (new size and mtime): verified again, and rejected.
    path = tmp_path / "german" / "german.data"
    with open(path, "ab") as f:
        f.write(GERMAN_LINE.encode())
    with pytest.raises(OSError, match="SHA256"):
        fetch_german(data_home=tmp_path)
    assert len(hashed) == 2


def test_missing_file_offline_names_the_expected_path(tmp_path, no_network):
    with pytest.raises(FileNotFoundError) as info:
        fetch_german(data_home=tmp_path)
    message = str(info.value)
    assert str(tmp_path / "german" / "german.data") in message
    assert "SKDP_DATA" in message and "data_home" in message
    assert "network disabled" in message
    assert no_network == list(GERMAN.urls)
    assert not (tmp_path / "german").exists()  # no partial file or empty folder left
    # Folders that existed before are kept.
    (tmp_path / "german").mkdir()
    with pytest.raises(FileNotFoundError):
        fetch_german(data_home=tmp_path)
    assert not list((tmp_path / "german").iterdir())
    with pytest.raises(FileNotFoundError):
        fetch_german(data_home=tmp_path / "a" / "b")
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize(
    "loader, relative",
    [
        (fetch_adult, "adult/adult.data"),
        (fetch_compas, "compas/compas-scores-two-years.csv"),
        (fetch_german, "german/german.data"),
    ],
)
def test_missing_file_without_download(tmp_path, no_network, loader, relative):
    with pytest.raises(FileNotFoundError, match="download_if_missing=False") as info:
        loader(data_home=tmp_path, download_if_missing=False)
    assert str(tmp_path / relative) in str(info.value)
    assert "SKDP_DATA" in str(info.value)
    assert not no_network
    assert not (tmp_path / relative.split("/")[0]).exists()


def test_adult_test_file_missing_is_reported(tmp_path, no_network):
    (tmp_path / "adult").mkdir()
    (tmp_path / "adult" / "adult.data").write_bytes(_embedded_bytes("adult.data"))
    with pytest.raises(FileNotFoundError, match="adult.test"):
        fetch_adult(data_home=tmp_path, subset="all")


def test_download_with_valid_checksum(tmp_path, monkeypatch):
    calls = _serve(monkeypatch, _embedded_bytes("german.data"))
    home = tmp_path / "new" / "home"  # created on download
    german = fetch_german(data_home=home)
    assert calls == list(GERMAN.urls)
    assert german.data.shape == (1000, 19)
    path = home / "german" / "german.data"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == GERMAN.checksum
    assert sorted(p.name for p in path.parent.iterdir()) == ["german.data"]
    # The next call reads the local copy.
    fetch_german(data_home=home)
    assert len(calls) == 1


def test_download_with_bad_checksum_keeps_nothing(tmp_path, monkeypatch):
    _serve(monkeypatch, _embedded_bytes("german.data")[:-10])
    with pytest.raises(OSError, match="SHA256 checksum") as info:
        fetch_german(data_home=tmp_path)
    assert "not kept" in str(info.value)
    assert not (tmp_path / "german").exists()


def test_download_uses_the_published_sources():
    assert ADULT_TRAIN.urls[0].startswith("https://archive.ics.uci.edu/")
    assert ADULT_TEST.urls[0].endswith("/adult/adult.test")
    assert GERMAN.urls[0].endswith("/statlog/german/german.data")
    assert COMPAS.urls[0].startswith(
        "https://raw.githubusercontent.com/propublica/compas-analysis/"
    )
    for remote in (ADULT_TRAIN, ADULT_TEST, COMPAS, GERMAN):
        assert len(remote.checksum) == 64


# --------------------------------------------------------------- synthetic generator


def test_make_fair_classification_shapes_and_determinism():
    X, y, groups = make_fair_classification(n_samples=300, n_features=5, random_state=0)
    assert X.shape == (300, 5) and X.dtype == np.float64
    assert y.shape == groups.shape == (300,)
    assert set(np.unique(y)) == {0, 1} and set(np.unique(groups)) == {0, 1}
    again = make_fair_classification(n_samples=300, n_features=5, random_state=0)
    for a, b in zip((X, y, groups), again):
        np.testing.assert_array_equal(a, b)
    other = make_fair_classification(n_samples=300, n_features=5, random_state=1)
    assert not np.array_equal(X, other[0])
    rng = np.random.RandomState(3)
    assert make_fair_classification(random_state=rng)[0].shape == (1000, 10)


def test_make_fair_classification_frame():
    X, y, groups = make_fair_classification(n_samples=50, n_features=3, return_frame=True,
                                            random_state=0)
    assert list(X.columns) == ["x0", "x1", "x2"]
    assert y.name == "y" and groups.name == "group"
    X2, y2, g2 = make_fair_classification(n_samples=50, n_features=3, random_state=0)
    np.testing.assert_array_equal(X.to_numpy(), X2)


@pytest.mark.parametrize("weights, expected", [([0.8, 0.2], [800, 200]), ([3, 1], [750, 250])])
def test_make_fair_classification_group_weights(weights, expected):
    _, _, groups = make_fair_classification(group_weights=weights, random_state=0)
    np.testing.assert_array_equal(np.bincount(groups), expected)
    _, _, groups = make_fair_classification(
        n_samples=1001, n_groups=3, group_weights=[0.5, 0.3, 0.2], n_features=4, random_state=0
    )
    assert abs(np.bincount(groups) - np.array([500.5, 300.3, 200.2])).max() <= 1


def test_label_group_correlation_controls_base_rates():
    for rho in (0.0, 0.3, 0.8):
        X, y, groups = make_fair_classification(
            n_samples=2000, label_group_correlation=rho, random_state=0
        )
        rates = [y[groups == g].mean() for g in (0, 1)]
        assert rates[1] - rates[0] == pytest.approx(rho, abs=1e-3)
        # Two balanced groups: rho is the correlation between y and the group.
        assert np.corrcoef(y, groups)[0, 1] == pytest.approx(rho, abs=1e-3)


def test_label_group_correlation_multiclass():
    _, y, groups = make_fair_classification(
        n_samples=3000, n_classes=3, n_groups=3, n_features=6, label_group_correlation=0.6,
        random_state=0,
    )
    for g in range(3):
        dist = np.bincount(y[groups == g], minlength=3) / np.sum(groups == g)
        expected = np.full(3, 0.4 / 3)
        expected[g] += 0.6
        np.testing.assert_allclose(dist, expected, atol=1e-3)


def _group_accuracy(X, groups):
    return cross_val_score(LogisticRegression(), X, groups, cv=3).mean()


def test_feature_group_correlation_controls_group_recovery():
    from scipy.stats import norm

    kwargs = dict(n_samples=6000, label_group_correlation=0.0, random_state=0)
    X, _, groups = make_fair_classification(feature_group_correlation=0.0, **kwargs)
    assert abs(_group_accuracy(X, groups) - 0.5) < 0.03
    X, _, groups = make_fair_classification(feature_group_correlation=0.95, **kwargs)
    assert _group_accuracy(X, groups) > 0.95
    # Documented: the best accuracy is Phi(tau / sqrt(1 - tau^2)).
    tau = 0.5
    X, _, groups = make_fair_classification(feature_group_correlation=tau, **kwargs)
    bayes = norm.cdf(tau / np.sqrt(1 - tau**2))
    assert abs(_group_accuracy(X, groups) - bayes) < 0.025


def test_class_sep_and_orthogonality():
    from scipy.stats import norm

    X, y, groups = make_fair_classification(
        n_samples=6000, label_group_correlation=0.0, feature_group_correlation=0.9,
        class_sep=1.0, random_state=0,
    )
    # The group offsets do not help predict y: accuracy is Phi(class_sep).
    accuracy = cross_val_score(make_pipeline(LogisticRegression()), X, y, cv=3).mean()
    assert abs(accuracy - norm.cdf(1.0)) < 0.025
    X, y, _ = make_fair_classification(n_samples=2000, class_sep=4.0, random_state=0)
    assert cross_val_score(LogisticRegression(), X, y, cv=3).mean() > 0.99


def test_single_group_and_minimal_features():
    X, y, groups = make_fair_classification(n_samples=20, n_features=1, n_groups=1,
                                            random_state=0)
    assert X.shape == (20, 1) and set(groups) == {0}
    X, y, groups = make_fair_classification(n_samples=20, n_features=2, random_state=0)
    assert X.shape == (20, 2)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_samples": 0}, "n_samples"),
        ({"n_samples": 10.5}, "n_samples"),
        ({"n_features": True}, "n_features"),
        ({"n_groups": 0}, "n_groups"),
        ({"n_classes": 1}, "n_classes"),
        ({"n_features": 2, "n_groups": 3}, "n_features must be at least"),
        ({"group_weights": [1.0]}, "group_weights"),
        ({"group_weights": [1.0, -0.5]}, "group_weights"),
        ({"group_weights": [0.0, 0.0]}, "group_weights"),
        ({"group_weights": [np.nan, 1.0]}, "group_weights"),
        ({"label_group_correlation": 1.5}, "label_group_correlation"),
        ({"label_group_correlation": -0.1}, "label_group_correlation"),
        ({"feature_group_correlation": 1.0}, "feature_group_correlation"),
        ({"class_sep": -1.0}, "class_sep"),
        ({"class_sep": np.inf}, "class_sep"),
        ({"return_frame": "yes"}, "return_frame"),
    ],
)
def test_make_fair_classification_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_fair_classification(**kwargs)
