"""Private hyperparameter search, privacy_spent and make_preprocessor's
private option."""

import math
import warnings

import dp_accounting as dpa
import numpy as np
import pandas as pd
import pytest
import sklearn
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.compose import ColumnTransformer
from sklearn.metrics import make_scorer
from sklearn.model_selection import GridSearchCV, cross_validate
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdp import DPRateConstrainedClassifier, DPSGDClassifier, DPSGDRegressor
from skdp.datasets import fetch_adult, make_preprocessor
from skdp.exceptions import PrivacyLeakWarning
from skdp.metrics import get_fairness_scorer
from skdp.model_selection import (
    PrivateGridSearchCV,
    PrivateRandomizedSearchCV,
    best_within,
    privacy_spent,
)
from skdp.model_selection import _private_search, _selection
from skdp.preprocessing import DPOneHotEncoder, DPStandardScaler
from skdp.privacy import SecureGenerator, bernoulli_split, compute_epsilon, make_accountant
from skdp.model_selection import spent
from skdp.privacy import gdp_epsilon, gdp_mu

GRID = {"learning_rate": [0.2, 1.0]}


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    n = 3000
    group = rng.integers(2, size=n)
    X = np.column_stack([rng.normal(size=n) + 0.5 * group, rng.normal(size=n)])
    y = (X[:, 0] + 0.5 * rng.normal(size=n) > 0.3).astype(int)
    return X, y, np.where(group == 1, "a", "b")


def _clf(**kwargs):
    return DPSGDClassifier(batch_size=150, max_epochs=2, random_state=0, **kwargs)


def _search(**kwargs):
    kwargs.setdefault("random_state", 0)
    return PrivateGridSearchCV(_clf(), GRID, **kwargs)


# ------------------------------------------------------------- accounting
@pytest.mark.parametrize("refit_share", [0.0, 0.3])
def test_epsilon_from_event_with_fresh_accountant(data, refit_share):
    X, y, _ = data
    search = _search(refit_share=refit_share).fit(X, y)
    fresh = make_accountant("pld").compose(search.dp_event_).get_epsilon(search.delta)
    assert search.epsilon_ == pytest.approx(fresh, rel=1e-9)
    assert search.epsilon_ <= search.epsilon
    split = search.budget_split_
    for part in ("training_part", "validation_part"):
        event, eps = split[part]["dp_event"], split[part]["epsilon"]
        assert make_accountant("pld").compose(event).get_epsilon(search.delta) == pytest.approx(eps)
        assert eps <= search.epsilon
    assert search.epsilon_ == max(split["training_part"]["epsilon"],
                                  split["validation_part"]["epsilon"])
    assert search.delta_ == pytest.approx(search.delta)


def test_training_part_composes_every_fit(data):
    X, y, _ = data
    search = _search(refit_share=0.3).fit(X, y)
    event = search.budget_split_["training_part"]["dp_event"]
    # 2 candidates + the refit, each one DP-SGD run
    assert isinstance(event, dpa.ComposedDpEvent)
    refit_event = search.best_estimator_.dp_event_
    # the two candidates have the same event (only the learning rate differs)
    assert isinstance(event.events[0], dpa.SelfComposedDpEvent)
    assert event.events[0].count == 2
    assert event.events[1] == refit_event
    validation = search.budget_split_["validation_part"]["dp_event"]
    assert validation.events[1] == refit_event


def test_budget_split_sums(data):
    X, y, _ = data
    search = PrivateGridSearchCV(
        _clf(), {"learning_rate": [0.2, 0.5, 1.0]}, epsilon=2.0, delta=1e-6, refit_share=0.25,
        random_state=0,
    ).fit(X, y)
    split = search.budget_split_
    shares = split["shares"]
    assert shares["candidates"] + shares["refit"] == pytest.approx(1.0)
    assert shares["each_candidate"] * split["n_candidates"] == pytest.approx(shares["candidates"])
    assert shares["selection"] + shares["refit"] == pytest.approx(1.0)
    mu = gdp_mu(2.0, 1e-6)
    assert split["gdp_mu"] == pytest.approx(mu)
    # each candidate's only private step gets the candidate's share at its own delta
    expected = gdp_epsilon(mu * math.sqrt(shares["each_candidate"]), 1e-5)
    assert [c["epsilon"] for c in split["candidate_epsilons"]] == pytest.approx([expected] * 3)
    assert split["refit_epsilons"]["epsilon"] == pytest.approx(
        gdp_epsilon(mu * math.sqrt(0.25), 1e-5))
    assert search.best_estimator_.epsilon == pytest.approx(split["refit_epsilons"]["epsilon"])
    assert split["selection_epsilon"] <= gdp_epsilon(mu * math.sqrt(0.75), 1e-6) * (1 + 1e-9)
    assert search.epsilon_ <= 2.0


def test_steps_keep_their_proportions(data):
    X, y, _ = data
    pipe = Pipeline([
        ("scale", DPStandardScaler(epsilon=0.1, delta=1e-6, bounds=(-5, 5), random_state=0)),
        ("clf", _clf()),
    ])
    search = PrivateGridSearchCV(pipe, {"clf__learning_rate": [0.2, 1.0]}, random_state=0)
    search.fit(X, y)
    budgets = search.budget_split_["candidate_epsilons"][0]
    assert set(budgets) == {"scale__epsilon", "clf__epsilon"}
    ratio = gdp_mu(budgets["scale__epsilon"], 1e-6) / gdp_mu(budgets["clf__epsilon"], 1e-5)
    assert ratio == pytest.approx(gdp_mu(0.1, 1e-6) / gdp_mu(1.0, 1e-5), rel=1e-6)
    assert search.epsilon_ <= 1.0
    # spent() of the kept candidate covers both steps
    assert {name for name, _, _ in spent(search.best_estimator_).steps} == {"scale", "clf"}
    shared = PrivateGridSearchCV(pipe, {"clf__learning_rate": [1.0]}, random_state=0,
                                 step_shares={"scale": 1, "clf": 3}).fit(X, y)
    budgets = shared.budget_split_["candidate_epsilons"][0]
    ratio = gdp_mu(budgets["scale__epsilon"], 1e-6) ** 2 / gdp_mu(budgets["clf__epsilon"], 1e-5) ** 2
    assert ratio == pytest.approx(1 / 3, rel=1e-6)


def test_reproducible_with_seed_and_secure_without(data):
    X, y, _ = data
    a, b = _search().fit(X, y), _search().fit(X, y)
    np.testing.assert_array_equal(a.cv_results_["mean_test_score"], b.cv_results_["mean_test_score"])
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    c = PrivateGridSearchCV(_clf(), GRID).fit(X, y)  # CSPRNG split and noise
    assert not np.array_equal(a.cv_results_["mean_test_score"], c.cv_results_["mean_test_score"])


# --------------------------------------------------- selection mechanism
def _true_positives(y_true, y_pred, sample_weight=None):
    """Weight of the cell (y=1, yhat=1): the noisy count of that cell."""
    hit = (np.asarray(y_true) == 1) & (np.asarray(y_pred) == 1)
    return float(np.sum(np.asarray(sample_weight) * hit))


def _selection_frequencies(correct, n_rows, epsilon, delta, draws):
    """Chosen index over ``draws`` releases of the histograms of candidates
    that get ``correct[k]`` of ``n_rows`` (all labelled 1) right."""
    K = len(correct)
    predictions = np.ones((K, n_rows), dtype=int)
    for k, c in enumerate(correct):
        predictions[k, c:] = 0
    counts = _selection.confusion_histograms(predictions, np.ones(n_rows, dtype=int), None, 2, 1)
    metrics = {"score": _selection.HistogramMetric("score", make_scorer(_true_positives))}
    generator = torch.Generator().manual_seed(0)
    chosen, sigma = [], None
    for _ in range(draws):
        noisy, report = _selection.release_histograms(counts, epsilon, delta, generator)
        sigma = report.scale(_selection.RELEASE)
        scores = _selection.histogram_scores(noisy, np.array([0, 1]), metrics)["score"]
        chosen.append(int(np.argmax(scores)))
    return np.bincount(chosen, minlength=K), sigma


def test_selection_probabilities_follow_the_mechanism():
    """Report-noisy-max over Gaussian-noised scores: for the score "count of
    cell (y=1, yhat=1)", candidate k's noisy score is c_k + N(0, sigma^2), so
    P(k chosen) = int phi(t - c_k) prod_{j != k} Phi(t - c_j) dt (in units
    of sigma). A chi-square test compares the frequencies."""
    correct = [400, 395, 385]
    epsilon, delta, draws = 0.5, 1e-5, 3000
    counts, sigma = _selection_frequencies(correct, 500, epsilon, delta, draws)
    # the noise is the Gaussian mechanism for l2 sensitivity sqrt(K) at (epsilon, delta)
    event = dpa.GaussianDpEvent(sigma / math.sqrt(3))
    assert compute_epsilon(event, delta) == pytest.approx(epsilon, rel=1e-2)
    assert compute_epsilon(event, delta) <= epsilon
    c = np.array(correct) / sigma
    # only cells (y=1, yhat=1) count; the zero cells' noise does not enter the score
    expected = np.array([
        integrate.quad(
            lambda t, k=k: stats.norm.pdf(t - c[k]) * np.prod(
                [stats.norm.cdf(t - c[j]) for j in range(3) if j != k]),
            c.min() - 10, c.max() + 10,
        )[0]
        for k in range(3)
    ])
    assert expected.sum() == pytest.approx(1.0, abs=1e-6)
    _, p_value = stats.chisquare(counts, draws * expected)
    assert p_value > 1e-3


def test_search_picks_the_best_noisy_score_and_scores_are_noisy(data):
    X, y, _ = data
    search = PrivateGridSearchCV(_clf(), {"learning_rate": [0.01, 0.2, 1.0]}, epsilon=0.5,
                                 random_state=1).fit(X, y)
    scores = search.cv_results_["mean_test_score"]
    assert search.best_index_ == int(np.argmax(scores))
    assert search.best_score_ == scores[search.best_index_]
    assert search.cv_results_["rank_test_score"][search.best_index_] == 1
    assert not any(k.endswith("_time") for k in search.cv_results_)
    # the selection noise is what the plan calibrated
    K = 3
    sigma = search.budget_split_["selection_noise_std"]
    eps = compute_epsilon(dpa.GaussianDpEvent(sigma / math.sqrt(K)), search.delta)
    assert eps == pytest.approx(search.budget_split_["selection_epsilon"])


def test_randomized_search(data):
    X, y, _ = data
    search = PrivateRandomizedSearchCV(
        _clf(), {"learning_rate": stats.loguniform(0.05, 2.0)}, n_iter=3, random_state=0,
    ).fit(X, y)
    assert len(search.cv_results_["params"]) == 3 == search.n_candidates_
    assert search.epsilon_ <= 1.0
    assert search.score(X, y) > 0.7


# ------------------------------------------------------------ scoring & routing
def test_fairness_scoring_and_best_within_with_routing(data):
    X, y, groups = data
    scoring = {"accuracy": "accuracy",
               "dpd": get_fairness_scorer("demographic_parity_difference")}
    with sklearn.config_context(enable_metadata_routing=True):
        search = PrivateGridSearchCV(
            _clf(), GRID, scoring=scoring, refit=best_within("dpd", 0.5), random_state=0,
        )
        search.fit(X, y, sensitive_features=groups)
    results = search.cv_results_
    assert np.all(results["mean_test_dpd"] <= 0)
    assert search.best_index_ == best_within("dpd", 0.5)(results)
    # the candidates received the groups of their training rows
    assert list(search.best_estimator_.groups_) == ["a", "b"]
    assert search.epsilon_ <= 1.0
    assert not hasattr(search, "best_score_")


def test_parallel_candidates_keep_metadata_routing(data):
    """With n_jobs=2 the candidates are fitted in worker processes, which
    must see the caller's scikit-learn configuration: with routing on, a
    Pipeline's fit gets its routed sensitive_features (without the
    configuration, Pipeline.fit refuses them); the search is the same as
    with n_jobs=None up to the fits' floating point."""
    X, y, groups = data
    pipe = Pipeline([("scale", DPStandardScaler(epsilon=0.1, delta=1e-6, bounds=(-5, 5))),
                     ("clf", _clf())])
    scoring = {"accuracy": "accuracy",
               "dpd": get_fairness_scorer("demographic_parity_difference")}
    searches = []
    for n_jobs in (None, 2):
        with sklearn.config_context(enable_metadata_routing=True):
            search = PrivateGridSearchCV(pipe, {"clf__learning_rate": [0.2, 1.0]},
                                         scoring=scoring, refit="accuracy", n_jobs=n_jobs,
                                         random_state=0)
            searches.append(search.fit(X, y, sensitive_features=groups))
    for search in searches:
        assert list(search.best_estimator_[-1].groups_) == ["a", "b"]
    np.testing.assert_allclose(searches[0].cv_results_["mean_test_dpd"],
                               searches[1].cv_results_["mean_test_dpd"], atol=0.02)


def test_fairness_scoring_without_routing(data):
    X, y, groups = data
    X_df = pd.DataFrame({"x0": X[:, 0], "x1": X[:, 1], "sex": groups})
    scoring = {"accuracy": "accuracy",
               "dpd": get_fairness_scorer("demographic_parity_difference", sensitive_column="sex")}
    search = PrivateGridSearchCV(_clf(sensitive_columns="sex"), GRID, scoring=scoring,
                                 refit="accuracy", random_state=0).fit(X_df, y)
    assert list(search.best_estimator_.groups_) == ["a", "b"]
    assert np.isfinite(search.cv_results_["mean_test_dpd"]).all()
    assert search.best_index_ == int(np.argmax(search.cv_results_["mean_test_accuracy"]))


def test_fairness_scorer_without_groups_errors(data):
    X, y, _ = data
    scoring = {"accuracy": "accuracy",
               "dpd": get_fairness_scorer("demographic_parity_difference")}
    with pytest.raises(ValueError, match="needs the group of each validation row"):
        PrivateGridSearchCV(_clf(), GRID, scoring=scoring, refit="accuracy").fit(X, y)


# ------------------------------------------------------------ bad input
@pytest.mark.parametrize("kwargs, match", [
    ({"epsilon": 0.0}, "epsilon"),
    ({"validation_fraction": 1.0}, "validation_fraction"),
    ({"refit_share": 1.0}, "refit_share"),
    ({"scoring": "roc_auc"}, "hard predictions"),
    ({"scoring": {"a": "accuracy", "b": "f1"}}, "refit must be the name"),
    ({"scoring": "accuracy", "refit": "accuracy"}, "single metric"),
])
def test_bad_parameters(data, kwargs, match):
    X, y, _ = data
    with pytest.raises(ValueError, match=match):
        _search(**kwargs).fit(X, y)


def test_bad_estimators(data):
    X, y, _ = data
    with pytest.raises(ValueError, match="sets every step's epsilon"):
        PrivateGridSearchCV(_clf(), {"epsilon": [0.5, 1.0]}).fit(X, y)
    with pytest.raises(ValueError, match="not differentially private"):
        PrivateGridSearchCV(Pipeline([("s", StandardScaler()), ("c", _clf())]),
                            {"c__learning_rate": [1.0]}).fit(X, y)
    with pytest.raises(ValueError, match="epsilon=None"):
        PrivateGridSearchCV(_clf(epsilon=None), GRID).fit(X, y)
    with pytest.raises(ValueError, match="no skdp step"):
        PrivateGridSearchCV(Pipeline([("c", _Stub())]), {"c__quality": [1]}).fit(X, y)
    with pytest.raises(ValueError, match="step_shares"):
        PrivateGridSearchCV(_clf(), GRID, step_shares={"other": 1.0}).fit(X, y)


class _Stub(ClassifierMixin, BaseEstimator):
    def __init__(self, quality=1):
        self.quality = quality

    def fit(self, X, y):
        self.classes_ = np.unique(y)
        return self

    def predict(self, X):
        return np.full(len(X), self.classes_[0])


# ------------------------------------------------------------ sklearn checks
def _expected_failures(estimator):
    return {}  # every check passes with a seeded search


@parametrize_with_checks(
    [PrivateGridSearchCV(DPSGDClassifier(batch_size=8, max_epochs=3, random_state=0),
                         {"learning_rate": [0.5, 1.0]}, epsilon=4.0, refit_share=0.0,
                         random_state=0),
     PrivateGridSearchCV(DPSGDRegressor(batch_size=8, max_epochs=3, random_state=0),
                         {"alpha": [0.0, 0.1]}, epsilon=4.0, error_bound=10.0, refit_share=0.0,
                         random_state=0)],
    expected_failed_checks=_expected_failures,
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


# ------------------------------------------------------------ privacy_spent
def test_privacy_spent_cross_validate(data):
    X, y, _ = data
    cv = cross_validate(_clf(), X, y, cv=3, return_estimator=True)
    with pytest.warns(PrivacyLeakWarning, match="NOT covered"):
        total = privacy_spent(cv)
    events = [est.dp_event_ for est in cv["estimator"]]
    fresh = make_accountant("pld").compose(dpa.ComposedDpEvent(events)).get_epsilon(3e-5)
    assert total.exact and total.n_fits == 3
    assert total.epsilon == pytest.approx(fresh)
    assert cv["estimator"][0].epsilon_ < total.epsilon < 3 * cv["estimator"][0].epsilon_


def test_privacy_spent_grid_search(data):
    X, y, _ = data
    search = GridSearchCV(_clf(), GRID, cv=3).fit(X, y)
    with pytest.warns(PrivacyLeakWarning, match="selection"):
        total = privacy_spent(search)
    assert not total.exact and total.dp_event is None
    assert total.n_fits == 2 * 3 + 1
    assert search.best_estimator_.epsilon_ * 3 < total.epsilon <= 7 * 1.0 + 1e-6
    with pytest.raises(ValueError, match="return_estimator"):
        privacy_spent({"test_score": np.zeros(3)}, warn=False)
    with pytest.raises(ValueError, match="cross_validate"):
        privacy_spent(_clf(), warn=False)


def _delta_warnings(caught):
    return [w for w in caught if "1/n" in str(w.message) and "privacy_spent" in str(w.message)]


def test_privacy_spent_warns_when_the_total_delta_exceeds_one_over_n(data):
    """7 fits at delta=1e-4 (6 fold fits as black boxes, counted twice, and
    the refit): a total delta of 1.3e-3, above 1/n = 1/3000; n is read from
    the refitted best_estimator_ (trained on every record). No fit warns on
    its own: 1e-4 is below 1/2000 (a fold) and 1/3000."""
    X, y, _ = data
    search = GridSearchCV(_clf(delta=1e-4), GRID, cv=3).fit(X, y)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        total = privacy_spent(search, warn=False)
    assert total.delta == pytest.approx(1.3e-3)
    found = _delta_warnings(caught)
    assert len(found) == 1 and found[0].category is UserWarning
    message = str(found[0].message)
    assert "0.0013" in message and "3000" in message and "delta" in message
    # the default delta: 1.3e-4 < 1/3000, no warning
    search = GridSearchCV(_clf(), GRID, cv=3).fit(X, y)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        privacy_spent(search, warn=False)
    assert not _delta_warnings(caught)


def test_privacy_spent_delta_check_for_cross_validate(data):
    """Fold fits see 2000 of the 3000 records: their sizes are a lower bound
    on n, so the check fires where that suffices (6e-4 > 1/2000); with the
    folds' indices (return_indices=True) or n_samples=, n is known (4.5e-4
    > 1/3000, but not > 1/2000)."""
    X, y, _ = data

    def check(delta, **kwargs):
        cv = cross_validate(_clf(delta=delta), X, y, cv=3, return_estimator=True,
                            return_indices=kwargs.pop("indices", False))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            privacy_spent(cv, warn=False, **kwargs)
        return _delta_warnings(caught)

    assert len(check(2e-4)) == 1
    assert not check(1.5e-4)                       # n unknown: only n >= 2000 is known
    assert len(check(1.5e-4, indices=True)) == 1   # n = 3000 from the folds
    assert len(check(1.5e-4, n_samples=3000)) == 1
    assert not check(1.5e-4, n_samples=2000)
    with pytest.raises(ValueError, match="n_samples"):
        check(1e-5, n_samples=0)


# ------------------------------------------------------------ make_preprocessor
BOUNDS = {"age": (17, 90), "fnlwgt": (0, 1.5e6), "education-num": (1, 16),
          "capital-gain": (0, 99999), "capital-loss": (0, 5000), "hours-per-week": (1, 99)}


@pytest.fixture(scope="module")
def adult():
    return fetch_adult(as_frame=True)


def test_make_preprocessor_private(adult):
    pre = make_preprocessor(adult, bounds=BOUNDS, categories="schema", epsilon=0.2,
                            random_state=0)
    scaler, encoder = pre.transformers[0][1], pre.transformers[1][1]
    assert isinstance(scaler, DPStandardScaler) and scaler.epsilon == 0.2
    assert scaler.delta == 1e-6
    assert isinstance(encoder, DPOneHotEncoder) and not isinstance(encoder.categories, str)
    pre.fit(adult.data.head(3000))
    assert spent(pre).epsilon <= 0.2

    pre = make_preprocessor(adult, bounds=BOUNDS, epsilon=0.2, delta=1e-7, random_state=0)
    scaler, encoder = pre.transformers[0][1], pre.transformers[1][1]
    assert scaler.epsilon == encoder.epsilon == 0.1
    assert encoder.categories == "private" and encoder.candidate_categories is not None
    assert encoder.delta == 1e-7
    pre.fit(adult.data.head(3000))
    assert spent(pre, delta=1e-7 * 2).epsilon <= 0.2


def test_make_preprocessor_private_errors(adult):
    with pytest.raises(ValueError, match="public"):
        make_preprocessor(adult, epsilon=0.1)
    with pytest.raises(ValueError, match="epsilon"):
        make_preprocessor(adult, bounds=BOUNDS, epsilon=-1.0)
    with pytest.raises(ValueError, match="delta"):
        make_preprocessor(adult, bounds=BOUNDS, epsilon=1.0, delta=0)
    # the default is unchanged: scikit-learn steps
    default = make_preprocessor(adult)
    assert isinstance(default.transformers[0][1], StandardScaler)


def test_private_pipeline_search_on_adult_sample(adult):
    """A private pipeline from make_preprocessor, searched privately."""
    sample = adult.data.head(4000)
    pipe = Pipeline([
        ("pre", make_preprocessor(adult, bounds=BOUNDS, categories="schema", epsilon=0.1,
                                  random_state=0)),
        ("clf", DPSGDClassifier(batch_size=200, max_epochs=2, random_state=0)),
    ])
    search = PrivateGridSearchCV(pipe, {"clf__learning_rate": [0.3, 1.0]}, random_state=0)
    search.fit(sample, adult.target[:4000])
    assert set(search.budget_split_["candidate_epsilons"][0]) == {
        "pre__num__epsilon", "clf__epsilon"}
    assert search.epsilon_ <= 1.0
    assert search.score(sample, adult.target[:4000]) > 0.75


def test_budget_overshoot_is_redone_before_release(data, monkeypatch):
    """If the GDP split over-allocates, the fits are redone with a smaller
    share before anything is released, and the budget holds."""
    from skdp.model_selection import _private_search

    share = _private_search.share_budget

    def generous(estimator, steps, mu, step_shares=None):
        budgets = {k: 1.6 * v for k, v in share(estimator, steps, mu, step_shares).items()}
        estimator.set_params(**budgets)
        return budgets

    monkeypatch.setattr(_private_search, "share_budget", generous)
    X, y, _ = data
    search = _search(refit_share=0.0).fit(X, y)
    assert search.budget_split_["training_part"]["epsilon"] <= 1.0
    assert search.epsilon_ <= 1.0


def test_refit_false_keeps_no_model(data):
    X, y, _ = data
    search = _search(refit=False).fit(X, y)
    assert not hasattr(search, "best_estimator_")
    # the first in the grid among the candidates tied with the best noisy score
    tied = search.cv_results_["within_noise_of_best"]
    assert tied[int(np.argmax(search.cv_results_["mean_test_score"]))]
    assert search.best_index_ == int(np.flatnonzero(tied)[0])
    assert search.budget_split_["shares"]["refit"] == 0.0
    with pytest.raises(AttributeError):
        search.predict(X)


# ------------------------------------------------------------ regressors
REG_GRID = {"alpha": [1e-4, 0.1, 10.0]}


@pytest.fixture(scope="module")
def reg_data():
    rng = np.random.default_rng(1)
    n = 3000
    X = rng.normal(size=(n, 4))
    y = X @ np.array([4.0, -3.0, 2.0, 0.0]) + 2.0 * rng.normal(size=n)
    return X, y


def _reg(**kwargs):
    return DPSGDRegressor(batch_size=150, max_epochs=3, random_state=0, **kwargs)


def _reg_search(**kwargs):
    kwargs.setdefault("random_state", 0)
    kwargs.setdefault("error_bound", 10.0)
    return PrivateGridSearchCV(_reg(), REG_GRID, **kwargs)


def _joint_mu(split, sensitivities):
    """GDP mu of the selection batch from the released noise stds."""
    stds = split["selection_noise_stds"]
    return math.sqrt(sum((sensitivities[name] / stds[name]) ** 2 for name in stds))


@pytest.mark.parametrize("refit_share", [0.0, 0.3])
def test_regressor_epsilon_from_event_with_fresh_accountant(reg_data, refit_share):
    X, y = reg_data
    search = _reg_search(refit_share=refit_share).fit(X, y)
    fresh = make_accountant("pld").compose(search.dp_event_).get_epsilon(search.delta)
    assert search.epsilon_ == pytest.approx(fresh, rel=1e-9)
    assert search.epsilon_ <= search.epsilon
    split = search.budget_split_
    for part in ("training_part", "validation_part"):
        event, eps = split[part]["dp_event"], split[part]["epsilon"]
        assert make_accountant("pld").compose(event).get_epsilon(search.delta) == pytest.approx(eps)
        assert eps <= search.epsilon
    assert search.epsilon_ == max(split["training_part"]["epsilon"],
                                  split["validation_part"]["epsilon"])
    # the selection noise is the Gaussian mechanism for the documented
    # sensitivities: sqrt(K) b^2 (squared-error sums) and 1 (the count)
    K, b = 3, 10.0
    assert split["error_bound"] == b
    mu = _joint_mu(split, {"validation_squared_errors": math.sqrt(K) * b**2,
                           "validation_moments": 1.0})
    eps = compute_epsilon(dpa.GaussianDpEvent(1 / mu), search.delta)
    assert eps == pytest.approx(split["selection_epsilon"], rel=1e-6)
    assert split["selection_epsilon"] <= gdp_epsilon(
        split["gdp_mu"] * math.sqrt(1 - split["shares"]["refit"]), search.delta) * (1 + 1e-9)


def test_regressor_scores_and_choice(reg_data):
    X, y = reg_data
    scoring = ["neg_mean_squared_error", "r2", "neg_mean_absolute_error",
               "neg_root_mean_squared_error"]
    search = _reg_search(scoring=scoring, refit="neg_mean_squared_error", y_bounds=(-40, 40),
                         epsilon=2.0).fit(X, y)
    results = search.cv_results_
    mse = results["mean_test_neg_mean_squared_error"]
    assert search.best_index_ == int(np.argmax(mse))
    assert search.best_score_ == mse[search.best_index_]
    # r2 and RMSE share the squared-error sums (common denominators): same ranking
    np.testing.assert_array_equal(results["rank_test_r2"],
                                  results["rank_test_neg_mean_squared_error"])
    np.testing.assert_allclose(results["mean_test_neg_root_mean_squared_error"],
                               -np.sqrt(-mse))
    # the heavy penalty is visibly worse than the light ones
    assert mse[2] < mse[0] and results["mean_test_r2"][2] < results["mean_test_r2"][0]
    assert results["mean_test_neg_mean_absolute_error"][2] < results[
        "mean_test_neg_mean_absolute_error"][0]
    # absolute errors add a release of sensitivity sqrt(K) b; r2 adds two moments
    K, b = 3, 10.0
    mu = _joint_mu(search.budget_split_, {
        "validation_squared_errors": math.sqrt(K) * b**2,
        "validation_absolute_errors": math.sqrt(K) * b,
        "validation_moments": math.sqrt(3),
    })
    eps = compute_epsilon(dpa.GaussianDpEvent(1 / mu), search.delta)
    assert eps == pytest.approx(search.budget_split_["selection_epsilon"], rel=1e-6)
    assert search.epsilon_ <= 2.0
    assert search.score(X, y) == pytest.approx(-np.mean((search.predict(X) - y) ** 2))


def test_regressor_default_scoring_and_randomized(reg_data):
    X, y = reg_data
    search = PrivateRandomizedSearchCV(
        _reg(), {"alpha": stats.loguniform(1e-4, 1.0)}, n_iter=3, y_bounds=(-40, 40),
        random_state=0,
    ).fit(X, y)
    assert search.budget_split_["error_bound"] == 80.0  # high - low
    assert set(search.cv_results_) >= {"mean_test_score", "rank_test_score"}
    # the first in the grid among the candidates tied with the best noisy score
    tied = search.cv_results_["within_noise_of_best"]
    assert tied[int(np.argmax(search.cv_results_["mean_test_score"]))]
    assert search.best_index_ == int(np.flatnonzero(tied)[0])
    assert search.epsilon_ <= 1.0
    assert sklearn.utils.get_tags(search).estimator_type == "regressor"
    assert search.score(X, y) == pytest.approx(-np.mean((search.predict(X) - y) ** 2))


def _error_sum_frequencies(losses, n_rows, bound, epsilon, delta, draws):
    """Chosen index over ``draws`` releases for candidates whose clipped
    squared-error sums are ``losses`` (targets 0, one candidate predicting
    values whose squares add up to its loss)."""
    K = len(losses)
    predictions = np.zeros((K, n_rows))
    for k, total in enumerate(losses):
        full, rest = divmod(total, bound**2)
        predictions[k, : int(full)] = bound * 3  # clipped to the bound
        predictions[k, int(full)] = math.sqrt(rest)
    sums, counts = _selection.error_sums(predictions, np.zeros(n_rows), ["squared"], bound)
    np.testing.assert_allclose(sums["squared"], losses)
    metrics = {"score": _selection.LossMetric("score", sklearn.metrics.get_scorer(
        "neg_mean_squared_error"))}
    generator = torch.Generator().manual_seed(0)
    chosen, sigma = [], None
    for _ in range(draws):
        noisy, noisy_counts, report = _selection.release_error_sums(
            sums, counts, bound, epsilon, delta, generator)
        sigma = report.scale("validation_squared_errors")
        scores = _selection.loss_scores(noisy, noisy_counts, metrics)["score"]
        chosen.append(int(np.argmax(scores)))
    return np.bincount(chosen, minlength=K), sigma, report


def test_regression_selection_probabilities_follow_the_mechanism():
    """Report-noisy-min over Gaussian-noised sums of clipped squared errors:
    candidate k's noisy sum is S_k + N(0, sigma^2) (the noisy count is
    common to all), so P(k chosen) = int phi(t - s_k) prod_{j != k}
    (1 - Phi(t - s_j)) dt with s = S / sigma. A chi-square test compares the
    frequencies."""
    losses = [1000.0, 1030.0, 1070.0]
    bound, epsilon, delta, draws = 2.0, 0.5, 1e-5, 3000
    counts, sigma, report = _error_sum_frequencies(losses, 500, bound, epsilon, delta, draws)
    # one Gaussian batch: sqrt(K) b^2 for the sums, 1 for the count
    mu = math.sqrt((math.sqrt(3) * bound**2 / sigma) ** 2
                   + (1.0 / report.scale("validation_moments")) ** 2)
    assert compute_epsilon(dpa.GaussianDpEvent(1 / mu), delta) == pytest.approx(epsilon, rel=1e-2)
    assert report.epsilon <= epsilon
    s = np.array(losses) / sigma
    expected = np.array([
        integrate.quad(
            lambda t, k=k: stats.norm.pdf(t - s[k]) * np.prod(
                [stats.norm.sf(t - s[j]) for j in range(3) if j != k]),
            s.min() - 10, s.max() + 10,
        )[0]
        for k in range(3)
    ])
    assert expected.sum() == pytest.approx(1.0, abs=1e-6)
    assert 0.4 < expected[0] < 0.9 and expected[2] > 0.03  # informative, but noisy
    _, p_value = stats.chisquare(counts, draws * expected)
    assert p_value > 1e-3


@settings(max_examples=60, deadline=None)
@given(
    st.integers(2, 5), st.integers(1, 12), st.floats(0.1, 10.0),
    st.lists(st.floats(-1e3, 1e3) | st.just(math.nan) | st.just(math.inf), min_size=5,
             max_size=5),
    st.floats(-100, 100), st.booleans(),
)
def test_error_sums_sensitivity(K, m, bound, extra_predictions, extra_y, bounded):
    """Removing one record moves the stacked squared-error sums by at most
    sqrt(K) b^2, the absolute ones by sqrt(K) b and the (count, sum u,
    sum u^2) by sqrt(3) in l2, whatever its target and predictions."""
    rng = np.random.default_rng(m)
    y_bounds = (-20.0, 30.0) if bounded else None
    predictions = rng.normal(scale=20, size=(K, m))
    y = rng.normal(scale=20, size=m)
    full_p = np.column_stack([predictions, np.asarray(extra_predictions[:K])])
    full_y = np.append(y, extra_y)
    kw = {"y_bounds": y_bounds, "moments": bounded}
    a, sa = _selection.error_sums(predictions, y, ["squared", "absolute"], bound, **kw)
    b, sb = _selection.error_sums(full_p, full_y, ["squared", "absolute"], bound, **kw)
    assert np.linalg.norm(b["squared"] - a["squared"]) <= math.sqrt(K) * bound**2 * (1 + 1e-9)
    assert np.linalg.norm(b["absolute"] - a["absolute"]) <= math.sqrt(K) * bound * (1 + 1e-9)
    assert np.all(b["squared"] >= a["squared"] - 1e-9)
    assert np.linalg.norm(sb - sa) <= math.sqrt(len(sa)) + 1e-9


@pytest.mark.parametrize("kwargs, match", [
    ({"error_bound": None}, "give error_bound"),
    ({"scoring": "r2"}, "give y_bounds"),
    ({"scoring": "accuracy"}, "cannot compute 'accuracy_score'"),
    ({"scoring": "neg_median_absolute_error"}, "neg_mean_absolute_error"),
    ({"scoring": "explained_variance"}, "noisy"),
    ({"y_bounds": (5, -5)}, "y_bounds must be a pair"),
    ({"y_bounds": (0, np.inf)}, "y_bounds must be a pair"),
    ({"error_bound": 0.0}, "error_bound"),
    ({"error_bound": -1.0}, "error_bound"),
])
def test_regressor_bad_parameters(reg_data, kwargs, match):
    X, y = reg_data
    with pytest.raises(ValueError, match=match):
        _reg_search(**kwargs).fit(X, y)


def test_regressor_bad_input(reg_data, data):
    X, y = reg_data
    bad = y.copy()
    bad[3] = np.nan
    with pytest.raises(ValueError, match="y must be finite"):
        _reg_search().fit(X, bad)
    Xc, yc, _ = data
    with pytest.raises(ValueError, match="classifier"):
        _search(error_bound=1.0).fit(Xc, yc)
    with pytest.raises(ValueError, match="classifier"):
        _search(y_bounds=(0, 1)).fit(Xc, yc)
    with pytest.raises(ValueError, match="classifier or a regressor"):
        PrivateGridSearchCV(_Untyped(), {"quality": [1]}).fit(X, y)


class _Untyped(BaseEstimator):
    """Neither a classifier nor a regressor."""

    def __init__(self, quality=1):
        self.quality = quality

    def fit(self, X, y):
        return self

    def predict(self, X):
        return np.zeros(len(X))


# ------------------------------------------------------------ the split
def test_bernoulli_split_is_one_coin_per_record():
    """Appending a record leaves every other record's part unchanged, and
    each record is in the part with probability ``fraction``."""
    n = 50_000
    for fraction in (0.05, 0.2, 0.5):
        small = bernoulli_split(n, fraction, torch.Generator().manual_seed(7))
        large = bernoulli_split(n + 1, fraction, torch.Generator().manual_seed(7))
        assert small.dtype == torch.bool and small.shape == (n,)
        assert torch.equal(large[:n], small)
        sd = math.sqrt(fraction * (1 - fraction) / n)
        assert abs(float(small.double().mean()) - fraction) < 5 * sd
    secure = bernoulli_split(n, 0.2, SecureGenerator())
    assert abs(float(secure.double().mean()) - 0.2) < 5 * math.sqrt(0.16 / n)
    assert not torch.equal(secure, bernoulli_split(n, 0.2, SecureGenerator()))


@pytest.mark.parametrize("n, fraction", [(-1, 0.2), (10, 0.0), (10, 1.0), (10, float("nan"))])
def test_bernoulli_split_bad_input(n, fraction):
    with pytest.raises(ValueError, match="n_samples|fraction"):
        bernoulli_split(n, fraction, torch.Generator())


# ------------------------------------------------------- own randomness
def _spy_fits(monkeypatch):
    """List that collects every fitted candidate (and the refit), in order."""
    fits = []
    fit_candidate = _private_search._fit_candidate

    def spy(*args, **kwargs):
        result = fit_candidate(*args, **kwargs)
        fits.append(result[0])
        return result

    monkeypatch.setattr(_private_search, "_fit_candidate", spy)
    return fits


def test_candidates_and_refit_draw_their_own_noise(data, monkeypatch):
    """Two identical candidates (same seed of their own, same training
    part) must not get the same noise, nor the refit theirs."""
    X, y, _ = data
    fits = _spy_fits(monkeypatch)
    search = PrivateGridSearchCV(_clf(), {"learning_rate": [1.0, 1.0]}, refit_share=0.3,
                                 random_state=0).fit(X, y)
    first, second, refit = fits
    assert refit is search.best_estimator_
    assert not np.allclose(first.coef_, second.coef_)
    seeds = [est.random_state for est in fits]
    assert all(isinstance(s, int) for s in seeds) and len(set(seeds)) == 3
    # the seeds derive from the search's: reproducible
    fits.clear()
    PrivateGridSearchCV(_clf(), {"learning_rate": [1.0, 1.0]}, refit_share=0.3,
                        random_state=0).fit(X, y)
    assert [est.random_state for est in fits] == seeds


def test_every_step_of_a_fit_gets_its_own_seed(data, monkeypatch):
    X, y, _ = data
    fits = _spy_fits(monkeypatch)
    pipe = Pipeline([
        ("scale", DPStandardScaler(epsilon=0.1, delta=1e-6, bounds=(-5, 5), random_state=0)),
        ("clf", _clf()),
    ])
    PrivateGridSearchCV(pipe, {"clf__learning_rate": [1.0]}, random_state=0).fit(X, y)
    seeds = [step.random_state for fit in fits for step in (fit["scale"], fit["clf"])]
    assert len(set(seeds)) == 4


def test_unseeded_search_fits_with_unpredictable_noise(data, monkeypatch):
    X, y, _ = data
    fits = _spy_fits(monkeypatch)
    search = PrivateGridSearchCV(_clf(), {"learning_rate": [1.0, 1.0]}).fit(X, y)
    assert len(fits) == 3 and all(est.random_state is None for est in fits)
    assert search.best_estimator_.random_state is None
    assert not np.allclose(fits[0].coef_, fits[1].coef_)


def test_grid_may_not_set_random_state(data):
    X, y, _ = data
    for grid in ({"random_state": [0, 1]},
                 {"clf__random_state": [0, 1]}):
        estimator = _clf() if "random_state" in grid else Pipeline([("clf", _clf())])
        with pytest.raises(ValueError, match="random_state"):
            PrivateGridSearchCV(estimator, grid, random_state=0).fit(X, y)


# ------------------------------------------------------------ fit times
@pytest.mark.parametrize("refit_share", [0.0, 0.3])
def test_no_fit_times_are_exposed(data, refit_share):
    X, y, _ = data
    pipe = Pipeline([
        ("scale", DPStandardScaler(epsilon=0.1, delta=1e-6, bounds=(-5, 5), random_state=0)),
        ("clf", _clf()),
    ])
    search = PrivateGridSearchCV(pipe, {"clf__learning_rate": [0.5, 1.0]},
                                 refit_share=refit_share, random_state=0).fit(X, y)
    assert not hasattr(search, "refit_time_")
    for step in search.best_estimator_:
        assert getattr(step, "fit_time_", None) is None
    assert not any("time" in key for key in search.cv_results_)


# -------------------------------------------------- non-private diagnostics
def _raco(**kwargs):
    return DPRateConstrainedClassifier(batch_size=150, max_epochs=1, random_state=0, **kwargs)


@pytest.mark.parametrize("estimator, grid, path", [
    (_raco(solver_options={"record_gradient_norms": True}), {"learning_rate": [0.2]},
     "solver_options"),
    (_raco(), {"solver_options": [None, {"record_gradient_norms": True}]}, "solver_options"),
    (Pipeline([("clf", _raco())]), {"clf__solver_options": [{"record_gradient_norms": True}]},
     "clf__solver_options"),
])
def test_non_private_diagnostics_are_refused(data, estimator, grid, path):
    X, y, groups = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with pytest.raises(ValueError, match=(rf"{path}\['record_gradient_norms'\]=True.*"
                                              rf"Leave 'record_gradient_norms' out of {path}")):
            PrivateGridSearchCV(estimator, grid, random_state=0).fit(
                X, y, **({"clf__sensitive_features": groups} if "clf__" in path
                         else {"sensitive_features": groups}))


@pytest.mark.filterwarnings("ignore:Lagrange multipliers keep growing")
def test_diagnostics_off_are_fine(data):
    X, y, groups = data
    search = PrivateGridSearchCV(_raco(), {"solver_options": [
        {"record_gradient_norms": False}]}, random_state=0).fit(X, y, sensitive_features=groups)
    assert "gradient_norms" not in search.best_estimator_.history_
    assert search.epsilon_ <= 1.0


class _DebugSGD(DPSGDClassifier):
    """A private step (opted in) that declares ``verbose`` a non-private
    diagnostic."""

    __skdp_private__ = True
    __skdp_non_private_params__ = ("verbose",)


def test_declared_non_private_diagnostics_are_refused(data):
    X, y, _ = data
    with pytest.raises(ValueError, match=r"verbose=1 \(the grid sets it\).*verbose=False"):
        PrivateGridSearchCV(_DebugSGD(batch_size=150, max_epochs=1, random_state=0),
                            {"verbose": [0, 1]}, random_state=0).fit(X, y)


# ------------------------------------------------- stability deltas
def _categorical_data(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    X = np.empty((n, 2), dtype=object)
    X[:, 0] = rng.normal(size=n)
    X[:, 1] = rng.choice(["a", "b", "c"], n)
    y = ((X[:, 0].astype(float) > 0) ^ (X[:, 1] == "a")).astype(int)
    return X, y


def _stable_pipeline(encoder_delta):
    """A pipeline whose encoder picks its categories without candidates
    (a stability delta per fit)."""
    return Pipeline([
        ("pre", ColumnTransformer([
            ("num", DPStandardScaler(epsilon=0.1, delta=1e-6, bounds=(-5, 5), random_state=0),
             [0]),
            ("cat", DPOneHotEncoder(epsilon=0.1, delta=encoder_delta, random_state=0), [1]),
        ])),
        ("clf", _clf()),
    ])


@pytest.mark.parametrize("refit_share", [0.0, 0.5])
def test_stability_deltas_fit_in_the_requested_delta(refit_share):
    X, y = _categorical_data()
    search = PrivateGridSearchCV(_stable_pipeline(1e-7), {"clf__learning_rate": [0.2, 1.0]},
                                 refit_share=refit_share, random_state=0).fit(X, y)
    assert search.delta_ <= search.delta
    assert search.selection_delta_ > 0
    # the events are read at what the stability terms leave of delta
    assert search.event_delta_ < search.delta
    assert search.delta_ == pytest.approx(
        search.event_delta_ + math.exp(search.epsilon_) * search.selection_delta_, rel=1e-12)
    assert search.epsilon_ == pytest.approx(
        compute_epsilon(search.dp_event_, search.event_delta_), rel=1e-9)
    assert search.epsilon_ <= search.epsilon
    split = search.budget_split_
    for part in ("training_part", "validation_part"):
        assert split[part]["delta"] <= search.delta_
        assert split[part]["epsilon"] == pytest.approx(
            compute_epsilon(split[part]["dp_event"], search.event_delta_), rel=1e-9)
    # every fit's encoder adds its stability delta (exp(epsilon) times it)
    n_fits = 2 + (refit_share > 0)
    assert search.selection_delta_ <= n_fits * 1e-7 / 2


def test_stability_deltas_beyond_the_request_raise():
    """Without candidates each encoder fit may release a category of one
    record with probability up to delta_enc / 2; with the encoder's
    default delta (the search's) two candidates and a refit exceed it."""
    X, y = _categorical_data()
    search = PrivateGridSearchCV(_stable_pipeline(1e-5), {"clf__learning_rate": [0.2, 1.0]},
                                 random_state=0)
    with pytest.raises(ValueError, match=r"delta=1e-05.*pre__cat__delta.*candidate_categories"):
        search.fit(X, y)
