"""The lifetime privacy ledger: caps for every fit, composition, crash
safety, concurrency, damaged files and the silos' lifetime ledgers."""

import json
import math
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import time
import warnings

import dp_accounting as dpa
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.pipeline import make_pipeline
from test_fitted_attributes import _cases, _fit

from skdp import DPSGDClassifier
from skdp.model_selection import spent
from skdp.preprocessing import DPStandardScaler
from skdp.privacy import (
    LedgerError,
    PrivacyBudgetError,
    PrivacyLedger,
    compute_epsilon,
    poisson_gaussian_event,
)
from skdp.privacy.ledger import event_from_json, event_to_json
from skdp.privacy.ledger.__main__ import main as ledger_cli

DELTA = 1e-4


@pytest.fixture
def ledger_path(tmp_path):
    return tmp_path / "data.ledger"


def _ledger(path, max_epsilon=100.0, **kwargs):
    return PrivacyLedger.create(path, max_epsilon=max_epsilon, delta=DELTA, **kwargs)


CASES = _cases()


# ------------------------------------------------------- every estimator
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_every_fit_is_charged_once_and_refused_past_the_cap(case, tmp_path):
    """Inside a charging block each estimator, step and search is charged
    once, with the event and epsilon it reports; with a cap below its
    epsilon it is refused before any release: no fitted attribute, no
    entry."""
    ledger = _ledger(tmp_path / "open.ledger")
    with ledger.charging("test"):
        model = _fit(case, 0, units=False)
    [entry] = ledger.entries
    assert entry.status == "committed"
    assert entry.what.startswith(type(model).__name__)
    assert entry.epsilon == pytest.approx(model.epsilon_)
    assert entry.privacy_unit == model.privacy_report_.privacy_unit
    if entry.event is not None:
        assert event_to_json(entry.event) == event_to_json(model.dp_event_)
    if not math.isfinite(model.epsilon_) or model.epsilon_ == 0:
        return
    tight = _ledger(tmp_path / "tight.ledger", max_epsilon=0.5 * model.epsilon_)
    fresh = clone(case[1])
    with pytest.raises(PrivacyBudgetError, match="refuses"), tight.charging():
        _fit((case[0], fresh) + tuple(case[2:]), 0, units=False)
    assert tight.entries == []
    assert tight.spent() == 0.0


def test_a_fit_outside_a_charging_block_is_not_charged(ledger_path):
    ledger = _ledger(ledger_path)
    X, y = _xy()
    DPSGDClassifier(max_steps=10, random_state=0).fit(X, y)
    assert ledger.entries == []


def _xy(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    return X, (X[:, 0] > 0).astype(int)


def test_a_pipeline_charges_each_private_step_and_composes_like_spent(ledger_path):
    ledger = _ledger(ledger_path)
    X, y = _xy()
    pipe = make_pipeline(DPStandardScaler(bounds=(-4, 4), random_state=0),
                         DPSGDClassifier(max_steps=20, model_check=False, random_state=0))
    with ledger.charging("pipeline"):
        pipe.fit(X, y)
    assert [e.what.split()[0] for e in ledger.entries] == ["DPStandardScaler",
                                                           "DPSGDClassifier"]
    assert ledger.spent() == pytest.approx(spent(pipe, delta=DELTA).epsilon, rel=1e-12)


def test_fits_in_worker_processes_are_charged(ledger_path):
    """cross_validate with n_jobs=2 fits in joblib's worker processes (a
    pool started before the block included): each fold is charged."""
    from sklearn.model_selection import cross_validate

    from joblib import Parallel, delayed

    X, y = _xy()
    estimator = DPSGDClassifier(max_steps=10, model_check=False, random_state=0)
    # a worker pool started outside the block (its workers would not see it)
    Parallel(n_jobs=2)(delayed(abs)(i) for i in range(4))
    ledger = _ledger(ledger_path)
    with ledger.charging("cv"):
        cross_validate(estimator, X, y, cv=3, n_jobs=2)
    assert len(ledger.entries) == 3
    assert all(e.what == "DPSGDClassifier (cv)" for e in ledger.entries)
    # after it, nothing points to the ledger (the pool was stopped again)
    from skdp.privacy.ledger._ledger import LEDGER_ENV

    assert LEDGER_ENV not in os.environ
    DPSGDClassifier(max_steps=5, model_check=False).fit(X, y)
    assert len(ledger.entries) == 3


def test_a_search_is_charged_its_budget_once_and_committed_with_its_event(ledger_path):
    from skdp.model_selection import PrivateGridSearchCV

    ledger = _ledger(ledger_path)
    X, y = _xy(600)
    search = PrivateGridSearchCV(DPSGDClassifier(max_steps=20, model_check=False),
                                 {"learning_rate": [0.1, 0.5, 1.0]}, epsilon=1.0, delta=1e-6,
                                 random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with ledger.charging():
            search.fit(X, y)
    [entry] = ledger.entries  # not one per candidate
    assert entry.what.startswith("PrivateGridSearchCV")
    assert entry.status == "committed"
    assert entry.epsilon == pytest.approx(search.epsilon_)
    assert event_to_json(entry.event) == event_to_json(search.dp_event_)
    assert entry.epsilon <= 1.0
    # a second search of the same budget passes the cap of 1.5 by composition
    small = PrivacyLedger.create(ledger_path.with_suffix(".small"), max_epsilon=1.2,
                                 delta=DELTA)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with small.charging():
            clone(search).fit(X, y)
        with pytest.raises(PrivacyBudgetError, match="remaining"), small.charging():
            clone(search).fit(X, y)
    assert len(small.entries) == 1


def test_non_private_and_leaky_fits_are_refused(ledger_path):
    ledger = _ledger(ledger_path)
    X, y = _xy()
    with pytest.raises(PrivacyBudgetError, match="not private"), ledger.charging():
        DPSGDClassifier(epsilon=None, max_steps=5).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(PrivacyBudgetError, match="not private"), ledger.charging():
            DPStandardScaler(random_state=0).fit(X)  # ranges read in the clear
    assert ledger.entries == []


def test_record_and_unit_charges_are_not_mixed(ledger_path):
    ledger = _ledger(ledger_path)
    X, y = _xy()
    units = np.arange(len(y)) // 2
    with pytest.raises(ValueError, match="records with a fit about units"), ledger.charging():
        DPSGDClassifier(max_steps=10, random_state=0).fit(X, y, unit_ids=units)
    unit_ledger = _ledger(ledger_path.with_suffix(".units"), privacy_unit="unit")
    with unit_ledger.charging():
        DPSGDClassifier(max_steps=10, model_check=False, random_state=0).fit(
            X, y, unit_ids=units)
    assert unit_ledger.entries[0].privacy_unit.startswith("unit")
    with pytest.raises(ValueError, match="records with a fit about units"), \
            unit_ledger.charging():
        DPSGDClassifier(max_steps=10, random_state=0).fit(X, y)
    assert len(ledger.entries) == 0 and len(unit_ledger.entries) == 1


def test_a_failure_before_the_first_release_charges_nothing(ledger_path):
    ledger = _ledger(ledger_path)
    X, y = _xy()
    with pytest.raises(ValueError), ledger.charging():
        DPSGDClassifier(max_steps=10).fit(X, y[:-1])  # rejected by validation
    with pytest.raises(PrivacyBudgetError), ledger.charging():
        # the budget cannot pay for one step: refused while planning
        DPSGDClassifier(epsilon=1e-6, delta=1e-12, max_steps=10, batch_size=400).fit(X, y)
    assert ledger.entries == []



@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("name", ["DPSGDClassifier", "DPSGDRegressor",
                                  "DPRateConstrainedClassifier", "DPDROClassifier",
                                  "DPBilevelLogisticRegression"])
def test_non_finite_X_is_refused_before_anything_is_charged(ledger_path, name, value, dtype):
    # validation leaves X's finiteness to the fit, which reads it from the
    # rows' norms: the error must still come first, and be the same error
    import skdp

    ledger = _ledger(ledger_path)
    X, y = _xy()
    X = X.astype(dtype)
    X[7, 1] = value
    if name.endswith("Regressor"):
        y = (np.arange(len(y)) % 3).astype(np.float64)
    kwargs = {"sensitive_features": np.arange(len(y)) % 2} if "Constrained" in name else {}
    estimator = getattr(skdp, name)(random_state=0)
    with pytest.raises(ValueError, match="X contains missing or infinite values"), \
            ledger.charging():
        estimator.fit(X, y, **kwargs)
    assert ledger.entries == []


@pytest.mark.parametrize("value", [1e39, -1e300])
@pytest.mark.parametrize("name", ["DPSGDClassifier", "DPSGDRegressor",
                                  "DPRateConstrainedClassifier", "DPDROClassifier", "MLP"])
def test_X_beyond_float32_is_refused_before_anything_is_charged(ledger_path, name, value):
    # the range check is read from the rows' float32 norms too (the value
    # becomes an infinity there; an MLP computes no norms and checks): the
    # same error, no overflow warning of the conversion first, and nothing
    # charged
    import skdp

    ledger = _ledger(ledger_path)
    X, y = _xy()
    X[11, 0] = value
    if name.endswith("Regressor"):
        y = (np.arange(len(y)) % 3).astype(np.float64)
    kwargs = {"sensitive_features": np.arange(len(y)) % 2} if "Constrained" in name else {}
    if name == "MLP":
        estimator = skdp.DPSGDClassifier(hidden_layer_sizes=(4,), random_state=0)
    else:
        estimator = getattr(skdp, name)(random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(ValueError, match="too large for torch.float32"), \
                ledger.charging():
            estimator.fit(X, y, **kwargs)
    assert ledger.entries == []


def test_float64_X_at_the_float32_maximum_fits(ledger_path):
    # in range, so it fits; its float32 squared norm overflows, so the fit
    # makes both checks, and both pass
    ledger = _ledger(ledger_path)
    X, y = _xy()
    X[3, 0] = -float(np.finfo(np.float32).max)
    with ledger.charging():
        clf = DPSGDClassifier(max_steps=10, random_state=0).fit(X, y)
    assert np.isfinite(clf.coef_).all() and len(ledger.entries) == 1


def test_a_finite_row_too_large_to_square_still_fits(ledger_path):
    # its float32 squared norm overflows, so the fit asks scikit-learn, which
    # finds every value finite
    ledger = _ledger(ledger_path)
    X, y = _xy()
    X = X.astype(np.float32)
    X[3] = 3e38
    with ledger.charging():
        clf = DPSGDClassifier(max_steps=10, random_state=0).fit(X, y)
    assert np.isfinite(clf.coef_).all() and len(ledger.entries) == 1


def test_a_fit_that_fails_after_its_reservation_stays_charged(ledger_path, monkeypatch):
    ledger = _ledger(ledger_path)

    def broken(*args, **kwargs):
        raise RuntimeError("the trainer crashed")

    monkeypatch.setattr(DPSGDClassifier, "_train", broken)
    with pytest.raises(RuntimeError, match="crashed"), ledger.charging():
        DPSGDClassifier(max_steps=10, random_state=0).fit(*_xy())
    [entry] = ledger.entries
    assert entry.status == "reserved" and entry.epsilon > 0
    assert ledger.spent() == compute_epsilon(entry.event, DELTA) > 0


# ------------------------------------------------------------ composition
_EVENTS = st.one_of(
    st.builds(lambda s, q, t: poisson_gaussian_event(s, q, t),
              st.floats(0.6, 5.0), st.floats(0.001, 0.2), st.integers(1, 300)),
    st.builds(dpa.GaussianDpEvent, st.floats(0.5, 20.0)),
    st.builds(dpa.LaplaceDpEvent, st.floats(0.5, 20.0)),
)


@settings(max_examples=15, deadline=None)
@given(events=st.lists(_EVENTS, min_size=1, max_size=4))
def test_the_ledger_total_is_a_fresh_accountant_over_its_entries(tmp_path_factory, events):
    path = tmp_path_factory.mktemp("ledger") / "l"
    ledger = PrivacyLedger.create(path, max_epsilon=1e6, delta=DELTA)
    for i, event in enumerate(events):
        ledger.reserve(what=f"release {i}", epsilon=compute_epsilon(event, DELTA), delta=DELTA,
                       event=event)
    expected = compute_epsilon(dpa.ComposedDpEvent(list(events)), DELTA)
    reopened = PrivacyLedger(path)
    assert reopened.spent() == expected
    assert [event_from_json(event_to_json(e)) for e in events] == [e.event for e in
                                                                  reopened.entries]


def test_budget_charges_join_by_basic_composition(ledger_path):
    ledger = _ledger(ledger_path, max_epsilon=10.0)
    event = dpa.GaussianDpEvent(3.0)
    ledger.reserve(what="fit", epsilon=compute_epsilon(event, DELTA), delta=DELTA, event=event)
    ledger.reserve(what="search", epsilon=1.0, delta=DELTA / 4)
    assert ledger.spent() == pytest.approx(compute_epsilon(event, 0.75 * DELTA) + 1.0)
    with pytest.raises(PrivacyBudgetError, match="delta"):
        ledger.reserve(what="search", epsilon=0.1, delta=DELTA)  # no delta left


# ------------------------------------------------------------- the file
def test_missing_damaged_and_foreign_files_are_errors_not_fresh_budgets(ledger_path):
    with pytest.raises(LedgerError, match="no privacy ledger"):
        PrivacyLedger(ledger_path)
    ledger = _ledger(ledger_path, max_epsilon=2.0)
    ledger.reserve(what="fit", epsilon=1.0, delta=DELTA, event=dpa.GaussianDpEvent(3.0))
    with pytest.raises(FileExistsError):
        _ledger(ledger_path)
    good = ledger_path.read_text()
    document = json.loads(good)
    document["ledger"]["entries"] = []  # an edit that frees the budget
    ledger_path.write_text(json.dumps(document))
    with pytest.raises(LedgerError, match="checksum"):
        PrivacyLedger(ledger_path)
    with pytest.raises(LedgerError, match="checksum"), ledger.charging():
        DPSGDClassifier(max_steps=5).fit(*_xy())
    ledger_path.write_text(good[: len(good) // 2])  # a torn write
    with pytest.raises(LedgerError, match="damaged"):
        PrivacyLedger(ledger_path)
    ledger_path.write_text(good)
    assert len(PrivacyLedger(ledger_path).entries) == 1


def test_the_command_line_shows_entries_and_the_total(ledger_path, capsys):
    assert ledger_cli(["create", str(ledger_path), "--max-epsilon", "3", "--delta", "1e-5",
                       "--name", "credit"]) == 0
    ledger = PrivacyLedger(ledger_path)
    with ledger.charging("monthly"):
        DPSGDClassifier(max_steps=10, model_check=False, random_state=0).fit(*_xy())
    capsys.readouterr()
    assert ledger_cli(["show", str(ledger_path)]) == 0
    out = capsys.readouterr().out
    assert "'credit'" in out and "DPSGDClassifier (monthly)" in out and "committed" in out
    assert f"composed: epsilon {ledger.spent():.4g}" in out
    assert ledger_cli(["show", str(ledger_path) + ".missing"]) == 1
    # and as a module, from another process
    shown = subprocess.run([sys.executable, "-m", "skdp.privacy.ledger", "show",
                            str(ledger_path)], capture_output=True, text=True, check=True)
    assert "DPSGDClassifier (monthly)" in shown.stdout


# ------------------------------------------------- crashes and concurrency
def _charge_forever(path, marker):
    """Reserve, record the release as made (durably), commit; repeat."""
    ledger = PrivacyLedger(path)
    i = 0
    while True:
        entry = ledger.reserve(what=f"release {i}", epsilon=0.01, delta=0.0,
                               event=dpa.GaussianDpEvent(200.0))
        with open(marker, "a") as f:
            f.write(f"{i}\n")
            f.flush()
            os.fsync(f.fileno())
        ledger.commit(entry)
        i += 1


def test_a_killed_process_never_leaves_an_under_counting_ledger(tmp_path):
    """50 processes, each SIGKILLed at a random point of its
    reserve / release / commit loop: the ledger always reads, and holds at
    least one entry for every release made."""
    context = multiprocessing.get_context("fork")
    rng = random.Random(0)
    for run in range(50):
        path, marker = tmp_path / f"l{run}", tmp_path / f"m{run}"
        PrivacyLedger.create(path, max_epsilon=1e6, delta=DELTA)
        process = context.Process(target=_charge_forever, args=(path, marker))
        process.start()
        time.sleep(rng.uniform(0.0, 0.08))
        os.kill(process.pid, signal.SIGKILL)
        process.join()
        released = len(marker.read_text().split()) if marker.exists() else 0
        entries = PrivacyLedger(path).entries
        assert len(entries) >= released
        assert all(e.status == "committed" for e in entries[:released - 1])


def _race(path, start, results):
    ledger = PrivacyLedger(path)
    while time.time() < start:
        pass
    try:
        ledger.reserve(what="last", epsilon=0.6, delta=0.0, event=dpa.GaussianDpEvent(2.5))
        results.put(True)
    except PrivacyBudgetError:
        results.put(False)


def test_two_processes_never_both_spend_the_last_of_the_budget(tmp_path):
    event = dpa.GaussianDpEvent(2.5)
    one = compute_epsilon(event, DELTA)
    two = compute_epsilon(dpa.ComposedDpEvent([event, event]), DELTA)
    cap = 0.5 * (one + two)  # one more release fits, two do not
    context = multiprocessing.get_context("fork")
    wins = []
    for trial in range(100):
        path = tmp_path / f"l{trial}"
        PrivacyLedger.create(path, max_epsilon=cap, delta=DELTA)
        results = context.Queue()
        start = time.time() + 0.05
        racers = [context.Process(target=_race, args=(path, start, results)) for _ in range(2)]
        for racer in racers:
            racer.start()
        outcome = [results.get(timeout=30) for _ in racers]
        for racer in racers:
            racer.join()
        wins.append(sum(outcome))
        assert len(PrivacyLedger(path).entries) == sum(outcome)
    assert set(wins) == {1}


# ------------------------------------------------------------- silos
def test_a_silo_refuses_runs_past_its_lifetime_cap_across_restarts(tmp_path):
    from skdp import DPFERMIClassifier
    from skdp.federated import DirectTransport, FermiSilo, SiloPolicy

    path = tmp_path / "silo0.ledger"
    PrivacyLedger.create(path, max_epsilon=100.0, delta=1e-5, name="hospital 0")
    X, y = _xy(600)
    groups = (X[:, 1] > 0).astype(int)

    def run():
        # a fresh silo each run, from its node config: a restarted node keeps
        # only its file
        policy = SiloPolicy.from_node_config({
            "max-epsilon": 1.0, "allow-seeded-noise": "true", "ledger": str(path),
            "max-total-epsilon": "1.2"})
        silos = [FermiSilo(X[:300], y[:300], groups[:300], silo=0, policy=policy),
                 FermiSilo(X[300:], y[300:], groups[300:], silo=1,
                           policy=SiloPolicy.permissive())]
        clf = DPFERMIClassifier(epsilon=1.0, max_steps=20, model_check=False, random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return clf.fit_silos(DirectTransport(silos), classes=[0, 1], groups=[0, 1],
                                 n_features=3)

    run()
    entries = PrivacyLedger(path).entries
    assert len(entries) == 1 and entries[0].status == "committed"
    with pytest.raises(Exception, match="refuses this run"):
        run()  # two runs of epsilon 1 compose to about 1.4
    assert len(PrivacyLedger(path).entries) == 1
    with pytest.raises(ValueError, match="needs a lifetime ledger"):
        SiloPolicy(max_total_epsilon=2.0)
    path.write_text("{}")
    with pytest.raises(Exception, match="refuses every run"):
        run()
