"""One epsilon for a fitted workflow: skdp.privacy.spent."""

import math
import warnings

import dp_accounting as dpa
import numpy as np
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.exceptions import NotFittedError
from sklearn.pipeline import FeatureUnion, Pipeline, make_pipeline
from sklearn.preprocessing import FunctionTransformer, Normalizer, StandardScaler

from skdp import DPSGDClassifier
from skdp.exceptions import PrivacyLeakWarning
from skdp.model_selection import PrivateGridSearchCV
from skdp.preprocessing import DPMinMaxScaler, DPOneHotEncoder, DPStandardScaler
from skdp.privacy import make_accountant, spent


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
