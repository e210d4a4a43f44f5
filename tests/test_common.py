"""scikit-learn's estimator checks for every skdp estimator."""

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


def _expected_failures(estimator):
    return {}


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=_expected_failures)
def test_sklearn_compatible(estimator, check):
    check(estimator)
