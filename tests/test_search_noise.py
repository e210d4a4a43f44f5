"""What a private search says about its own noise: the noise standard
deviation of every reported score (``cv_results_["std_noise_test_<name>"]``),
the warning when the choice is within that noise, and the warnings of the
candidates' fits, which name the candidate."""

import math
import re
import warnings

import numpy as np
import pytest
import sklearn
import torch
from sklearn.metrics import get_scorer

from skdp import DPSGDClassifier, DPSGDRegressor
from skdp.metrics import get_fairness_scorer
from skdp.model_selection import PrivateGridSearchCV, best_within
from skdp.model_selection import _private_search, _selection

CLASSES = np.array([0, 1])


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


def _metrics(*names):
    scorers = {
        "accuracy": get_scorer("accuracy"),
        "balanced_accuracy": get_scorer("balanced_accuracy"),
        "f1": get_scorer("f1"),
        "dpd": get_fairness_scorer("demographic_parity_difference"),
        "eod": get_fairness_scorer("equalized_odds_difference"),
        "wga": get_fairness_scorer("worst_group_accuracy"),
    }
    return {name: _selection.HistogramMetric(name, scorers[name]) for name in names}


def _histograms():
    """Counts by (candidate, group, true label, predicted label) of two
    candidates on 2 x 1500 validation records, far from the kinks of the
    gap metrics (max, min, abs): demographic-parity gaps 0.15 and 0.2,
    equalized-odds gaps 0.25 and 0.27 (true-positive rates; the false-positive
    gaps are 0.01 and 0.1), group accuracies 0.88 / 0.77 and 0.82 / 0.75."""
    return np.array([
        [[[650, 100], [80, 670]], [[700, 100], [250, 450]]],
        [[[600, 150], [120, 630]], [[720, 80], [300, 400]]],
    ], dtype=np.float64)


# --------------------------------------------------- 1. noise of the scores
def test_accuracy_noise_std_is_the_delta_method():
    """accuracy = sum(correct cells) / sum(cells): its gradient with respect
    to a cell is (1 - acc) / N on the diagonal and -acc / N off it, so with
    independent noise of std sigma per cell, std = sigma / N * sqrt(
    n_diag (1 - acc)^2 + n_off acc^2)."""
    counts = _histograms()
    sigma = 12.0
    noisy = counts + np.random.default_rng(1).normal(scale=sigma, size=counts.shape)
    noise = _selection.histogram_score_noise(noisy, CLASSES, _metrics("accuracy"), sigma)
    scores = _selection.histogram_scores(noisy, CLASSES, _metrics("accuracy"))["accuracy"]
    total = noisy.reshape(2, -1).sum(axis=1)
    n_diag = n_off = 4  # 2 groups x 2 cells each
    expected = sigma / total * np.sqrt(n_diag * (1 - scores) ** 2 + n_off * scores**2)
    np.testing.assert_allclose(noise["accuracy"].std, expected, rtol=1e-5)
    # independent noise per candidate: the difference adds in quadrature
    assert noise["accuracy"].difference_std(0, 1) == pytest.approx(
        math.hypot(expected[0], expected[1]), rel=1e-5)


@pytest.mark.parametrize("name", ["accuracy", "balanced_accuracy", "f1", "dpd", "eod", "wga"])
def test_histogram_noise_std_matches_monte_carlo(name):
    """The delta-method std of each score at the released histogram agrees
    with the std of the score over fresh draws of the public noise around
    it (post-processing of the release; 800 draws, 2.5 % standard error)."""
    counts = _histograms()
    sigma = 15.0
    generator = torch.Generator().manual_seed(3)
    released = (torch.as_tensor(counts) + sigma * torch.randn(
        counts.shape, generator=generator, dtype=torch.float64)).numpy()
    metrics = _metrics(name)
    noise = _selection.histogram_score_noise(released, CLASSES, metrics, sigma)[name]
    rng = np.random.default_rng(4)
    draws = 800
    for k in range(counts.shape[0]):
        redrawn = released[k][None] + rng.normal(scale=sigma, size=(draws, *counts.shape[1:]))
        scores = _selection.histogram_scores(redrawn, CLASSES, metrics)[name]
        assert noise.std[k] == pytest.approx(np.std(scores), rel=0.1)
    assert noise.std.shape == (counts.shape[0],)
    assert np.all(noise.std > 0)


def _regression_release(metric_names, seed=0):
    """Exact error sums of 3 candidates on 400 validation records, released
    once with the plan's noise."""
    rng = np.random.default_rng(seed)
    m = 400
    y = rng.uniform(-10, 10, size=m)
    predictions = y[None, :] + rng.normal(scale=[[2.0], [2.3], [3.0]], size=(3, m))
    metrics = {name: _selection.LossMetric(name, get_scorer(name)) for name in metric_names}
    losses = sorted({metric.loss for metric in metrics.values()}, reverse=True)
    moments = any(metric.needs_moments for metric in metrics.values())
    y_bounds = (-10.0, 10.0)
    sums, stats = _selection.error_sums(predictions, y, losses, 8.0, y_bounds, moments)
    noisy_sums, noisy_stats, report = _selection.release_error_sums(
        sums, stats, 8.0, 2.0, 1e-5, torch.Generator().manual_seed(seed))
    scales = {loss: report.scale(_selection.LOSS_RELEASES[loss]) for loss in losses}
    scales["moments"] = report.scale(_selection.MOMENTS)
    return metrics, noisy_sums, noisy_stats, scales, y_bounds


@pytest.mark.parametrize("name", ["neg_mean_squared_error", "neg_root_mean_squared_error",
                                  "neg_mean_absolute_error", "r2"])
def test_regression_noise_std_matches_monte_carlo(name):
    """The same for the regressors' scores, including the noise the
    candidates share (the noisy count and target moments): the std of the
    difference of two candidates' scores is checked too."""
    metrics, noisy_sums, noisy_stats, scales, y_bounds = _regression_release([name])
    noise_by_release = {_selection.LOSS_RELEASES[loss]: s for loss, s in scales.items()
                        if loss != "moments"}
    noise_by_release[_selection.MOMENTS] = scales["moments"]
    noise = _selection.loss_score_noise(noisy_sums, noisy_stats, metrics, noise_by_release,
                                        y_bounds)[name]
    rng = np.random.default_rng(5)
    draws = 4000
    scores = np.empty((draws, 3))
    for b in range(draws):
        sums = {loss: values + rng.normal(scale=scales[loss], size=values.shape)
                for loss, values in noisy_sums.items()}
        stats = noisy_stats + rng.normal(scale=scales["moments"], size=noisy_stats.shape)
        scores[b] = _selection.loss_scores(sums, stats, metrics, y_bounds)[name]
    np.testing.assert_allclose(noise.std, scores.std(axis=0), rtol=0.1)
    assert noise.difference_std(0, 2) == pytest.approx(
        np.std(scores[:, 0] - scores[:, 2]), rel=0.1)
    # the shared noise cancels in the difference: smaller than in quadrature
    assert noise.difference_std(0, 2) <= math.hypot(noise.std[0], noise.std[2]) * (1 + 1e-9)


def test_cv_results_report_the_noise_of_every_score(data):
    X, y, groups = data
    scoring = {"accuracy": "accuracy", "f1": "f1",
               "dpd": get_fairness_scorer("demographic_parity_difference")}
    with sklearn.config_context(enable_metadata_routing=True), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        search = PrivateGridSearchCV(_clf(), {"learning_rate": [0.2, 1.0, 2.0]},
                                     scoring=scoring, refit="accuracy", random_state=0)
        search.fit(X, y, sensitive_features=groups)
    results = search.cv_results_
    for name in scoring:
        std = results[f"std_noise_test_{name}"]
        assert std.shape == (3,) and np.all(np.isfinite(std)) and np.all(std > 0)
    # accuracy's noise: the closed form of the delta method, from the noisy
    # total (sigma / N_val * sqrt(...)); N_val is about 600 validation records
    sigma = search.budget_split_["selection_noise_std"]
    acc = results["mean_test_accuracy"]
    n_cells = 8  # 2 groups x 2 x 2: 4 correct, 4 wrong
    ratio = results["std_noise_test_accuracy"] / (
        sigma * np.sqrt(n_cells / 2 * ((1 - acc) ** 2 + acc**2)))
    assert np.all((1 / 900 < ratio) & (ratio < 1 / 300))  # 1 / N_val


def test_regressor_cv_results_report_the_noise():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(3000, 4))
    y = X @ np.array([4.0, -3.0, 2.0, 0.0]) + 2.0 * rng.normal(size=3000)
    search = PrivateGridSearchCV(
        DPSGDRegressor(batch_size=150, max_epochs=2, random_state=0),
        {"alpha": [1e-4, 0.1]}, scoring=["neg_mean_squared_error", "r2"],
        refit="neg_mean_squared_error", y_bounds=(-30.0, 30.0), error_bound=20.0,
        random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        search.fit(X, y)
    for name in ("neg_mean_squared_error", "r2"):
        std = search.cv_results_[f"std_noise_test_{name}"]
        assert std.shape == (2,) and np.all(np.isfinite(std)) and np.all(std > 0)
    # the MSE's own noise: sigma of the squared-error sums over the count
    sigma = search.budget_split_["selection_noise_stds"]["validation_squared_errors"]
    std = search.cv_results_["std_noise_test_neg_mean_squared_error"]
    assert np.all(std >= sigma / 900) and np.all(std <= 2 * sigma / 300)


# ------------------------------------------------ 2. a choice within noise
def _noise(std):
    return _selection.ScoreNoise(np.asarray(std, dtype=float))


def test_choice_within_noise_is_flagged():
    results = {"params": [{"c": 1}, {"c": 2}, {"c": 3}],
               "mean_test_score": np.array([0.80, 0.83, 0.82])}
    # best 0.83, runner-up 0.82: difference 0.01 < hypot(0.01, 0.01) = 0.014
    message = _private_search._choice_within_noise(
        results, {"score": _noise([0.01, 0.01, 0.01])}, "score")
    assert message is not None
    for part in ("'score'", "0.83", "0.82", "0.0141", "{'c': 2}", "{'c': 3}",
                 "validation_fraction", "epsilon", "fewer candidates"):
        assert part in message
    # separated by more than the noise of the difference: no message
    assert _private_search._choice_within_noise(
        results, {"score": _noise([0.001, 0.001, 0.001])}, "score") is None
    # one candidate: nothing to compare
    assert _private_search._choice_within_noise(
        {"params": [{}], "mean_test_score": np.array([0.5])}, {"score": _noise([0.1])},
        "score") is None


def test_best_within_near_the_bound_is_flagged():
    params = [{"c": i} for i in range(4)]
    results = {"params": params,
               "mean_test_acc": np.array([0.90, 0.85, 0.80, 0.70]),
               "mean_test_dpd": np.array([-0.012, -0.03, -0.005, -0.001])}
    rule = best_within("dpd", 0.01, score="acc")
    assert rule(results) == 2
    quiet = {"acc": _noise([0.001] * 4), "dpd": _noise([0.0005] * 4)}
    assert rule.within_noise(results, quiet, 2) is None
    # candidate 0 is more accurate and its gap 0.012 is within its noise
    # 0.004 of the bound: it may well qualify
    near = {"acc": _noise([0.001] * 4), "dpd": _noise([0.004, 0.0005, 0.0005, 0.0005])}
    message = rule.within_noise(results, near, 2)
    assert message is not None
    for part in ("best_within('dpd', 0.01", "0.012", "0.004", "{'c': 0}", "{'c': 2}",
                 "epsilon", "validation_fraction"):
        assert part in message
    # the chosen candidate itself within noise of the bound
    chosen_near = {"acc": _noise([0.001] * 4), "dpd": _noise([0.0005, 0.0005, 0.006, 0.0005])}
    assert "{'c': 2}" in rule.within_noise(results, chosen_near, 2)
    # the chosen and the runner-up among qualifying candidates tie within noise
    tied = {"acc": _noise([0.001, 0.001, 0.08, 0.08]), "dpd": _noise([0.0005] * 4)}
    message = rule.within_noise(results, tied, 2)
    assert message is not None and "runner-up" in message and "{'c': 3}" in message


def test_search_warns_iff_its_choice_is_within_noise(data):
    """Two candidates with the same settings differ only by the noise of
    their fits; with little validation data their noisy accuracies are
    within the selection noise. The warning is raised exactly when the
    released values say so, and names the scorer and the figures."""
    X, y, _ = data
    warned = 0
    for seed in range(5):
        search = PrivateGridSearchCV(_clf(), {"learning_rate": [1.0, 1.0]},
                                     validation_fraction=0.05, epsilon=0.5, random_state=seed)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            search.fit(X, y)
        messages = [str(w.message) for w in caught if "within the selection noise" in
                    str(w.message)]
        scores = search.cv_results_["mean_test_score"]
        std = search.cv_results_["std_noise_test_score"]
        within = abs(scores[0] - scores[1]) < math.hypot(*std)
        assert bool(messages) == within, (seed, scores, std)
        if messages:
            warned += 1
            assert all(issubclass(w.category, UserWarning) for w in caught
                       if "within the selection noise" in str(w.message))
            assert "'score'" in messages[0] and "validation_fraction" in messages[0]
            assert f"{max(scores):.4g}" in messages[0]
    assert warned >= 1


def test_search_does_not_warn_when_the_choice_is_clear(data):
    X, y, _ = data
    # a learning rate of 1e-4 without momentum barely moves in 2 epochs
    search = PrivateGridSearchCV(_clf(), {"learning_rate": [1e-4, 1.0],
                                          "solver_options": [{"momentum": 0.0}]},
                                 epsilon=8.0, validation_fraction=0.5, random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        search.fit(X, y)
    assert not [w for w in caught if "selection noise" in str(w.message)]
    scores = search.cv_results_["mean_test_score"]
    assert abs(scores[1] - scores[0]) > 3 * math.hypot(*search.cv_results_["std_noise_test_score"])


def test_search_warns_when_best_within_is_decided_by_noise(data):
    """The bound does not change what is released (same seed, same noisy
    cv_results_); a bound within the noise of the most accurate candidate's
    gap makes the rule's decision a matter of noise."""
    X, y, groups = data
    scoring = {"accuracy": "accuracy",
               "dpd": get_fairness_scorer("demographic_parity_difference")}

    def fit(bound):
        search = PrivateGridSearchCV(_clf(), {"learning_rate": [0.05, 0.2, 1.0]},
                                     scoring=scoring, refit=best_within("dpd", bound),
                                     random_state=0)
        with sklearn.config_context(enable_metadata_routing=True), \
                warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            search.fit(X, y, sensitive_features=groups)
        return search, [str(w.message) for w in caught if "selection noise" in str(w.message)]

    loose, messages = fit(1.0)  # every gap far below 1: only the accuracies decide
    assert not any("side of the bound" in m for m in messages)
    results = loose.cv_results_
    top = int(np.argmax(results["mean_test_accuracy"]))
    gap, std = -results["mean_test_dpd"][top], results["std_noise_test_dpd"][top]
    bound = float(max(gap - 0.5 * std, 0.0))
    tight, messages = fit(bound)
    np.testing.assert_array_equal(tight.cv_results_["mean_test_dpd"], results["mean_test_dpd"])
    assert messages, (gap, std)
    assert f"best_within('dpd', {bound!r}" in messages[0]
    side = messages[0][messages[0].index("side of the bound"):]
    assert str(results["params"][top]) in side


# ------------------------------------------- 3. warnings name the candidate
@pytest.mark.parametrize("n_jobs", [None, 2])
def test_candidate_warnings_name_the_candidate(data, n_jobs):
    """DPSGDClassifier warns when its delta is not below 1/n_samples (here
    1e-3 on about 2400 training-part records, and 3000 at the refit). The
    search re-emits each fit's warnings prefixed with the candidate's
    parameters (or "refit"), in the same category, also from worker
    processes."""
    X, y, _ = data
    grid = {"learning_rate": [0.2, 1.0]}
    search = PrivateGridSearchCV(_clf(delta=1e-3), grid, refit_share=0.3, n_jobs=n_jobs,
                                 random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        search.fit(X, y)
    about_delta = [w for w in caught if "is not smaller than 1/n_samples" in str(w.message)]
    messages = sorted(str(w.message) for w in about_delta)
    assert all(w.category is UserWarning for w in about_delta)
    for lr in grid["learning_rate"]:
        assert sum(m.startswith(f"[candidate {{'learning_rate': {lr}}}] delta=0.001 is not")
                   for m in messages) == 1, messages
    refit = [m for m in messages if m.startswith("[refit ")]
    assert len(refit) == 1 and str(search.best_params_) in refit[0]
    assert len(messages) == 3  # nothing unprefixed


def test_candidate_warnings_respect_the_callers_filters(data):
    """A filter on the original text still silences it; "error" raises."""
    X, y, _ = data
    search = PrivateGridSearchCV(_clf(delta=1e-3), {"learning_rate": [1.0]}, random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", message=re.escape("delta=0.001 is not smaller"))
        search.fit(X, y)
    assert not [w for w in caught if "1/n_samples" in str(w.message)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        with pytest.raises(UserWarning, match="1/n_samples"):
            search.fit(X, y)
