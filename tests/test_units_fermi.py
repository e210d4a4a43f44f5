"""DP-FERMI with privacy units (``unit_ids``, issue 24): every release of a
silo bounded per unit, units sampled and bounded inside their silo, the
accounting with units in place of records, and the silo protocol (in
process and through the protocol without a network; in Flower's simulation:
tests/test_federated.py)."""

import json

import numpy as np
import pandas as pd
import pytest
import sklearn
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from skdp import DPFERMIClassifier
from skdp._fit.units import MAX_RECORDS_PER_UNIT
from skdp.datasets import make_fair_classification
from skdp.fairness.fermi._ermi import (
    default_w_radius,
    project_frobenius,
    record_cells,
    w_gradient_clip,
)
from skdp.fairness.fermi._server import silo_class_counts
from skdp.fairness.fermi._trainer import (
    FermiConfig,
    SiloContext,
    SiloData,
    SiloDraws,
    check_vector,
    silo_group_counts,
    silo_step,
)
from skdp.fairness.fermi.protocol import (
    PROTOCOL,
    Broadcast,
    SiloRandomness,
    _release_sensitivities,
    silo_unit_bounds,
    w_noise_scale,
)
from skdp.federated import (
    DirectTransport,
    FederatedError,
    FermiSilo,
    SiloPolicy,
    SiloRefusal,
    fit_federated,
)
from skdp.models import make_backend
from skdp.privacy import compute_epsilon


FAST = {"lam": 2.0, "max_steps": 12, "random_state": 0}


def _data(n=1800, n_units=240, n_silos=3, seed=0):
    """Fair-classification data; each unit (1 to ~20 records) lives in one
    silo (``unit % n_silos``)."""
    X, y, g = make_fair_classification(n_samples=n, n_features=5, label_group_correlation=0.6,
                                       random_state=seed)
    units = np.random.default_rng(seed).integers(0, n_units, n)
    return X, y, g, units, units % n_silos


# ---------------------------------------- one unit moves every release by at most
@st.composite
def panels(draw):
    """Units with 1..300 records (far above k), extreme features, k, the
    unit that goes (or whose groups change), the notion and the model."""
    sizes = draw(st.lists(st.integers(1, 300), min_size=2, max_size=5))
    return {
        "sizes": sizes, "k": draw(st.sampled_from([1, 2, 5])),
        "scale": draw(st.sampled_from([1.0, 1e3, 1e12])), "seed": draw(st.integers(0, 2**16)),
        "changed": draw(st.integers(0, len(sizes) - 1)),
        "unit": draw(st.sampled_from(["record", "sensitive_attribute"])),
        "lam": draw(st.floats(0.0, 20.0)), "mlp": draw(st.booleans()),
    }


def _silo_releases(backend, X, y, groups, factors, idx, priors, W, config):
    """Every release of one silo before noise, as sums: the round's model
    gradient, W-gradient and monitoring sums on batch ``idx``, and the
    one-off group counts, class counts and model check on all records."""
    n = len(y)
    cells = record_cells(torch.as_tensor(groups), torch.zeros(n, dtype=torch.long), 2, 1)
    onehot = torch.nn.functional.one_hot(torch.as_tensor(y), 2).to(X.dtype)
    data = SiloData.build(backend, onehot, cells, priors.numel(),
                          weights=torch.as_tensor(factors, dtype=X.dtype))
    broadcast = Broadcast(W.clone(), priors.rsqrt()).refresh()
    context = SiloContext(config, len(backend.parameters), X.dtype, X.device)
    msg = silo_step(backend, torch.as_tensor(idx, dtype=torch.long), None, data, broadcast,
                    config, context)  # expected batch 1: the messages are the sums
    weights = torch.as_tensor(factors, dtype=torch.float64)
    with torch.no_grad():
        _, logits_t = backend.forward(torch.arange(n))
    return {
        "theta": torch.cat([t.reshape(-1) for t in msg.theta]).double(),
        "w": msg.w.reshape(-1).double(),
        "monitor": msg.monitor.reshape(-1).double(),
        "group_counts": silo_group_counts(cells, (n,), priors.numel(), None, [None],
                                          weights=weights)[0],
        "model_check": torch.as_tensor(check_vector(logits_t, torch.as_tensor(y),
                                                    torch.as_tensor(groups), 2, None, None,
                                                    weights)),
        "class_counts": torch.as_tensor(silo_class_counts(y, 2, None, None, factors)),
    }


def _backend(X, module, params):
    """A model on rows ``X`` with the parameters ``params``."""
    backend = make_backend(X, 2, module)
    with torch.no_grad():
        for p, value in zip(backend.parameters, params):
            p.copy_(value)
    return backend


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(panels())
def test_one_unit_moves_every_release_by_at_most_its_sensitivity(panel):
    """Adding or removing a whole unit (``"record"``), or replacing the
    groups of all its records (``"sensitive_attribute"``), moves each
    release of a silo by at most the sensitivity the release plan states
    for one record (before noise)."""
    rng = np.random.default_rng(panel["seed"])
    sizes, unit, clip = panel["sizes"], panel["unit"], 1.5
    codes = np.repeat(np.arange(len(sizes)), sizes)
    n = len(codes)
    bounds = silo_unit_bounds(codes, len(sizes), panel["k"], SiloRandomness(panel["seed"], 0))
    assert np.allclose(np.bincount(codes, weights=bounds.factors), 1.0)
    assert np.bincount(codes, weights=bounds.kept).max() <= panel["k"]
    X = torch.as_tensor(rng.normal(size=(n, 3)) * panel["scale"])
    y = rng.integers(0, 2, n)
    groups = rng.integers(0, 2, n)
    priors = torch.as_tensor([[0.3, 0.7]], dtype=torch.float64)
    W = project_frobenius(torch.as_tensor(rng.normal(size=(1, 2, 2)) * 3),
                          default_w_radius(priors.numpy(), 2))
    w_clip = w_gradient_clip(priors.numpy())
    config = FermiConfig(n_rounds=1, silo_sizes=(len(sizes),), sampling_rates=(1 / len(sizes),),
                         lam=panel["lam"], max_grad_norm=clip, w_clip=w_clip, w_radius=3.0,
                         privacy_unit=unit)
    module = None
    if panel["mlp"]:
        module = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(),
                                     torch.nn.Linear(4, 2)).double()
    params = [torch.as_tensor(rng.normal(size=p.shape))
              for p in make_backend(X[:1], 2, module).parameters]
    kept = np.flatnonzero(bounds.kept)
    mine = codes == panel["changed"]
    full = _silo_releases(_backend(X, module, params), X, y, groups, bounds.factors, kept,
                          priors, W, config)
    if unit == "record":  # the neighbour without the unit; the others keep their subsets
        rest = ~mine
        other = _silo_releases(_backend(X[rest], module, params), X[rest], y[rest],
                               groups[rest], bounds.factors[rest],
                               np.flatnonzero(bounds.kept[rest]), priors, W, config)
    else:  # the same records, the groups of the unit's records replaced
        other = _silo_releases(_backend(X, module, params), X, y,
                               np.where(mine, 1 - groups, groups), bounds.factors, kept,
                               priors, W, config)
    sens, neighboring = _release_sensitivities(unit, clip)
    double = 2.0 if neighboring == "replace" else 1.0  # the plan's replace-one factor
    limits = {
        # "sensitive_attribute": the ERMI part, released times lam, moves by 2C
        "theta": double * sens["theta"] * (1.0 if unit == "record" else panel["lam"]),
        "w": double * sens["w"] * w_noise_scale(unit, priors.numpy(), w_clip),
        "monitor": double * sens["monitor"],
        "group_counts": double * sens["group_counts"],
        "model_check": double * sens["model_check"],
        "class_counts": 1.0 if unit == "record" else 0.0,  # labels are public otherwise
    }
    for name, limit in limits.items():
        moved = float((full[name] - other[name]).norm())
        assert moved <= limit * (1 + 1e-6) + 1e-9, (name, moved, limit)


def test_a_round_samples_whole_units_at_rate_q():
    """Each round a silo Poisson-samples its units (rate q, each unit with
    all its kept records); the batches of a chunk of rounds come from that
    chunk's own stream, the noise from the round's own generator."""
    rng = np.random.default_rng(0)
    n_units, q, rounds = 300, 0.1, 200
    codes = np.repeat(np.arange(n_units), rng.integers(1, 12, n_units))
    bounds = silo_unit_bounds(codes, n_units, 4, SiloRandomness(0, 0))
    kept = np.bincount(codes[bounds.kept], minlength=n_units)
    draws = SiloDraws(SiloRandomness(1, 0), n_units, q, rounds, bounds)
    inclusions = np.zeros(n_units)
    for r in range(rounds):
        idx, row = draws.round(r, 5, torch.float64)
        idx = idx.numpy()
        assert row.shape == (5,) and bounds.kept[idx].all() and len(set(idx)) == len(idx)
        present = np.bincount(codes[idx], minlength=n_units)
        assert np.array_equal(present[present > 0], kept[present > 0])
        inclusions += present > 0
    assert abs(inclusions.mean() / rounds - q) < 0.01
    # stateless across processes: a fresh silo draws round 3 alike
    again, noise = SiloDraws(SiloRandomness(1, 0), n_units, q, rounds, bounds).round(
        3, 5, torch.float64)
    first, first_noise = draws.round(3, 5, torch.float64)
    assert torch.equal(again, first) and torch.equal(noise, first_noise)


# ---------------------------------------------------------------- estimator
@pytest.mark.parametrize("n_silos", [1, 3])
def test_epsilon_from_events_and_the_report_names_the_unit(n_silos):
    X, y, g, units, silos = _data(n_silos=n_silos)
    clf = DPFERMIClassifier(epsilon=2.0, max_records_per_unit=4, **FAST).fit(
        X, y, sensitive_features=g, silo_ids=silos, unit_ids=units)
    assert clf.epsilon_ == pytest.approx(compute_epsilon(clf.dp_event_, clf.delta_, "pld"))
    for eps, event in zip(clf.silo_epsilons_, clf.silo_dp_events_):
        assert eps == pytest.approx(compute_epsilon(event, clf.delta_, "pld")) and eps <= 2.0
    per_silo = [len(np.unique(units[silos == j])) for j in range(n_silos)]
    assert clf.n_units_ == len(np.unique(units)) and clf.silo_sizes_.tolist() == per_silo
    assert clf.privacy_report_.privacy_unit == "unit (max_records_per_unit=4)"
    assert "one unit (max_records_per_unit=4) with all its records" in (
        clf.privacy_report_.summary())
    # "auto" samples units: the expected batches count units
    np.testing.assert_allclose(clf.batch_size_, clf.sampling_rate_ * clf.silo_sizes_)
    assert clf.max_records_per_unit == 4
    assert DPFERMIClassifier().max_records_per_unit == MAX_RECORDS_PER_UNIT


@pytest.mark.parametrize("n_silos", [1, 3])
def test_singleton_units_spend_like_records(n_silos):
    """One record per unit: the same plan, noise and events as a
    record-level fit (the accountant sees units in place of records)."""
    X, y, g, _, silos = _data(n_silos=n_silos)
    a = DPFERMIClassifier(**FAST).fit(X, y, sensitive_features=g, silo_ids=silos)
    b = DPFERMIClassifier(**FAST).fit(X, y, sensitive_features=g, silo_ids=silos,
                                      unit_ids=np.arange(len(y)))
    assert a.epsilon_ == b.epsilon_ and np.array_equal(a.silo_epsilons_, b.silo_epsilons_)
    assert a.silo_dp_events_ == b.silo_dp_events_
    assert np.array_equal(a.sampling_rate_, b.sampling_rate_)
    assert np.array_equal(a.silo_sizes_, b.silo_sizes_) and b.n_units_ == len(y)
    for ra, rb in zip(a.silo_privacy_reports_, b.silo_privacy_reports_):
        assert ra.noise == rb.noise
    assert a.privacy_report_.privacy_unit == "record" and a.n_units_ is None


def test_without_unit_ids_nothing_changes():
    X, y, g, _, silos = _data()
    a = DPFERMIClassifier(**FAST).fit(X, y, sensitive_features=g, silo_ids=silos)
    b = DPFERMIClassifier(max_records_per_unit=1, **FAST).fit(
        X, y, sensitive_features=g, silo_ids=silos)
    assert np.array_equal(a.coef_, b.coef_) and np.array_equal(a.W_, b.W_)
    assert a.epsilon_ == b.epsilon_ and b.n_units_ is None
    assert np.array_equal(a.silo_sizes_, np.bincount(silos))


def test_a_unit_spanning_two_silos_is_refused():
    X, y, g, units, silos = _data()
    silos = silos.copy()
    silos[np.flatnonzero(units == units[0])[0]] = (silos[0] + 1) % 3
    with pytest.raises(ValueError, match=r"unit_ids: 1 unit\(s\) have records in more than one"):
        DPFERMIClassifier(**FAST).fit(X, y, sensitive_features=g, silo_ids=silos,
                                      unit_ids=units)
    frame = pd.DataFrame(X, columns=list("abcde")).assign(person=units, silo=silos)
    with pytest.raises(ValueError, match="unit_column: .*one silo"):
        DPFERMIClassifier(unit_column="person", silo_column="silo", **FAST).fit(
            frame, y, sensitive_features=g)


@pytest.mark.parametrize("batched", [True, False])
def test_units_learn_and_per_silo_passes_agree(batched):
    X, y, g, units, silos = _data(n=3000, n_units=600)
    kw = {"lam": 0.5, "epsilon": 8.0, "max_steps": 150, "random_state": 3,
          "max_records_per_unit": 4}
    clf = DPFERMIClassifier(**kw, solver_options={"engine_options": {"batched": batched}}).fit(
        X, y, sensitive_features=g, silo_ids=silos, unit_ids=units)
    assert clf.score(X, y) > 0.7
    other = DPFERMIClassifier(**kw,
                              solver_options={"engine_options": {"batched": not batched}}).fit(
        X, y, sensitive_features=g, silo_ids=silos, unit_ids=units)
    np.testing.assert_allclose(clf.coef_, other.coef_, rtol=1e-4, atol=1e-5)
    assert clf.epsilon_ == other.epsilon_


# 80 units per silo: the private model check is noise-dominated and may warn
@pytest.mark.filterwarnings("ignore:DPFERMIClassifier's predicted probabilities")
def test_sensitive_attribute_unit_and_balanced_weights_with_units():
    X, y, g, units, silos = _data()
    clf = DPFERMIClassifier(privacy_unit="sensitive_attribute", class_weight="balanced",
                            **FAST).fit(X, y, sensitive_features=g, silo_ids=silos,
                                        unit_ids=units)
    assert clf.privacy_unit_ == "sensitive_attribute"
    assert clf.privacy_report_.privacy_unit.startswith("unit")
    assert "replace one unit" in clf.privacy_report_.summary()
    assert clf.epsilon_ == pytest.approx(compute_epsilon(clf.dp_event_, clf.delta_, "pld"))
    weighted = DPFERMIClassifier(class_weight="balanced", **FAST).fit(
        X, y, sensitive_features=g, silo_ids=silos, unit_ids=units)
    assert "class_counts" in weighted.privacy_report_.noise
    assert np.all(weighted.class_weight_ > 0)


@pytest.mark.parametrize("column", ["person", 5])
def test_routing_off_unit_column_and_routing_on(column):
    X, y, g, units, silos = _data()
    frame = pd.DataFrame(X, columns=list("abcde")).assign(person=units)
    data = frame if isinstance(column, str) else frame.to_numpy()
    clf = DPFERMIClassifier(unit_column=column, **FAST).fit(data, y, sensitive_features=g,
                                                            silo_ids=silos)
    assert clf.n_units_ == len(np.unique(units)) and clf.n_features_in_ == 5
    without = frame.drop(columns="person")
    plain = data if isinstance(column, str) else frame.to_numpy()
    assert np.array_equal(clf.predict(plain), clf.predict(
        without if isinstance(column, str) else without.to_numpy()))
    with sklearn.config_context(enable_metadata_routing=True):
        pipe = Pipeline([("scale", StandardScaler()), ("clf", DPFERMIClassifier(**FAST))])
        pipe.fit(X, y, sensitive_features=g, silo_ids=silos, unit_ids=units)
        assert pipe[-1].n_units_ == len(np.unique(units))


# ------------------------------------------------------------- federated
def _silos(X, y, g, units, silos, **kw):
    return [FermiSilo(X[silos == j], y[silos == j], g[silos == j],
                      unit_ids=None if units is None else units[silos == j], silo=j,
                      name=str(j), policy=SiloPolicy.permissive(), **kw)
            for j in np.unique(silos)]


def test_remote_silos_with_units_give_the_in_process_fit():
    """Each remote silo bounds, samples and weighs its own units (the ids
    never leave it, nor does its record count)."""
    X, y, g, units, silos = _data()
    kw = {"max_records_per_unit": 3, **FAST}
    local = DPFERMIClassifier(**kw, solver_options={"engine_options": {"batched": False}}).fit(
        X, y, sensitive_features=g, silo_ids=silos, unit_ids=units)
    transport = DirectTransport(_silos(X, y, g, units, silos))
    assert all("n_records" not in h and h["protocol"] == PROTOCOL for h in transport.hellos)
    remote = fit_federated(DPFERMIClassifier(**kw), transport, classes=local.classes_,
                           groups=local.groups_, n_features=X.shape[1])
    np.testing.assert_allclose(remote.coef_, local.coef_, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(remote.prediction_counts_, local.prediction_counts_,
                               rtol=1e-9, atol=1e-6)
    assert remote.epsilon_ == local.epsilon_ and remote.n_units_ == local.n_units_
    assert remote.privacy_report_.privacy_unit == "unit (max_records_per_unit=3)"
    np.testing.assert_array_equal(remote.silo_sizes_, local.silo_sizes_)


def test_a_secure_silo_keeps_its_unit_subsets_all_run_long():
    """With random_state=None a silo draws its subsets from a secret token
    kept in its ledger: a silo answering in a new process keeps them."""
    X, y, g, units, silos = _data()
    (silo,) = _silos(X[silos == 0], y[silos == 0], g[silos == 0], units[silos == 0],
                     np.zeros((silos == 0).sum(), int))
    transport = DirectTransport([silo])
    clf = DPFERMIClassifier(lam=1.0, max_steps=3)  # random_state=None: secure
    fit_federated(clf, transport, classes=[0, 1], groups=[0, 1], n_features=X.shape[1])
    ledger = transport.ledgers[0]
    settings_ = json.loads(ledger["settings"])
    assert isinstance(ledger["units_token"], int) and settings_["seed"] is None
    kept = silo._units(settings_, ledger).kept.copy()
    silo._cache.clear()  # as a new process would start
    assert np.array_equal(silo._units(settings_, ledger).kept, kept)
    assert clf.n_units_ == len(np.unique(units[silos == 0]))


def test_silos_refuse_a_run_about_another_unit_and_other_versions():
    X, y, g, units, silos = _data()
    with_units, without = _silos(X, y, g, units, silos)[0], _silos(X, y, g, None, silos)[0]
    transport = DirectTransport([with_units])
    server = DirectTransport([without])
    # a record-level run's settings, sent to a silo with unit ids, and the reverse
    record_settings = dict(_settings_of(server), protocol=PROTOCOL)
    with pytest.raises(SiloRefusal, match="holds unit ids"):
        with_units.setup(record_settings, {})
    unit_settings = _settings_of(transport)
    with pytest.raises(SiloRefusal, match="has no unit ids"):
        without.setup(unit_settings, {})
    with pytest.raises(SiloRefusal, match="skdp-dp-fermi/2"):
        with_units.setup(dict(unit_settings, protocol="skdp-dp-fermi/2"), {})
    # a server refuses a mix of silos, and a silo of an older protocol
    with pytest.raises(FederatedError, match="hold unit ids"):
        DirectTransport(_silos(X, y, g, units, silos)[:1] + _silos(X, y, g, None, silos)[1:])
    old = _silos(X, y, g, None, silos)[0]
    old.hello = lambda: {"silo": 0, "name": "0", "n_records": 10}  # a version-2 silo
    with pytest.raises(FederatedError, match="older protocol"):
        DirectTransport([old])


def _settings_of(transport):
    """The settings a fit sends through ``transport`` (captured at setup)."""
    seen = {}
    setup = transport.setup

    def capture(settings_):
        seen["settings"] = settings_
        raise RuntimeError("captured")

    transport.setup = capture
    with pytest.raises(RuntimeError, match="captured"):
        fit_federated(DPFERMIClassifier(max_records_per_unit=2, **FAST), transport,
                      classes=[0, 1], groups=[0, 1], n_features=5)
    transport.setup = setup
    return seen["settings"]
