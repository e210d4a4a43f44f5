"""No silent failures: a classifier that returns a (nearly) constant model,
or probabilities worse than a constant predictor's, says so, from a private
check of the returned model (an accounted release in ``dp_event_``)."""

import warnings

import numpy as np
import pytest

from skdp import (
    DPBilevelLogisticRegression,
    DPDROClassifier,
    DPFERMIClassifier,
    DPRateConstrainedClassifier,
    DPSGDClassifier,
)
from skdp.exceptions import ModelCheckWarning
from skdp.privacy import compute_epsilon

CLASSIFIERS = {
    "dpsgd": (DPSGDClassifier, {}),
    "raco": (DPRateConstrainedClassifier, {"groups": True}),
    "fermi": (DPFERMIClassifier, {"groups": True}),
    "fermi_silos": (DPFERMIClassifier, {"groups": True, "silos": True}),
    "dro": (DPDROClassifier, {}),
    "bilevel": (DPBilevelLogisticRegression, {}),
}


def _credit(n=20_000, seed=0):
    """A consumer-lending-like table: about a fifth positives, a binary
    group, and amounts on raw scales (up to millions)."""
    rng = np.random.default_rng(seed)
    group = rng.integers(0, 2, n)
    income = rng.lognormal(10.5, 0.6, n)            # tens of thousands
    loan = rng.lognormal(12.0, 0.8, n)              # up to millions
    age = rng.integers(18, 80, n).astype(float)
    score = 1.5 * np.log(loan / income) - 0.03 * (age - 45) + 0.3 * group - 4.0
    y = (rng.random(n) < 1 / (1 + np.exp(-score))).astype(int)
    X = np.column_stack([income, loan, age, rng.normal(size=n)])
    return X, y, group


def _fit(name, X, y, group, **params):
    estimator, options = CLASSIFIERS[name]
    kwargs = {}
    if options.get("groups"):
        kwargs["sensitive_features"] = group
    if options.get("silos"):
        kwargs["silo_ids"] = np.arange(len(y)) % 3
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = estimator(random_state=0, **params).fit(X, y, **kwargs)
    return model, [str(w.message) for w in caught]


@pytest.mark.parametrize("name", sorted(CLASSIFIERS))
def test_raw_scale_input_trains_a_useful_model_or_warns(name):
    X, y, group = _credit()
    model, messages = _fit(name, X, y, group)
    base = max(y.mean(), 1 - y.mean())
    useful = model.score(X, y) > base + 0.02
    flagged = any("constant classifier" in m or "worse than a constant" in m for m in messages)
    assert useful or flagged, (model.score(X, y), base, messages)
    # the check is part of the accounted event
    assert "model_check" in model.privacy_report_.noise
    if name != "fermi_silos":
        assert compute_epsilon(model.dp_event_, model.delta_) == pytest.approx(model.epsilon_)


@pytest.mark.parametrize("name", sorted(CLASSIFIERS))
def test_the_check_describes_the_returned_model(name):
    X, y, group = _credit()
    X = (X - X.mean(0)) / X.std(0)  # (not private: the test's own preprocessing)
    model, _ = _fit(name, X, y, group, epsilon=8.0)
    predicted = np.bincount(model.predict(X), minlength=2) / len(y)
    # 2 noise standard deviations of the summed counts, relative to n
    tolerance = 2 * model.check_noise_std_ * np.sqrt(model.prediction_counts_.size) / len(y)
    np.testing.assert_allclose(model.prediction_shares_, predicted, atol=tolerance + 1e-9)


def test_raco_judges_the_returned_model_not_its_iterates():
    """The user's report: RaCO's prediction_shares_ said about a fifth
    positives (the noisy iterates) while the returned model predicted none,
    and constraints_met_ was True."""
    X, y, group = _credit()
    model, messages = _fit("raco", X, y, group)
    positives = model.predict(X).mean()
    assert abs(model.prediction_shares_[1] - positives) < 0.02
    if positives < 0.01:
        assert any("constant classifier" in m for m in messages)


# ---------------------------------------------------------- routing off
def _frame(n=3000):
    pd = pytest.importorskip("pandas")
    X, y, group = _credit(n)
    X = (X - X.mean(0)) / X.std(0)
    frame = pd.DataFrame(X, columns=["income", "loan", "age", "noise"])
    frame["group"] = group
    frame["silo"] = np.arange(n) % 3
    return frame, y


def test_predict_with_or_without_the_fit_only_columns():
    """The group is needed only in fit: predict takes the data with or
    without the sensitive (and silo) columns."""
    frame, y = _frame()
    raco = DPRateConstrainedClassifier(sensitive_columns="group", random_state=0).fit(
        frame.drop(columns=["silo"]), y)
    fermi = DPFERMIClassifier(sensitive_columns="group", silo_column="silo",
                              random_state=0).fit(frame, y)
    features = frame[["income", "loan", "age", "noise"]]
    for model, full in ((raco, frame.drop(columns=["silo"])), (fermi, frame)):
        expected = model.predict_proba(full)
        np.testing.assert_allclose(model.predict_proba(features), expected, rtol=1e-12)
        np.testing.assert_allclose(model.predict_proba(features.to_numpy()), expected,
                                   rtol=1e-12)
    positional = DPSGDClassifier(sensitive_columns=4, random_state=0).fit(
        frame.drop(columns=["silo"]).to_numpy(), y)
    with_group = frame.drop(columns=["silo"]).to_numpy()
    np.testing.assert_allclose(positional.predict_proba(with_group[:, :4]),
                               positional.predict_proba(with_group), rtol=1e-12)
    with pytest.raises(ValueError, match="fitted on 4 features"):
        positional.predict(with_group[:, :3])


def test_a_dropped_sensitive_column_is_named_as_gone():
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    frame, y = _frame()
    numeric = ["income", "loan", "age", "noise"]
    # the ColumnTransformer drops "group" and returns an array without names
    pipe = make_pipeline(
        ColumnTransformer([("num", StandardScaler(), numeric)]),
        DPRateConstrainedClassifier(sensitive_columns="group", random_state=0),
    )
    with pytest.raises(ValueError, match="the column is gone") as error:
        pipe.fit(frame, y)
    assert "use integer column positions" not in str(error.value)
    renamed = frame.drop(columns=["group"])
    with pytest.raises(ValueError, match="they are gone"):
        DPRateConstrainedClassifier(sensitive_columns="group").fit(renamed, y)


def test_a_check_drowned_in_noise_says_so_instead_of_a_verdict():
    """60 units: the noisy total of the check is about its own noise, so its
    shares and mean log-loss are noise; the warning says the check cannot
    judge the model rather than give a verdict from noise (before, seeds 0
    and 4 said 'worse than a constant' against a constant log-loss of 0)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 3))
    y = (X[:, 0] + 0.5 * rng.normal(size=600) > 0).astype(int)
    units = rng.integers(0, 60, 600)
    for seed in (0, 4):
        # known before spending: the check is skipped, and says so
        with pytest.warns(ModelCheckWarning, match="skipped.*cannot tell") as caught:
            model = DPSGDClassifier(max_steps=30, random_state=seed).fit(X, y, unit_ids=units)
        assert not any("worse than a constant" in str(w.message) for w in caught)
        assert "model_check" not in model.privacy_report_.noise
    # enough records for the check: a verdict, not this warning
    X = rng.normal(size=(5000, 3))
    y = (X[:, 0] > 0).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DPSGDClassifier(random_state=0).fit(X, y)
