"""One record, however extreme, must not reveal itself through a NaN, an
infinity or an exception: each release moves by at most its sensitivity, so
every fitted quantity that is finite without the record is finite with it.

The records tried: every feature at +3e38 (close to the float32 maximum,
which the input check accepts), a row mixing +3e38 and -3.3e38 (whose
logits are inf - inf), and a record alone in its own group.
"""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from skdp import (
    DPBilevelLogisticRegression,
    DPBilevelRidge,
    DPDROClassifier,
    DPDRORegressor,
    DPFERMIClassifier,
    DPRateConstrainedClassifier,
    DPSGDClassifier,
    DPSGDRegressor,
)
from skdp.datasets import make_fair_classification
from skdp.federated import FermiSilo
from skdp.models import top_class
from skdp.preprocessing import DPMinMaxScaler, DPStandardScaler

N = 1200


def _data():
    X, y, g = make_fair_classification(n_samples=N, n_features=4, random_state=0)
    silos = np.arange(N) % 3
    return X, y, g, silos


def _with_extreme(X, kind):
    X = X.copy()
    if kind == "huge":
        X[0] = 3e38
    else:
        X[0] = np.where(np.arange(X.shape[1]) % 2 == 0, 3e38, -3.3e38)
    return X


#: A budget at which N records are enough for every release after training
#: (calibration, model check, clipped share), so that an extreme record
#: meets them all; finiteness does not depend on epsilon.
EPSILON = 50.0

CLASSIFIERS = {
    "dpsgd": lambda: DPSGDClassifier(epsilon=EPSILON, max_steps=60, random_state=0),
    "dpsgd_mlp": lambda: DPSGDClassifier(epsilon=EPSILON, max_steps=60, hidden_layer_sizes=(8,), random_state=0),
    "raco": lambda: DPRateConstrainedClassifier(epsilon=EPSILON, max_steps=60, random_state=0),
    "raco_mlp": lambda: DPRateConstrainedClassifier(epsilon=EPSILON, max_steps=60, hidden_layer_sizes=(4,),
                                                    random_state=0),
    "fermi": lambda: DPFERMIClassifier(epsilon=EPSILON, max_steps=60, random_state=0),
    "fermi_mlp": lambda: DPFERMIClassifier(epsilon=EPSILON, max_steps=60, hidden_layer_sizes=(4,),
                                           random_state=0),
    "fermi_attribute": lambda: DPFERMIClassifier(epsilon=EPSILON, max_steps=60, privacy_unit="sensitive_attribute",
                                                 random_state=0),
    "dro_double_spider": lambda: DPDROClassifier(epsilon=EPSILON, max_steps=60, random_state=0,
                                                 solver_options={"algorithm": "double_spider"}),
    "dro_dp_sgd": lambda: DPDROClassifier(epsilon=EPSILON, max_steps=60, random_state=0,
                                          solver_options={"algorithm": "dp_sgd"}),
    "dro_recursive_spider": lambda: DPDROClassifier(epsilon=EPSILON, divergence="kl", rho=0.5, max_steps=60,
                                                    random_state=0, solver_options={"algorithm": "recursive_spider"}),
    "dro_mlp": lambda: DPDROClassifier(epsilon=EPSILON, hidden_layer_sizes=(4,), max_steps=60, random_state=0,
                                       solver_options={"algorithm": "double_spider"}),
    "bilevel_logistic": lambda: DPBilevelLogisticRegression(epsilon=EPSILON, random_state=0),
}

REGRESSORS = {
    "dpsgd": lambda: DPSGDRegressor(max_steps=60, random_state=0),
    "dpsgd_mlp": lambda: DPSGDRegressor(max_steps=60, hidden_layer_sizes=(4,), random_state=0),
    "dro": lambda: DPDRORegressor(max_steps=60, random_state=0),
    "dro_dp_sgd": lambda: DPDRORegressor(max_steps=60, random_state=0,
                                         solver_options={"algorithm": "dp_sgd"}),
    "bilevel_ridge": lambda: DPBilevelRidge(random_state=0),
}


def _finiteness(estimator):
    """Which float entries of the fitted attributes are finite, by name."""
    pattern = {}

    def visit(name, value):
        if isinstance(value, dict):
            for key, item in value.items():
                visit(f"{name}[{key!r}]", item)
            return
        if isinstance(value, (float, np.floating)) or (
            isinstance(value, np.ndarray) and value.dtype.kind == "f"
        ):
            pattern[name] = np.isfinite(np.asarray(value, dtype=np.float64))

    for name, value in vars(estimator).items():
        if name.endswith("_") and not name.startswith("_"):
            visit(name, value)
    return pattern


def _fit_kwargs(name, g, silos):
    kwargs = {}
    if name.startswith(("raco", "fermi")):
        kwargs["sensitive_features"] = g
    if name == "fermi":
        kwargs["silo_ids"] = silos
    return kwargs


def _assert_same_finiteness(clean, extreme):
    clean_pattern, extreme_pattern = _finiteness(clean), _finiteness(extreme)
    assert clean_pattern.keys() == extreme_pattern.keys()
    for name, finite in clean_pattern.items():
        np.testing.assert_array_equal(extreme_pattern[name], finite, err_msg=name)


@pytest.mark.parametrize("kind", ["huge", "mixed"])
@pytest.mark.parametrize("name", sorted(CLASSIFIERS))
def test_classifiers_survive_one_extreme_record(name, kind):
    X, y, g, silos = _data()
    kwargs = _fit_kwargs(name, g, silos)
    clean = CLASSIFIERS[name]().fit(X, y, **kwargs)
    extreme = CLASSIFIERS[name]().fit(_with_extreme(X, kind), y, **kwargs)
    _assert_same_finiteness(clean, extreme)
    assert np.isfinite(extreme.predict_proba(X)).all()


@pytest.mark.parametrize("kind", ["huge", "mixed"])
@pytest.mark.parametrize("name", sorted(REGRESSORS))
def test_regressors_survive_one_extreme_record(name, kind):
    X, y, _, _ = _data()
    target = X[:, 0] - X[:, 1] + y
    clean = REGRESSORS[name]().fit(X, target)
    extreme = REGRESSORS[name]().fit(_with_extreme(X, kind), target)
    _assert_same_finiteness(clean, extreme)
    assert np.isfinite(extreme.predict(X)).all()


@pytest.mark.parametrize("name", ["raco", "fermi", "dro_double_spider"])
def test_a_record_alone_in_its_group(name):
    X, y, g, silos = _data()
    g = g.astype(object)
    g[0] = "alone"
    estimator = CLASSIFIERS[name]()
    if name.startswith("dro"):
        estimator.fit(X, y)
    else:
        estimator.fit(X, y, **_fit_kwargs(name, g, silos))
    for key, finite in _finiteness(estimator).items():
        if key != "max_weight_":
            assert finite.all(), key
    assert np.isfinite(estimator.predict_proba(X)).all()


@pytest.mark.parametrize("scaler", [
    DPStandardScaler(bounds=(-10.0, 10.0), random_state=0),
    DPMinMaxScaler(bounds=(-10.0, 10.0), random_state=0),
    DPStandardScaler(data_range=(-1e6, 1e6), random_state=0),
    DPMinMaxScaler(data_range=(-1e6, 1e6), random_state=0),
])
def test_private_scalers_survive_one_extreme_record(scaler):
    X, _, _, _ = _data()
    extreme = X.copy()
    extreme[0] = 1e300
    extreme[1, 0] = -1e300
    fitted = scaler.fit(extreme)
    assert np.isfinite(fitted.transform(X)).all()
    assert np.isfinite(fitted.transform(extreme)).all()


def test_silo_rejects_features_beyond_float32_up_front():
    X, y, g, _ = _data()
    X = X.copy()
    X[5, 2] = 1e39  # finite in float64, inf once a silo casts it to float32
    with pytest.raises(ValueError, match="too large for float32"):
        FermiSilo(X, y, g)
    with pytest.raises(ValueError, match="too large for torch.float32"):
        DPFERMIClassifier().fit(X, y, sensitive_features=g)


@pytest.mark.parametrize("kind", ["huge", "mixed"])
@pytest.mark.parametrize("hidden", [(), (8,)])
def test_multiclass_check_survives_one_extreme_record(kind, hidden):
    """The private check of the returned model reads the training records
    again: an extreme one must not turn its release into NaN."""
    X, y, _, _ = _data()
    y3 = y + (X[:, 2] > 0.5)
    clean = DPSGDClassifier(epsilon=EPSILON, max_steps=60, hidden_layer_sizes=hidden,
                            random_state=0).fit(X, y3)
    extreme = DPSGDClassifier(epsilon=EPSILON, max_steps=60, hidden_layer_sizes=hidden,
                              random_state=0).fit(_with_extreme(X, kind), y3)
    _assert_same_finiteness(clean, extreme)
    assert np.isfinite(extreme.prediction_counts_).all() and np.isfinite(extreme.check_log_loss_)


@settings(max_examples=60, deadline=None)
@given(
    n_classes=st.integers(1, 4),
    values=st.lists(st.sampled_from([0.0, 1.0, -1.0, 2.5, 3e38, -3e38, np.inf, -np.inf, np.nan]),
                    min_size=4, max_size=48),
    dtype=st.sampled_from([torch.float64, torch.float32]),
)
def test_top_class_is_argmax_with_ties_and_non_finite_logits(n_classes, values, dtype):
    # the check's predicted class: argmax's answer (first on ties, NaN
    # counted largest), whichever path computes it
    rows = len(values) // n_classes
    logits = torch.tensor(values[: rows * n_classes], dtype=dtype).reshape(rows, n_classes)
    assert torch.equal(top_class(logits), logits.argmax(1))
    assert torch.equal(top_class(logits.T, dim=0), logits.T.argmax(0))


@settings(max_examples=60, deadline=None)
@given(
    scores=st.lists(st.one_of(st.floats(-800.0, 800.0),
                              st.sampled_from([3e38, -1e308, np.inf, -np.inf, np.nan])),
                    min_size=1, max_size=40),
    labels=st.randoms(),
    class_major=st.booleans(),
)
def test_two_class_check_terms_are_the_clipped_log_losses(scores, labels, class_major):
    # the check reads two classes class-major: its counts and clipped
    # log-losses are those of the definition (argmax's class, NaN logits as
    # 0), whichever way the caller stores the logits
    from skdp.models import CHECK_LOSS_BOUND, check_terms

    s = torch.tensor(scores, dtype=torch.float64)
    y = torch.tensor([labels.randint(0, 1) for _ in scores])
    groups = torch.tensor([labels.randint(0, 2) for _ in scores])
    logits = (torch.stack([torch.zeros_like(s), s]).T if class_major
              else torch.stack([torch.zeros_like(s), s], dim=1))
    counts, losses = check_terms(logits, y, groups, 3)
    finite = logits.nan_to_num(nan=0.0)
    expected = -torch.log_softmax(finite, dim=1).gather(1, y[:, None])[:, 0]
    expected = expected.nan_to_num(nan=CHECK_LOSS_BOUND, posinf=CHECK_LOSS_BOUND).clamp(
        0.0, CHECK_LOSS_BOUND)
    # to rounding: another CPU may take exp and log down other kernels
    torch.testing.assert_close(losses, expected, rtol=1e-12, atol=1e-14)
    cells = (groups * 2 + y) * 2 + finite.argmax(1)
    assert torch.equal(counts, torch.bincount(cells, minlength=12).double())
