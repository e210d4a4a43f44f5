"""scikit-learn's estimator checks for every skdp estimator."""

import numpy as np
import pytest
from sklearn.base import clone, is_regressor
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdp import DPRateConstrainedClassifier, DPSGDClassifier, DPSGDRegressor

ESTIMATORS = [
    # default constructors: what a new user gets
    DPSGDClassifier(),
    DPRateConstrainedClassifier(),
    DPSGDClassifier(batch_size=8, max_epochs=20, random_state=0),
    DPSGDClassifier(batch_size=8, max_epochs=5, hidden_layer_sizes=(4,), random_state=0),
    DPRateConstrainedClassifier(batch_size=8, max_epochs=20, random_state=0),
    DPRateConstrainedClassifier(
        constraint="false_negative_rate", tolerance=0.3, batch_size=8, max_epochs=5,
        hidden_layer_sizes=(4,), random_state=0,
    ),
    DPSGDRegressor(),
]


#: Why weights are not repetitions in a DP fit (see tests/test_sample_weight.py).
SAMPLE_WEIGHT_EQUIVALENCE = (
    "a weight is not a repetition under DP: records are Poisson-sampled one by one "
    "(k copies are k independent draws and change n, hence the sampling rate and the "
    "step count), weights above max_sample_weight (default 1) are clipped, and each "
    "record's contribution is w / max_sample_weight of a clipped gradient"
)


def _expected_failures(estimator):
    return {"check_sample_weight_equivalence_on_dense_data": SAMPLE_WEIGHT_EQUIVALENCE}


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=_expected_failures)
def test_sklearn_compatible(estimator, check):
    check(estimator)


# ---------------------------------------------------- row-wise predictions
def _row_invariance_estimators():
    from skdp import (
        DPBilevelLogisticRegression,
        DPBilevelRidge,
        DPDROClassifier,
        DPDRORegressor,
        DPFERMIClassifier,
    )

    mlp = dict(hidden_layer_sizes=(16, 8), random_state=0)
    return [
        DPSGDClassifier(max_steps=20, random_state=0),
        DPSGDClassifier(max_steps=20, **mlp),
        DPRateConstrainedClassifier(max_steps=20, **mlp),
        DPFERMIClassifier(max_steps=20, **mlp),
        DPDROClassifier(max_steps=20, **mlp),
        DPBilevelLogisticRegression(random_state=0),
        DPSGDRegressor(max_steps=20, **mlp),
        DPDRORegressor(max_steps=20, **mlp),
        DPBilevelRidge(random_state=0),
    ]


@pytest.mark.parametrize("estimator", _row_invariance_estimators(), ids=lambda e: repr(e))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_predictions_do_not_depend_on_the_other_rows(estimator, dtype):
    """A row's scores are the same whatever else is in the call, far below
    scikit-learn's 1e-7 tolerance: inference runs in float64, where a
    different blocking of the matrix products moves a score by ~1e-16
    relative (in float32 it moved MLP scores by up to 1e-3 relative)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 12)).astype(dtype)
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    if is_regressor(estimator):
        y = X[:, 0] - 2.0 * X[:, 1] + 0.1 * rng.normal(size=600)
        methods = ["predict"]
    else:
        methods = ["decision_function", "predict_proba", "predict"]
    fitted = clone(estimator).fit(X, y)
    for method in methods:
        full = getattr(fitted, method)(X)
        # every call builds the model: calls of 1 and 3 rows cover the first 90 rows
        for size, rows in ((1, 90), (3, 90), (16, 600), (37, 600), (255, 600)):
            parts = np.concatenate(
                [getattr(fitted, method)(X[i:i + size]) for i in range(0, rows, size)]
            )
            np.testing.assert_allclose(parts, full[:rows], rtol=1e-10, atol=1e-12,
                                       err_msg=f"{method}, calls of {size} rows")


# ------------------------------------------- one screen of parameters
def _every_estimator():
    from skdp import (
        DPBilevelLogisticRegression,
        DPBilevelRidge,
        DPDROClassifier,
        DPDRORegressor,
        DPFERMIClassifier,
    )

    return [DPSGDClassifier, DPSGDRegressor, DPRateConstrainedClassifier, DPFERMIClassifier,
            DPDROClassifier, DPDRORegressor, DPBilevelRidge, DPBilevelLogisticRegression]


@pytest.mark.parametrize("Estimator", _every_estimator(), ids=lambda c: c.__name__)
def test_one_screen_of_parameters(Estimator):
    """Every estimator's constructor fits on a screen (at most 25
    parameters); the rest are solver options, each documented."""
    import inspect

    params = inspect.signature(Estimator).parameters
    assert len(params) <= 25, sorted(params)
    assert "solver_options" in params
    for key in Estimator._solver_option_specs:
        assert f"``{key!r}``" in Estimator.__doc__, key
        assert key not in params, key


#: The fitted attributes every estimator has, with the same meaning.
SHARED_ATTRIBUTES = ("n_steps_", "noise_multiplier_", "sampling_rate_", "epsilon_", "delta_",
                     "dp_event_", "privacy_report_", "privacy_unit_", "n_features_in_")


@pytest.mark.parametrize("Estimator", _every_estimator(), ids=lambda c: c.__name__)
def test_shared_fitted_attributes(Estimator):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 3))
    y = (X[:, 0] > 0).astype(int) if not is_regressor(Estimator()) else X[:, 0]
    steps = ({"n_outer_iter": 2, "inner_steps": 5} if "n_outer_iter" in Estimator().get_params()
             else {"max_steps": 10})
    est = Estimator(epsilon=1.0, random_state=0, **steps).fit(X, y)
    for name in SHARED_ATTRIBUTES:
        assert hasattr(est, name), name
    assert np.all(np.asarray(est.n_steps_) >= 1)
    assert np.all(np.asarray(est.noise_multiplier_) > 0)
    assert np.all((np.asarray(est.sampling_rate_) > 0) & (np.asarray(est.sampling_rate_) <= 1))
    assert 0 < est.epsilon_ <= 1.0 + 1e-9 and est.delta_ > 0
    assert est.privacy_report_.dp_event == est.dp_event_ and est.privacy_unit_ == "record"
