"""DPSGDClassifier: privacy report, budget enforcement, utility, errors."""

import numpy as np
import pytest
import torch
from dp_accounting import pld
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import LabelEncoder

from skdp import DPSGDClassifier
from skdp._fit.classifier import encode_labels
from skdp.privacy import PLD_DISCRETIZATION, PrivacyBudgetError, compute_epsilon


@pytest.fixture(scope="module")
def data():
    return make_classification(n_samples=3000, n_features=8, n_informative=5, random_state=0)


def test_privacy_report_matches_fresh_accountant(data):
    X, y = data
    clf = DPSGDClassifier(epsilon=1.0, batch_size=128, max_epochs=3, random_state=0).fit(X, y)
    assert clf.epsilon_ <= 1.0
    assert clf.epsilon_ >= 0.99
    fresh = pld.PLDAccountant(value_discretization_interval=PLD_DISCRETIZATION)
    assert fresh.compose(clf.dp_event_).get_epsilon(clf.delta_) == clf.epsilon_
    default = pld.PLDAccountant().compose(clf.dp_event_).get_epsilon(clf.delta_)
    assert default <= clf.epsilon_ <= default * 1.002
    # the one-off checks of the returned model (one joint Gaussian release;
    # 3,000 records are too few for DP-SGD's calibration at epsilon=1), then
    # the training steps
    initial, training = clf.dp_event_.events
    noise = clf.privacy_report_.noise
    assert set(noise) == {"model_check", "clipped_share", "gradient"}
    assert initial.noise_multiplier == pytest.approx(sum(
        noise[name].multiplier ** -2 for name in ("model_check", "clipped_share")) ** -0.5)
    assert training.count == clf.n_steps_
    assert training.event.sampling_probability == pytest.approx(128 / 3000)
    assert training.event.event.noise_multiplier == clf.noise_multiplier_


def test_fixed_noise_stops_when_budget_is_spent(data):
    X, y = data
    clf = DPSGDClassifier(epsilon=0.5, batch_size=100, max_steps=10_000, random_state=0,
                          solver_options={"noise_multiplier": 2.0}).fit(X, y)
    assert 0 < clf.n_steps_ < 10_000
    assert clf.epsilon_ <= 0.5
    assert clf.noise_multiplier_ == 2.0


def test_utility_close_to_logistic_regression(data):
    X, y = data
    X_train, X_test, y_train, y_test = X[:2000], X[2000:], y[:2000], y[2000:]
    ref = LogisticRegression().fit(X_train, y_train).score(X_test, y_test)
    private = DPSGDClassifier(epsilon=2.0, batch_size=100, random_state=0).fit(X_train, y_train)
    assert private.score(X_test, y_test) >= ref - 0.05
    nonprivate = DPSGDClassifier(epsilon=None, batch_size=100, random_state=0).fit(X_train, y_train)
    assert nonprivate.epsilon_ == np.inf and nonprivate.dp_event_ is None
    assert nonprivate.score(X_test, y_test) >= ref - 0.03


def test_noise_changes_the_model(data):
    X, y = data
    a = DPSGDClassifier(epsilon=None, batch_size=128, max_steps=50, random_state=0).fit(X, y)
    b = DPSGDClassifier(epsilon=0.5, batch_size=128, max_steps=50, random_state=0).fit(X, y)
    assert not np.allclose(a.coef_, b.coef_)


def test_multiclass_and_mlp():
    X, y = make_classification(
        n_samples=1500, n_features=6, n_informative=4, n_classes=3, random_state=1
    )
    clf = DPSGDClassifier(epsilon=4.0, batch_size=100, random_state=0).fit(X, y)
    assert clf.coef_.shape == (3, 6)
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(1), 1.0)
    assert clf.score(X, y) > 0.6
    mlp = DPSGDClassifier(
        epsilon=4.0, batch_size=100, hidden_layer_sizes=(16,), learning_rate=0.3, random_state=0
    ).fit(X, y)
    assert mlp.coef_ is None and mlp.intercept_ is None
    assert mlp.module_state_ is not None
    assert mlp.score(X, y) > 0.6
    assert mlp.decision_function(X).shape == (1500, 3)


def test_user_module_factory():
    X, y = make_classification(n_samples=600, n_features=5, random_state=2)

    def factory(n_features, n_classes):
        return torch.nn.Sequential(torch.nn.Linear(n_features, 8), torch.nn.Tanh(),
                                   torch.nn.Linear(8, n_classes))

    clf = DPSGDClassifier(epsilon=2.0, batch_size=64, module=factory, random_state=0).fit(X, y)
    assert set(clf.module_state_) == {"0.weight", "0.bias", "2.weight", "2.bias"}
    assert clf.predict(X).shape == (600,)


def test_binary_decision_function_is_one_dimensional(data):
    X, y = data
    clf = DPSGDClassifier(batch_size=128, max_epochs=1, random_state=0).fit(X, y)
    scores = clf.decision_function(X)
    assert scores.shape == (3000,)
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[(scores > 0).astype(int)])
    np.testing.assert_allclose(scores, X @ clf.coef_[0] + clf.intercept_[0], atol=1e-12)


def test_same_random_state_same_fit(data):
    X, y = data
    a = DPSGDClassifier(batch_size=128, max_epochs=2, random_state=7).fit(X, y)
    b = DPSGDClassifier(batch_size=128, max_epochs=2, random_state=7).fit(X, y)
    c = DPSGDClassifier(batch_size=128, max_epochs=2, random_state=8).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert not np.array_equal(a.coef_, c.coef_)


def test_string_labels(data):
    X, y = data
    labels = np.where(y == 1, "yes", "no")
    clf = DPSGDClassifier(batch_size=128, max_epochs=1, random_state=0).fit(X, labels)
    assert set(clf.predict(X)) <= {"yes", "no"}
    assert list(clf.classes_) == ["no", "yes"]


# ------------------------------------------------------------------ errors
def test_nan_and_inf_rejected(data):
    X, y = data
    X = X.copy()
    X[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        DPSGDClassifier().fit(X, y)
    X[0, 0] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        DPSGDClassifier().fit(X, y)


def test_epsilon_too_small_for_one_step(data):
    X, y = data
    with pytest.raises(PrivacyBudgetError, match="single step"):
        DPSGDClassifier(epsilon=1e-4, batch_size=1500,
                        solver_options={"noise_multiplier": 0.5}).fit(X, y)


def test_batch_larger_than_data(data):
    X, y = data
    with pytest.raises(ValueError, match="batch_size=5000 is larger"):
        DPSGDClassifier(batch_size=5000).fit(X, y)


def test_delta_too_large_warns(data):
    X, y = data
    with pytest.warns(UserWarning, match="delta"):
        DPSGDClassifier(delta=0.01, batch_size=128, max_steps=5).fit(X, y)


def test_non_numeric_X():
    X = np.array([["a", "b"], ["c", "d"], ["e", "f"], ["g", "h"]], dtype=object)
    with pytest.raises(ValueError, match="numeric"):
        DPSGDClassifier(batch_size=2).fit(X, [0, 1, 0, 1])


def test_invalid_parameter_message(data):
    X, y = data
    with pytest.raises(ValueError, match="epsilon"):
        DPSGDClassifier(epsilon=-1).fit(X, y)
    with pytest.raises(ValueError, match="accountant"):
        DPSGDClassifier(solver_options={"accountant": "gdp"}).fit(X, y)


def test_module_factory_must_return_module(data):
    X, y = data
    with pytest.raises(ValueError, match="torch.nn.Module"):
        DPSGDClassifier(module=lambda n, k: "nope", batch_size=128).fit(X, y)


def test_rdp_accountant(data):
    X, y = data
    clf = DPSGDClassifier(batch_size=128, max_epochs=2, random_state=0,
                          solver_options={"accountant": "rdp"}).fit(X, y)
    assert clf.epsilon_ <= 1.0
    assert compute_epsilon(clf.dp_event_, clf.delta_, "rdp") == clf.epsilon_


def test_sensitive_columns_are_dropped(data):
    pd = pytest.importorskip("pandas")
    X, y = data
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    frame["group"] = np.where(X[:, 0] > 0, "a", "b")
    clf = DPSGDClassifier(batch_size=128, max_epochs=1, sensitive_columns="group",
                          random_state=0).fit(frame, y)
    assert clf.n_features_in_ == X.shape[1]
    assert list(clf.groups_) == ["a", "b"]
    assert clf.predict(frame).shape == (3000,)


def test_sensitive_columns_by_position(data):
    X, y = data
    groups = (X[:, 0] > 0).astype(float)
    with_group = np.column_stack([X, groups])
    # without the model check, whose cells (and whether it is made) depend
    # on the groups
    clf = DPSGDClassifier(batch_size=128, max_epochs=1, sensitive_columns=-1, model_check=False,
                          random_state=0).fit(with_group, y)
    ref = DPSGDClassifier(batch_size=128, max_epochs=1, model_check=False,
                          random_state=0).fit(X, y)
    np.testing.assert_array_equal(clf.coef_, ref.coef_)
    assert list(clf.groups_) == [0.0, 1.0]
    np.testing.assert_array_equal(clf.predict(with_group), ref.predict(X))
    with pytest.raises(ValueError, match="sensitive_columns"):
        DPSGDClassifier(sensitive_columns="group").fit(X, y)


def test_torch_thread_setting_restored(data):
    X, y = data
    before = torch.get_num_threads()
    DPSGDClassifier(batch_size=128, max_epochs=1, random_state=0).fit(X, y)
    assert torch.get_num_threads() == before


def test_privacy_curve(data):
    X, y = data
    clf = DPSGDClassifier(batch_size=128, max_epochs=2, random_state=0).fit(X, y)
    clf.set_params(solver_options={"accountant": "rdp"})  # the curve uses the fit's
    curve = clf.privacy_curve(n_points=5)
    assert curve.shape == (5, 2)
    assert curve[-1, 0] == clf.n_steps_
    assert curve[-1, 1] == pytest.approx(clf.epsilon_)
    assert np.all(np.diff(curve[:, 1]) > 0)
    with pytest.raises(ValueError, match="epsilon=None"):
        DPSGDClassifier(epsilon=None, batch_size=128, max_steps=3).fit(X, y).privacy_curve()


def test_values_beyond_float32_rejected(data):
    X, y = data
    X = X.copy()
    X[0, 1] = 1e39  # finite in float64, inf in float32: would break clipping
    with pytest.raises(ValueError, match="too large"):
        DPSGDClassifier().fit(X, y)


def test_empty_batches_on_the_module_path(data):
    X, y = data
    clf = DPSGDClassifier(hidden_layer_sizes=(4,), batch_size=1, max_steps=200,
                          random_state=0).fit(X, y)
    assert all(np.isfinite(v).all() for v in clf.module_state_.values())


def test_infinite_clipping_only_without_privacy(data):
    X, y = data
    DPSGDClassifier(epsilon=None, max_grad_norm=np.inf, batch_size=128, max_steps=5).fit(X, y)
    with pytest.raises(ValueError, match="max_grad_norm=inf"):
        DPSGDClassifier(max_grad_norm=np.inf).fit(X, y)


def test_non_finite_per_sample_gradient_is_dropped():
    from skdp.privacy import clipped_module_sum

    model = torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        model.weight.zero_()
    x = torch.tensor([[0.0, 0.0], [3.0, 4.0]])

    def loss(out):  # sqrt(|h|) has an infinite gradient at h = 0
        return out[:, 0].abs().sqrt() + out[:, 0]

    sums, sq = clipped_module_sum(model, loss, x, max_norm=1.0)
    assert not torch.isfinite(sq[0])
    alone, _ = clipped_module_sum(model, loss, x[1:], max_norm=1.0)
    torch.testing.assert_close(sums["weight"], alone["weight"])


@pytest.mark.parametrize("layer", [torch.nn.BatchNorm1d(4), torch.nn.Dropout(0.5)])
def test_batchnorm_and_dropout_rejected(data, layer):
    X, y = data

    def factory(n_features, n_classes):
        return torch.nn.Sequential(torch.nn.Linear(n_features, 4), layer,
                                   torch.nn.Linear(4, n_classes))

    with pytest.raises(ValueError, match="GroupNorm"):
        DPSGDClassifier(module=factory, batch_size=128).fit(X, y)


# ----------------------------------------------------------- secure_rng
def test_secure_rng_fits_are_not_reproducible(data):
    X, y = data
    params = dict(batch_size=128, max_steps=30, random_state=0)
    seeded = [DPSGDClassifier(**params).fit(X, y) for _ in range(2)]
    np.testing.assert_array_equal(seeded[0].coef_, seeded[1].coef_)
    secure = [DPSGDClassifier(**params, solver_options={"secure_rng": True}).fit(X, y) for _ in range(2)]
    assert not np.allclose(secure[0].coef_, secure[1].coef_)
    assert not np.allclose(secure[0].coef_, seeded[0].coef_)
    # the privacy report depends on public settings only
    assert secure[0].epsilon_ == seeded[0].epsilon_
    assert secure[0].noise_multiplier_ == seeded[0].noise_multiplier_


def test_secure_rng_uses_the_os_generator(data, monkeypatch):
    from skdp.privacy import SecureGenerator

    X, y = data
    calls = []
    original = SecureGenerator.random
    monkeypatch.setattr(SecureGenerator, "random",
                        lambda self, size: calls.append(size) or original(self, size))
    DPSGDClassifier(batch_size=128, max_steps=5, random_state=0,
                    solver_options={"secure_rng": True}).fit(X, y)
    assert calls  # sampling and noise both drew from os.urandom
    calls.clear()
    DPSGDClassifier(batch_size=128, max_steps=5, random_state=0).fit(X, y)
    assert not calls


def test_secure_rng_on_the_module_path_keeps_seeded_initialisation(data):
    X, y = data
    params = dict(hidden_layer_sizes=(4,), batch_size=128, random_state=0)
    # with no step taken the model is its initialisation, which random_state still seeds
    untrained = [
        DPSGDClassifier(epsilon=None, max_steps=1, learning_rate=1e-12, **params,
                        solver_options={"secure_rng": secure}).fit(X, y)
        for secure in (False, True)
    ]
    for key, value in untrained[0].module_state_.items():
        np.testing.assert_allclose(untrained[1].module_state_[key], value, atol=1e-9)
    clf = DPSGDClassifier(max_steps=20, **params, solver_options={"secure_rng": True}).fit(X, y)
    assert all(np.isfinite(v).all() for v in clf.module_state_.values())


def test_secure_rng_is_validated(data):
    X, y = data
    with pytest.raises(ValueError, match="secure_rng"):
        DPSGDClassifier(solver_options={"secure_rng": "yes"}).fit(X, y)


# ----------------------------------------------------------- sample_rate
def test_sample_rate_matches_equivalent_batch_size(data):
    X, y = data
    q = 0.04  # 120 of the 3000 records
    by_rate = DPSGDClassifier(max_epochs=2, random_state=0,
                              solver_options={"sample_rate": q}).fit(X, y)
    by_size = DPSGDClassifier(batch_size=120, max_epochs=2, random_state=0).fit(X, y)
    assert by_rate.sampling_rate_ == q
    assert by_rate.batch_size_ == by_size.batch_size_ == 120
    assert by_rate.n_steps_ == by_size.n_steps_
    assert by_rate.epsilon_ == by_size.epsilon_
    assert by_rate.dp_event_ == by_size.dp_event_
    np.testing.assert_array_equal(by_rate.coef_, by_size.coef_)


def test_sample_rate_takes_precedence_over_batch_size(data):
    X, y = data
    clf = DPSGDClassifier(batch_size=10_000, max_steps=5, random_state=0,
                          solver_options={"sample_rate": 0.05}).fit(X, y)  # batch_size > n_samples is ignored
    assert clf.sampling_rate_ == 0.05
    assert clf.batch_size_ == 150
    assert clf.dp_event_.events[-1].event.sampling_probability == 0.05


def test_full_batch_sample_rate(data):
    X, y = data
    clf = DPSGDClassifier(max_steps=3, random_state=0, solver_options={"sample_rate": 1}).fit(X, y)
    assert clf.sampling_rate_ == 1.0 and clf.batch_size_ == len(X)


@pytest.mark.parametrize("bad", [0, 0.0, -0.1, 1.5, "0.1"])
def test_invalid_sample_rate_rejected(data, bad):
    X, y = data
    with pytest.raises(ValueError, match="sample_rate"):
        DPSGDClassifier(solver_options={"sample_rate": bad}).fit(X, y)


def test_sample_rate_below_one_record_rejected(data):
    X, y = data
    with pytest.raises(ValueError, match=r"\['sample_rate'\]=0.0001 .* less than one; use "
                                         r"a sample_rate >= 1/n_samples"):
        DPSGDClassifier(solver_options={"sample_rate": 1e-4}).fit(X, y)
    # exactly one expected record is allowed, despite rounding in 1/n * n
    n = 49  # (1 / 49) * 49 < 1 in floating point
    assert (1 / n) * n < 1
    clf = DPSGDClassifier(epsilon=None, max_steps=2,
                          solver_options={"sample_rate": 1 / n}).fit(X[:n], y[:n])
    assert clf.batch_size_ == 1


def test_solver_options_are_validated_and_reach_get_params(data):
    X, y = data
    clf = DPSGDClassifier(solver_options={"sample_rate": 0.1})
    assert clf.get_params()["solver_options"] == {"sample_rate": 0.1}
    assert clf._option("sample_rate") == 0.1 and clf._option("secure_rng") is False
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['sample_rat'\]"):
        DPSGDClassifier(solver_options={"sample_rat": 0.1}).fit(X, y)
    with pytest.raises(ValueError, match="'momentum' parameter of DPSGDClassifier "
                                         "solver_options must be"):
        DPSGDClassifier(solver_options={"momentum": 1.5}).fit(X, y)
    for key in DPSGDClassifier._solver_option_specs:  # every option documented
        assert f"``{key!r}``" in DPSGDClassifier.__doc__


# ------------------------------------------------ first-contact defaults
def test_default_noise_is_not_replayable_by_numpy_seed():
    """random_state=None draws sampling and noise from the OS CSPRNG: seeding
    numpy's global generator does not replay a default fit."""
    X, y = make_classification(n_samples=400, n_features=5, random_state=0)
    fits = []
    for _ in range(2):
        np.random.seed(0)
        fits.append(DPSGDClassifier(max_steps=30, calibration=None).fit(X, y).coef_)
    assert not np.array_equal(fits[0], fits[1])
    seeded = [DPSGDClassifier(max_steps=30, random_state=3).fit(X, y).coef_ for _ in range(2)]
    np.testing.assert_array_equal(seeded[0], seeded[1])


def test_auto_batch_size_fits_small_data():
    X, y = make_classification(n_samples=30, n_features=4, random_state=0)
    clf = DPSGDClassifier(random_state=0).fit(X, y)
    assert clf.batch_size_ == 7  # 30 // 4: never more than a quarter of the data
    big = DPSGDClassifier(max_steps=2, random_state=0).fit(*make_classification(
        n_samples=30_000, n_features=4, random_state=0))
    assert big.batch_size_ == round(12 * np.sqrt(30_000))


@pytest.mark.parametrize("device, match", [("cuda:0", "not available|use device='cpu'"),
                                           ("not-a-device", "not a torch device")])
def test_unavailable_device_is_a_clear_error(device, match):
    if device.startswith("cuda") and torch.cuda.is_available():
        pytest.skip("a CUDA device is available here")
    X, y = make_classification(n_samples=100, n_features=4, random_state=0)
    with pytest.raises(ValueError, match=match):
        DPSGDClassifier(device=device, max_steps=2).fit(X, y)


# ----------------------------------------------------------------- alpha
def test_alpha_matches_logistic_regression_without_noise():
    """alpha / 2 ||W||^2 on the two-logit softmax is LogisticRegression with
    C = 2 / (n alpha) on the sigmoid coefficient."""
    X, y = make_classification(n_samples=400, n_features=5, random_state=4)
    alpha = 0.05
    clf = DPSGDClassifier(
        epsilon=None, max_grad_norm=np.inf, batch_size=400, max_epochs=600,
        learning_rate=1.0, alpha=alpha, random_state=0,
    ).fit(X, y)
    ref = LogisticRegression(C=2 / (400 * alpha), tol=1e-10, max_iter=10_000).fit(X, y)
    np.testing.assert_allclose(clf.coef_, ref.coef_, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(clf.intercept_, ref.intercept_, rtol=1e-3, atol=1e-3)


def test_alpha_is_post_processing(data):
    """The penalty changes the model but not the privacy: same noise, same
    event, and it shrinks the weights (not the intercept)."""
    X, y = data
    # (without the calibration after training, which rescales the weights)
    plain = DPSGDClassifier(epsilon=1.0, batch_size=128, max_epochs=3, random_state=0,
                            calibration=None).fit(X, y)
    ridge = DPSGDClassifier(
        epsilon=1.0, batch_size=128, max_epochs=3, alpha=1.0, random_state=0, calibration=None
    ).fit(X, y)
    assert ridge.noise_multiplier_ == plain.noise_multiplier_
    assert ridge.epsilon_ == plain.epsilon_
    assert ridge.dp_event_ == plain.dp_event_
    assert np.linalg.norm(ridge.coef_) < 0.5 * np.linalg.norm(plain.coef_)


def test_alpha_leaves_module_biases_alone():
    from skdp._training import L2Penalty
    from skdp.models import make_backend, make_mlp

    X = torch.zeros((4, 3))
    backend = make_backend(X, 2, make_mlp(3, 2, (5,)))
    penalty = L2Penalty(backend, 2.0)
    sums = [torch.zeros_like(p) for p in backend.parameters]
    penalty.add_gradient(sums, expected_batch=1.0)
    for (name, p), g in zip(backend.module.named_parameters(), sums):
        if name.endswith("bias"):
            assert torch.all(g == 0)
        else:
            torch.testing.assert_close(g, 2.0 * p.detach())
    linear = make_backend(X, 2)
    linear.weights.fill_(1.0)
    sums = [torch.zeros_like(linear.weights)]
    L2Penalty(linear, 0.5).add_gradient(sums, expected_batch=2.0)
    assert torch.all(sums[0][:, :-1] == 1.0) and torch.all(sums[0][:, -1] == 0)


def test_negative_alpha_is_rejected(data):
    X, y = data
    with pytest.raises(ValueError, match="alpha"):
        DPSGDClassifier(alpha=-1.0).fit(X, y)


@settings(max_examples=60, deadline=None)
@given(
    dtype=st.sampled_from([np.int8, np.uint8, np.int16, np.uint16, np.int32, np.int64,
                           np.uint64]),
    values=st.lists(st.one_of(st.integers(-300, 300), st.integers(-(2**70), 2**70)),
                    min_size=1, max_size=60),
)
def test_label_encoding_matches_label_encoder(dtype, values):
    info = np.iinfo(dtype)
    y = np.array([min(max(v, info.min), info.max) for v in values], dtype=dtype)
    classes, codes = encode_labels(y)
    encoder = LabelEncoder()
    expected = encoder.fit_transform(y)
    assert classes.dtype == encoder.classes_.dtype
    np.testing.assert_array_equal(classes, encoder.classes_)
    assert codes.dtype == expected.dtype
    np.testing.assert_array_equal(codes, expected)


def test_label_encoding_of_other_labels_is_label_encoders():
    for y in (np.array(["b", "a", "b"]), np.array([0.5, 2.0, 0.5]), np.array([True, False])):
        classes, codes = encode_labels(y)
        encoder = LabelEncoder()
        np.testing.assert_array_equal(codes, encoder.fit_transform(y))
        np.testing.assert_array_equal(classes, encoder.classes_)
