"""Federated DP-FERMI (skdp.federated): the silo protocol, silo-side budgets,
and the same fit in process, in Flower's simulation and in a localhost Flower
deployment. The Flower tests skip when flwr is not installed."""

import importlib.util
import os
import threading
import time

import numpy as np
import pytest
import torch

from skdp import DPFERMIClassifier
from skdp.datasets import make_fair_classification
from skdp.fairness.fermi.protocol import SiloRandomness
from skdp.federated import (
    DirectTransport,
    FederatedError,
    FermiSilo,
    SiloPolicy,
    SiloRefusal,
    fit_federated,
)

HAS_FLOWER = importlib.util.find_spec("flwr") is not None
needs_flower = pytest.mark.skipif(not HAS_FLOWER, reason="needs Flower: pip install -e '.[federated]'")
os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")


def _silos_data(n=32_000, n_silos=3, seed=0):
    """Adult-sized synthetic data in ``n_silos`` silos of unequal size."""
    X, y, g = make_fair_classification(n_samples=n, n_features=8, label_group_correlation=0.6,
                                       random_state=seed)
    silo = np.repeat(np.arange(n_silos), np.diff(np.linspace(0, n, n_silos + 1).astype(int)))
    silo = np.random.default_rng(seed).permutation(silo)
    return X, y, g, silo


def _direct(X, y, g, silo, policy=None, **kw):
    objs = [FermiSilo(X[silo == j], y[silo == j], g[silo == j], silo=j, name=str(j),
                      policy=policy or SiloPolicy.permissive(), **kw)
            for j in np.unique(silo)]
    return DirectTransport(objs)


# ------------------------------------------------------------ without Flower
def test_silo_protocol_gives_the_in_process_fit_exactly():
    X, y, g, silo = _silos_data(n=6000)
    for kw in (dict(lam=2.0, max_steps=6, random_state=3),
               dict(lam=1.0, max_steps=4, random_state=1, batch_size=400,
                    hidden_layer_sizes=(4,), fairness="equalized_odds")):
        local = DPFERMIClassifier(**kw, solver_options={"engine_options": {"batched": False}}).fit(
            X, y, sensitive_features=g, silo_ids=silo)
        remote = fit_federated(DPFERMIClassifier(**kw), _direct(X, y, g, silo),
                               classes=local.classes_, groups=local.groups_,
                               n_features=X.shape[1])
        for name in ("W_", "group_priors_", "silo_epsilons_", "silo_sizes_"):
            np.testing.assert_array_equal(getattr(local, name), getattr(remote, name))
        if local.module_state_ is None:
            np.testing.assert_array_equal(local.coef_, remote.coef_)
        else:
            for key, value in local.module_state_.items():
                np.testing.assert_array_equal(value, remote.module_state_[key])
        np.testing.assert_array_equal(local.history_["loss"], remote.history_["loss"])
        assert remote.epsilon_ == local.epsilon_ <= 1.0
        np.testing.assert_array_equal(local.predict(X), remote.predict(X))


def test_every_silo_and_server_computation_runs_on_one_thread(monkeypatch):
    """What makes the engines agree by construction on any machine: a silo's
    round (in process or remote) and the server's step run on one torch
    thread, whatever the process's thread count."""
    from skdp.fairness.fermi import _trainer as _fermi

    seen = {"silo": [], "server": []}
    silo_step, server_step = _fermi.silo_step, _fermi.server_step

    def spy_silo(*args, **kwargs):
        seen["silo"].append(torch.get_num_threads())
        return silo_step(*args, **kwargs)

    def spy_server(*args, **kwargs):
        seen["server"].append(torch.get_num_threads())
        return server_step(*args, **kwargs)

    monkeypatch.setattr(_fermi, "silo_step", spy_silo)
    monkeypatch.setattr(_fermi, "server_step", spy_server)
    X, y, g, silo = _silos_data(n=3000)
    kw = dict(lam=1.0, max_steps=2, random_state=1, hidden_layer_sizes=(4,))
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        DPFERMIClassifier(**kw, solver_options={"engine_options": {"batched": False}}).fit(
            X, y, sensitive_features=g, silo_ids=silo)
        fit_federated(DPFERMIClassifier(**kw), _direct(X, y, g, silo), classes=[0, 1],
                      groups=[0, 1], n_features=X.shape[1])
    finally:
        torch.set_num_threads(previous)
    assert len(seen["silo"]) == 2 * 2 * 3 and set(seen["silo"]) == {1}
    assert len(seen["server"]) == 2 * 2 and set(seen["server"]) == {1}


def test_batched_in_process_pass_equals_per_silo_passes():
    """The default in-process engine computes all silos in one tensor pass;
    it equals one pass per silo (what remote silos run) up to float
    rounding, with the same draws and the same accounting."""
    X, y, g, silo = _silos_data(n=6000)
    kw = dict(lam=2.0, max_steps=20, random_state=5)
    batched = DPFERMIClassifier(**kw).fit(X, y, sensitive_features=g, silo_ids=silo)
    per_silo = DPFERMIClassifier(**kw, solver_options={"engine_options": {"batched": False}}).fit(
        X, y, sensitive_features=g, silo_ids=silo)
    np.testing.assert_allclose(batched.coef_, per_silo.coef_, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(batched.W_, per_silo.W_, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(batched.silo_epsilons_, per_silo.silo_epsilons_)
    assert batched.epsilon_ == per_silo.epsilon_


def test_silo_keeps_its_budget_whatever_the_server_asks():
    X, y, g, silo = _silos_data(n=3000)
    transport = _direct(X, y, g, silo)
    clf = fit_federated(DPFERMIClassifier(lam=1.0, max_steps=3, random_state=0), transport,
                        classes=[0, 1], groups=[0, 1], n_features=X.shape[1])
    one, ledger = transport.silos[0], transport.ledgers[0]
    assert ledger["answered"] == ledger["rounds"] == clf.n_steps_ == 3
    params = [np.zeros((2, X.shape[1] + 1), np.float32)]
    W, priors = np.zeros((1, 2, 2), np.float32), clf.group_priors_
    with pytest.raises(SiloRefusal, match="budget covers 3 rounds"):
        one.train(3, params, W, priors, ledger)  # one round too many
    with pytest.raises(SiloRefusal, match="budget covers 3 rounds"):
        one.train(1, params, W, priors, ledger)  # a replay
    with pytest.raises(SiloRefusal, match="already set up"):
        one.setup(json_settings(ledger), ledger)  # a second release of its counts
    fresh = {}
    _, fresh = one.setup(json_settings(ledger), fresh)
    with pytest.raises(SiloRefusal, match="next round it answers is 0"):
        one.train(1, params, W, priors, fresh)  # rounds in order, each once
    # the server's fit stops with the silo's reason
    with pytest.raises(FederatedError, match="silo '0' failed at round 3"):
        transport._call("train", [{"params": params, "W": W, "priors": priors}] * 3, 3)


def json_settings(ledger):
    import json

    return json.loads(ledger["settings"])


def test_silo_policy_refuses_seeds_large_budgets_and_no_noise():
    X, y, g, silo = _silos_data(n=3000)
    strict = SiloPolicy(max_epsilon=2.0, max_delta=1e-5)
    cases = [
        (dict(random_state=0), "refuses seeded noise"),
        (dict(epsilon=3.0), "refuses epsilon=3.0"),
        (dict(epsilon=None), "without privacy"),
        (dict(delta=1e-4), "refuses delta"),
    ]
    for params, match in cases:
        with pytest.raises(FederatedError, match=match):
            fit_federated(DPFERMIClassifier(max_steps=2, **params),
                          _direct(X, y, g, silo, policy=strict), classes=[0, 1], groups=[0, 1],
                          n_features=X.shape[1])
    clf = fit_federated(DPFERMIClassifier(max_steps=2), _direct(X, y, g, silo, policy=strict),
                        classes=[0, 1], groups=[0, 1], n_features=X.shape[1])
    assert np.all(clf.silo_epsilons_ <= 1.0)


def _attack_settings(n_features, **changes):
    """Public settings a (malicious) server sends, as DPFERMIClassifier does."""
    from skdp.fairness.fermi.protocol import PROTOCOL

    settings = {
        "protocol": PROTOCOL, "epsilon": 1.0, "delta": 1e-5, "accountant": "pld",
        "privacy_unit": "record", "max_grad_norm": 1.0, "lam": 1.0, "rounds": 200,
        "sampling_rate": None, "batch_size": 1, "private_priors": False,
        "fairness": "demographic_parity", "n_classes": 2, "n_groups": 2,
        "n_features": n_features, "classes": ["0", "1"], "groups": ["0", "1"],
        "hidden_layer_sizes": [], "loss_bound": 5.0, "psi_bound": 2.0, "seed": None,
    }
    settings.update(changes)
    return settings


def test_silo_decides_its_own_privacy_unit():
    X, y, g, _ = _silos_data(n=400)
    settings = _attack_settings(X.shape[1], privacy_unit="sensitive_attribute", lam=0.0)
    with pytest.raises(SiloRefusal, match="refuses privacy_unit='sensitive_attribute'"):
        FermiSilo(X, y, g).setup(settings, {})
    from_config = SiloPolicy.from_node_config({"max-epsilon": 1.0})
    assert from_config.privacy_units == ("record",)
    with pytest.raises(SiloRefusal, match="privacy-units"):
        FermiSilo(X, y, g, policy=from_config).setup(settings, {})
    both = SiloPolicy.from_node_config({"privacy-units": "record, sensitive_attribute"})
    reply, _ = FermiSilo(X, y, g, policy=both).setup(settings, {})
    assert reply["epsilon"] <= 1.0
    with pytest.raises(ValueError, match="privacy_units"):
        SiloPolicy(privacy_units=["person"])
    for key, value in [("lam", -1.0), ("max_grad_norm", float("inf")), ("rounds", 0),
                       ("batch_size", float("nan")), ("psi_bound", 0.0)]:
        with pytest.raises(SiloRefusal, match=key):
            FermiSilo(X, y, g).setup(_attack_settings(X.shape[1], **{key: value}), {})


@pytest.mark.parametrize("privacy_unit", ["record", "sensitive_attribute"])
def test_a_server_cannot_read_a_record_from_a_silo_reply(privacy_unit):
    """The audit's attack: lam=0 and one record per batch in expectation,
    with a silo whose policy accepts the unit. The ratio of the reply's
    weight and bias entries is a record's features exactly whenever the
    released gradient sum is one record's, unclipped and without noise."""
    X, y, g, _ = _silos_data(n=300)
    X = X.astype(np.float32).astype(np.float64)
    policy = SiloPolicy(max_epsilon=1.0, privacy_units=("record", "sensitive_attribute"))
    silo = FermiSilo(X, y, g, policy=policy)
    settings = _attack_settings(X.shape[1], privacy_unit=privacy_unit, lam=0.0)
    reply, ledger = silo.setup(settings, {})
    assert reply["epsilon"] <= 1.0 and min(reply["noise"].values()) > 0
    params = [np.random.default_rng(0).normal(size=(2, X.shape[1] + 1)).astype(np.float32)]
    W, priors = np.zeros((1, 2, 2), np.float32), np.array([[0.5, 0.5]])
    recovered = 0
    for round_index in range(settings["rounds"]):
        answer, ledger = silo.train(round_index, params, W, priors, ledger)
        theta = answer["theta"][0].astype(np.float64)
        assert np.all(np.isfinite(theta))
        guess = theta[1, :-1] / theta[1, -1]
        error = np.abs(X - guess).max(1) / (1.0 + np.abs(X).max(1))
        recovered += int(error.min() < 1e-4)
    assert recovered == 0


def test_secure_silos_draw_unpredictable_noise_and_seeded_silos_are_stateless():
    from skdp.privacy._random import normal_

    secure = SiloRandomness(None, 0)
    x, z = normal_(torch.empty(64), secure.at(5)), normal_(torch.empty(64), secure.at(5))
    assert not torch.equal(x, z)  # nothing replays a secure silo's round
    first = normal_(torch.empty(8), SiloRandomness(7, 2).at(4))
    again = normal_(torch.empty(8), SiloRandomness(7, 2).at(4))  # a fresh process
    other = normal_(torch.empty(8), SiloRandomness(7, 1).at(4))
    assert torch.equal(first, again) and not torch.equal(first, other)
    X, y, g, silo = _silos_data(n=3000)
    fits = [DPFERMIClassifier(max_steps=3).fit(X, y, sensitive_features=g, silo_ids=silo)
            for _ in range(2)]
    assert not np.array_equal(fits[0].coef_, fits[1].coef_)


def test_flower_is_imported_lazily():
    import subprocess
    import sys

    code = ("import sys, skdp, skdp.federated; from skdp import DPFERMIClassifier; "
            "assert 'flwr' not in sys.modules, 'flwr imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_engine_errors():
    X, y, g, silo = _silos_data(n=2000)
    with pytest.raises(ValueError, match="needs the default noise calibration"):
        DPFERMIClassifier(solver_options={"engine": "flower-simulation",
                                          "noise_calibration": "paper"}).fit(
            X, y, sensitive_features=g, silo_ids=silo)
    if not HAS_FLOWER:
        with pytest.raises(ImportError, match=r"flwr\[simulation\]==1.41.0"):
            DPFERMIClassifier(max_steps=1, solver_options={"engine": "flower-simulation"}).fit(
                X, y, sensitive_features=g, silo_ids=silo)


# --------------------------------------------------------------- with Flower
class _FakeGrid:
    def __init__(self, node_lists):
        self.node_lists = list(node_lists)

    def get_node_ids(self):
        return self.node_lists.pop(0) if len(self.node_lists) > 1 else self.node_lists[0]


@needs_flower
def test_empty_node_list_is_waited_for_then_times_out():
    from skdp.federated._flower import FlowerTransport

    transport = FlowerTransport.__new__(FlowerTransport)
    transport.grid, transport.n_silos = _FakeGrid([[], [], [5, 3], [5, 3, 9]]), 3
    assert transport._wait_for_nodes(5.0) == [3, 5, 9]
    transport.grid = _FakeGrid([[]])
    start = time.monotonic()
    with pytest.raises(FederatedError, match="only 0 of 3 silo nodes connected within 0.3 s"):
        transport._wait_for_nodes(0.3)
    assert time.monotonic() - start < 5


@needs_flower
def test_same_fit_in_process_in_flower_simulation_and_in_a_tls_flower_deployment(capfd):
    """One Flower simulation (with ``unit_ids``) and one localhost deployment
    in the documented TLS set-up (a CA, a SuperLink with certificate and key,
    SuperNodes and ``flwr run`` trusting the CA) give the in-process fits;
    the simulation prints no "run_simulation" banner; a SuperNode that dies
    mid-training is named. (One of each: every Flower start costs ~20 s.)"""
    import logging

    from skdp.federated import LocalFederation

    X, y, g, silo = _silos_data()
    kw = dict(lam=2.0, max_steps=3, random_state=11)
    in_process = {"engine_options": {"batched": False}}
    local = DPFERMIClassifier(**kw, solver_options=in_process).fit(
        X, y, sensitive_features=g, silo_ids=silo)
    # persons of up to ~20 records, each in one silo (unit % 3 == silo)
    units = silo + 3 * np.random.default_rng(1).integers(0, 2000, len(y))
    kw_units = dict(kw, max_records_per_unit=3)
    local_units = DPFERMIClassifier(**kw_units, solver_options=in_process).fit(
        X, y, sensitive_features=g, silo_ids=silo, unit_ids=units)

    logger = logging.getLogger("flwr")
    filters_before = list(logger.filters)
    records = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = records.append
    logger.addHandler(handler)
    try:
        simulated = DPFERMIClassifier(**kw_units, solver_options={"engine": "flower-simulation"})
        simulated.fit(X, y, sensitive_features=g, silo_ids=silo, unit_ids=units)
    finally:
        logger.removeHandler(handler)
    out, err = capfd.readouterr()
    assert not any("`run_simulation`" in r.getMessage() for r in records)
    assert "`run_simulation` function is deprecated" not in out + err
    assert logger.filters == filters_before  # the filter is gone after the call
    np.testing.assert_allclose(simulated.coef_, local_units.coef_, rtol=1e-6, atol=1e-7)
    assert simulated.epsilon_ == local_units.epsilon_
    assert simulated.n_units_ == local_units.n_units_ == len(np.unique(units))
    assert simulated.privacy_report_.privacy_unit == "unit (max_records_per_unit=3)"

    data = [(X[silo == j], y[silo == j], g[silo == j]) for j in range(3)]
    with LocalFederation(data, tls=True) as federation:
        deployed = federation.fit(DPFERMIClassifier(**kw), classes=[0, 1], groups=[0, 1],
                                  n_features=X.shape[1])
        assert "https://127.0.0.1" in (federation.workdir / "superlink.log").read_text(
            errors="replace")
        assert (federation.workdir / "certs" / "ca.crt").exists()
        # a SuperNode that dies mid-training: a clear error, no fitted model
        long = DPFERMIClassifier(lam=2.0, max_steps=500, random_state=11)
        log = federation.workdir / "supernode1.log"
        seen = log.read_text(errors="replace").count("Receiving")

        def kill_after_two_rounds():  # hello, setup, rounds 0 and 1
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                if log.read_text(errors="replace").count("Receiving") >= seen + 4:
                    federation.kill_silo(1)
                    return
                time.sleep(0.05)

        killer = threading.Thread(target=kill_after_two_rounds)
        killer.start()
        # the killed silo is named (on a loaded machine a slow one may be too)
        with pytest.raises(FederatedError, match=r"silo .*'1' .*did not answer round \d+"):
            federation.fit(long, classes=[0, 1], groups=[0, 1], n_features=X.shape[1],
                           round_timeout=8.0)
        killer.join()
    np.testing.assert_array_equal(deployed.coef_, local.coef_)
    np.testing.assert_array_equal(deployed.intercept_, local.intercept_)
    np.testing.assert_array_equal(deployed.silo_epsilons_, local.silo_epsilons_)
    np.testing.assert_array_equal(deployed.W_, local.W_)
    assert deployed.n_steps_ == 3
    assert deployed.silos_.tolist() == ["0", "1", "2"]
    assert np.all(local.silo_epsilons_ <= 1.0)


@needs_flower
def test_packed_messages_round_trip_every_array_exactly():
    from skdp.federated._flower import pack_arrays, unpack_arrays

    rng = np.random.default_rng(0)
    arrays = {"theta-0": rng.normal(size=(7, 3)), "w": rng.normal(size=(2, 2)).astype(np.float32),
              "counts": np.arange(6, dtype=np.int64).reshape(2, 3), "empty": np.zeros((0, 4)),
              "scalar": np.float64(np.pi), "big-endian": np.arange(3, dtype=">f8")}
    back = unpack_arrays(pack_arrays(arrays))
    assert list(back) == list(arrays)
    for name, value in arrays.items():
        np.testing.assert_array_equal(back[name], value)
        assert back[name].shape == np.shape(value)
        assert back[name].dtype == np.asarray(value).dtype.newbyteorder("=")
    with pytest.raises(TypeError, match="only numbers"):
        pack_arrays({"labels": np.array(["a", "b"], dtype=object)})
    with pytest.raises(ValueError, match="corrupt"):
        unpack_arrays(pack_arrays({"x": np.ones(2)}) + b"\0")


def test_supernode_polls_at_the_pace_of_the_rounds(monkeypatch):
    """After a reply the node waits until the next request is due, then
    polls quickly; a request that was already waiting shortens the pace."""
    import skdp.federated.supernode as supernode

    class Clock:
        now, slept = 100.0, []

        def monotonic(self):
            return self.now

        def sleep(self, seconds):
            self.slept.append(seconds)
            self.now += seconds

    clock = Clock()
    monkeypatch.setattr(supernode, "time", clock)
    pace = supernode._RoundPacedSleeps(limit=0.2, fast=0.005, lead=0.85)
    pace.before_poll()  # nothing received yet: poll at once
    assert clock.slept == []
    pace.message_received()  # round 0 arrives at t=100
    clock.now += 0.05  # the reply takes 50 ms
    pace.before_poll()
    assert clock.slept == []  # no period known yet
    for _ in range(3):  # three idle polls of Flower's loop
        pace.sleep(3)
    assert clock.slept[0] == pytest.approx(0.005) and clock.slept[1] == pytest.approx(0.0075)
    clock.now = 101.0
    pace.message_received()  # round 1 one second after round 0
    clock.now += 0.05
    clock.slept.clear()
    pace.before_poll()  # sleeps until 0.85 s after round 1
    assert clock.now == pytest.approx(101.85)
    pace.sleep(3)  # then polls at a twentieth of the period
    assert clock.slept[-1] == pytest.approx(0.05)
    pace.message_received()  # arrived after one idle poll: period stays ~0.9 s
    assert pace._period == pytest.approx(0.5 * 1.0 + 0.5 * 0.9)
    clock.now += 0.05
    pace.before_poll()
    pace.message_received()  # already waiting at the first poll: shortened
    assert pace._period < 0.95 * 0.9
    pace.sleep(0.5)  # waiting for the ClientApp's reply: fast steps
    assert clock.slept[-1] == pytest.approx(0.005)


@needs_flower
def test_run_simulation_banner_filter_drops_only_the_banner():
    """The filter the simulation engine puts on Flower's logger during its
    call (the call itself: the simulation-and-deployment test above)."""
    import logging

    from skdp.federated._simulation import _RunSimulationBanner

    def record(msg, *args, level=logging.WARNING):
        return logging.LogRecord("flwr", level, __file__, 1, msg, args, None)

    banner = _RunSimulationBanner()
    assert not banner.filter(record("DEPRECATED FEATURE: %s", "The `run_simulation` function"))
    assert banner.filter(record("DEPRECATED FEATURE: %s", "something else"))
    assert banner.filter(record("`run_simulation` failed", level=logging.ERROR))
