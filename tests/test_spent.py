"""One epsilon for a fitted workflow: skdp.model_selection.spent."""

import math
import warnings

import dp_accounting as dpa
import numpy as np
import pytest
from sklearn.compose import ColumnTransformer, make_column_selector
from sklearn.exceptions import NotFittedError
from sklearn.impute import MissingIndicator, SimpleImputer
from sklearn.pipeline import FeatureUnion, Pipeline, make_pipeline
from sklearn.preprocessing import FunctionTransformer, Normalizer, StandardScaler

from skdp import DPSGDClassifier
from skdp.exceptions import PrivacyLeakWarning
from skdp.model_selection import PrivateGridSearchCV
from skdp.preprocessing import (
    DPMinMaxScaler,
    DPOneHotEncoder,
    DPSimpleImputer,
    DPStandardScaler,
)
from skdp.privacy import make_accountant
from skdp.model_selection import spent


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    n = 1000
    X = np.empty((n, 3), dtype=object)
    X[:, 0] = rng.uniform(17, 90, n)
    X[:, 1] = rng.uniform(1, 99, n)
    X[:, 2] = rng.choice(["a", "b", "c"], n)
    y = ((X[:, 0].astype(float) > 40) ^ (X[:, 2] == "a")).astype(int)
    return X, y


def _classifier(**kwargs):
    return DPSGDClassifier(epsilon=1.0, delta=1e-5, batch_size=100, max_epochs=2,
                           random_state=0, **kwargs)


def _pipeline(encoder=None, scaler=None, **kwargs):
    pre = ColumnTransformer([
        ("num", scaler or DPStandardScaler(epsilon=0.2, delta=1e-6, bounds=([17, 1], [90, 99]),
                                           random_state=0), [0, 1]),
        ("cat", encoder or DPOneHotEncoder(candidate_categories=[["a", "b", "c", "d"]],
                                           epsilon=0.1, delta=1e-6, random_state=0), [2]),
    ])
    return Pipeline([("pre", pre), ("clf", _classifier(**kwargs))])


def test_pipeline_equals_accountant_of_composed_events(data):
    X, y = data
    pipe = _pipeline().fit(X, y)
    total = spent(pipe)
    scaler = pipe["pre"].named_transformers_["num"]
    encoder = pipe["pre"].named_transformers_["cat"]
    clf = pipe["clf"]
    events = [scaler.dp_event_, encoder.dp_event_, clf.dp_event_]
    target = 1e-6 + 1e-6 + 1e-5
    fresh = make_accountant("pld").compose(dpa.ComposedDpEvent(events)).get_epsilon(target)
    assert total.epsilon == pytest.approx(fresh, rel=1e-9)
    assert total.delta == pytest.approx(target)
    assert total.dp_event == dpa.ComposedDpEvent(events)
    assert [name for name, _, _ in total.steps] == ["pre__num", "pre__cat", "clf"]
    # never above the sum of the steps' budgets (basic composition)
    assert clf.epsilon_ < total.epsilon <= sum(eps for _, eps, _ in total.steps)
    epsilon, delta, event, _ = total  # a plain tuple too
    assert (epsilon, delta, event) == tuple(total[:3])


def test_explicit_delta_and_rdp(data):
    X, y = data
    pipe = _pipeline().fit(X, y)
    at = spent(pipe, delta=1e-5)
    events = dpa.ComposedDpEvent([s.dp_event_ for s in (
        pipe["pre"].named_transformers_["num"], pipe["pre"].named_transformers_["cat"],
        pipe["clf"])])
    assert at.delta == 1e-5
    assert at.epsilon == pytest.approx(make_accountant().compose(events).get_epsilon(1e-5))
    rdp = spent(pipe, accountant="rdp")
    assert rdp.epsilon >= spent(pipe).epsilon * 0.99  # RDP is the looser accountant


def test_public_preprocessing_costs_nothing(data):
    X, y = data
    pipe = _pipeline(
        encoder=DPOneHotEncoder(categories=[["a", "b", "c"]]),
        scaler=DPMinMaxScaler(bounds=([17, 1], [90, 99])),
    ).fit(X, y)
    total = spent(pipe)
    assert total.epsilon == pytest.approx(pipe["clf"].epsilon_, rel=1e-9)
    assert total.delta == pipe["clf"].delta_


def test_stable_selection_adds_its_delta(data):
    X, y = data
    pipe = _pipeline(encoder=DPOneHotEncoder(epsilon=0.1, delta=1e-6, random_state=0)).fit(X, y)
    encoder = pipe["pre"].named_transformers_["cat"]
    total = spent(pipe)
    events_delta = 1e-6 + encoder.privacy_report_.delta + 1e-5
    assert encoder.selection_delta_ > 0
    assert total.delta == pytest.approx(
        events_delta + math.exp(total.epsilon) * encoder.selection_delta_
    )


def test_single_estimator_and_feature_union(data):
    X, y = data
    Xn = X[:, :2].astype(float)
    clf = _classifier().fit(Xn, y)
    assert spent(clf).epsilon == pytest.approx(clf.epsilon_, rel=1e-9)
    union = FeatureUnion([
        ("std", DPStandardScaler(epsilon=0.3, bounds=(0, 100), random_state=0)),
        ("mm", DPMinMaxScaler(data_range=(0, 100), epsilon=0.3, random_state=0)),
        ("raw", "passthrough"),
    ]).fit(Xn)
    total = spent(union)
    assert [name for name, _, _ in total.steps] == ["std", "mm"]
    assert 0.3 < total.epsilon <= 0.6


def test_stateless_steps_are_fine(data):
    X, y = data
    pipe = make_pipeline(
        ColumnTransformer([("num", FunctionTransformer(lambda Z: np.log1p(Z.astype(float))), [0, 1]), ("c", "drop", [2])],
                          remainder="drop"),
        Normalizer(),
        "passthrough",
        _classifier(),
    ).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        total = spent(pipe)
    assert total.epsilon == pytest.approx(pipe[-1].epsilon_, rel=1e-9)


def test_non_private_step_warns_with_its_name(data):
    X, y = data
    pipe = _pipeline(scaler=StandardScaler()).fit(X, y)
    with pytest.warns(PrivacyLeakWarning, match="'pre__num' \\(StandardScaler\\)"):
        total = spent(pipe)
    assert total.epsilon == math.inf
    with pytest.raises(ValueError, match="pre__num"):
        spent(pipe, non_private="raise")


def test_non_private_skdp_step(data):
    X, y = data
    pipe = _pipeline(scaler=DPStandardScaler(epsilon=None, bounds=(0, 100))).fit(X, y)
    with pytest.warns(PrivacyLeakWarning, match="pre__num.*without privacy"):
        assert spent(pipe).epsilon == math.inf


def test_errors(data):
    X, y = data
    with pytest.raises(NotFittedError):
        spent(_pipeline())
    with pytest.raises(NotFittedError):
        spent(DPStandardScaler(bounds=(0, 1)))
    pipe = _pipeline().fit(X, y)
    for kwargs, match in [({"delta": 0.0}, "delta"), ({"accountant": "x"}, "accountant"),
                          ({"non_private": "ignore"}, "non_private")]:
        with pytest.raises(ValueError, match=match):
            spent(pipe, **kwargs)


def test_private_search_is_read_at_its_event_delta(data):
    """spent() of a pipeline holding a fitted private search gives the
    search's own (epsilon_, delta_): its event is read at the delta the
    stability terms leave, not at delta_ (which includes them)."""
    X, y = data
    pipe = _pipeline(encoder=DPOneHotEncoder(epsilon=0.1, delta=1e-8, random_state=0))
    search = PrivateGridSearchCV(pipe, {"clf__learning_rate": [0.5, 1.0]},
                                 random_state=0).fit(X, y)
    total = spent(Pipeline([("search", search)]))
    assert total.epsilon == pytest.approx(search.epsilon_, rel=1e-9)
    assert total.delta == pytest.approx(search.delta_, rel=1e-9)
    assert search.delta_ <= search.delta
    assert total.steps == (("search", search.epsilon_, search.delta_),)


# ------------------------------------------ data-independent scikit-learn steps
def _numeric_with_missing(data):
    X, y = data
    Xn = X[:, :2].astype(float)
    Xn[::7, 0] = np.nan
    return Xn, y


def _free(pipe):
    """spent() of ``pipe`` without any PrivacyLeakWarning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        return spent(pipe)


def test_constant_imputation_is_free(data):
    """The user's report: a constant SimpleImputer learns nothing, yet
    spent() warned and gave inf. With keep_empty_features=True its fitted
    state is the fill value and the input's dtype: free."""
    Xn, y = _numeric_with_missing(data)
    for imputer in (SimpleImputer(strategy="constant", keep_empty_features=True),
                    SimpleImputer(strategy="constant", fill_value=-1.0,
                                  keep_empty_features=True)):
        pipe = make_pipeline(imputer, _classifier()).fit(Xn, y)
        total = _free(pipe)
        assert total.epsilon == pytest.approx(pipe[-1].epsilon_, rel=1e-9)
        assert [name for name, _, _ in total.steps] == ["dpsgdclassifier"]


def test_constant_imputation_that_may_drop_columns_is_not_free(data):
    """scikit-learn's default keep_empty_features=False drops a column that
    is entirely missing in fit: whether it is dropped depends on the data
    (one record decides it), so that configuration still counts as a leak,
    and so does add_indicator=True (it keeps the columns that had missing
    values)."""
    Xn, y = _numeric_with_missing(data)
    for imputer, hint in [
        (SimpleImputer(strategy="constant"), "keep_empty_features=True"),
        (SimpleImputer(strategy="constant", keep_empty_features=True, add_indicator=True),
         "add_indicator=False"),
        (SimpleImputer(strategy="mean"), "DPSimpleImputer"),
    ]:
        pipe = make_pipeline(imputer, _classifier()).fit(Xn, y)
        with pytest.warns(PrivacyLeakWarning, match=f"simpleimputer.*{hint}"):
            assert spent(pipe).epsilon == math.inf


def test_missing_indicator_over_all_features_is_free(data):
    Xn, y = _numeric_with_missing(data)
    union = FeatureUnion([("values", SimpleImputer(strategy="constant",
                                                   keep_empty_features=True)),
                          ("missing", MissingIndicator(features="all"))])
    pipe = make_pipeline(union, _classifier()).fit(Xn, y)
    assert _free(pipe).epsilon == pytest.approx(pipe[-1].epsilon_, rel=1e-9)
    # features="missing-only" (the default) keeps the columns that had
    # missing values in fit: learnt from the data
    leaky = make_pipeline(MissingIndicator(), _classifier()).fit(Xn, y)
    with pytest.warns(PrivacyLeakWarning, match="missingindicator.*features='all'"):
        assert spent(leaky).epsilon == math.inf


def test_stateless_function_transformer_is_free(data):
    Xn, y = _numeric_with_missing(data)
    pipe = make_pipeline(FunctionTransformer(np.nan_to_num), _classifier()).fit(Xn, y)
    assert _free(pipe).epsilon == pytest.approx(pipe[-1].epsilon_, rel=1e-9)


def test_column_selection_is_free(data):
    """ColumnTransformer blocks "passthrough" and "drop", a remainder, and
    columns chosen by dtype or name (make_column_selector reads only the
    schema) learn nothing."""
    pd = pytest.importorskip("pandas")
    X, y = data
    frame = pd.DataFrame({"age": X[:, 0].astype(float), "hours": X[:, 1].astype(float),
                          "color": X[:, 2].astype(str)})
    pre = ColumnTransformer([
        ("num", DPStandardScaler(bounds=(0, 100), epsilon=0.2, random_state=0),
         make_column_selector(dtype_include="number", pattern="^a")),
        ("keep", "passthrough", make_column_selector(pattern="hours")),
        ("cat", "drop", make_column_selector(dtype_include=object)),
    ], remainder="passthrough")
    pipe = Pipeline([("pre", pre), ("clf", _classifier())]).fit(frame, y)
    total = _free(pipe)
    assert [name for name, _, _ in total.steps] == ["pre__num", "clf"]
    events = dpa.ComposedDpEvent([pipe["pre"].named_transformers_["num"].dp_event_,
                                  pipe["clf"].dp_event_])
    fresh = make_accountant("pld").compose(events).get_epsilon(1e-5 + 1e-5)
    assert total.epsilon == pytest.approx(fresh, rel=1e-9)


def test_column_choice_by_an_arbitrary_callable_is_not_free(data):
    """A callable that picks columns may read their values (here: the
    columns whose mean is above 50); only make_column_selector is known to
    read nothing but the schema."""
    X, y = data
    Xn = X[:, :2].astype(float)
    pre = ColumnTransformer([("pick", "passthrough",
                              lambda Z: [j for j in range(Z.shape[1]) if Z[:, j].mean() > 50])])
    pipe = Pipeline([("pre", pre), ("clf", _classifier())]).fit(Xn, y)
    with pytest.warns(PrivacyLeakWarning, match="'pre' \\(ColumnTransformer\\).*callable"):
        assert spent(pipe).epsilon == math.inf
    with pytest.raises(ValueError, match="callable"):
        spent(pipe, non_private="raise")


def test_dp_imputer_in_a_pipeline(data):
    Xn, y = _numeric_with_missing(data)
    pipe = make_pipeline(
        DPSimpleImputer(bounds=([17, 1], [90, 99]), epsilon=0.2, delta=1e-6, random_state=0),
        _classifier(),
    ).fit(Xn, y)
    total = _free(pipe)
    events = dpa.ComposedDpEvent([pipe[0].dp_event_, pipe[1].dp_event_])
    fresh = make_accountant("pld").compose(events).get_epsilon(1e-6 + 1e-5)
    assert total.epsilon == pytest.approx(fresh, rel=1e-9)
    assert [name for name, _, _ in total.steps] == ["dpsimpleimputer", "dpsgdclassifier"]
