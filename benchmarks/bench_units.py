"""Records or persons: DPSGDClassifier with record-level and unit-level privacy
on a synthetic panel of persons with heavy-tailed record counts.

The panel: persons with 1 to 300 records each (a discretised log-normal),
features ``x = m_p + e`` around a person mean ``m_p``, and labels from a
logistic model with a person-level random intercept, so a person's records
are correlated. Persons are split into training, validation (to choose the
default ``max_records_per_unit``) and test persons; every score is on
held-out persons.

For each epsilon it fits

* the record-level DPSGDClassifier (its epsilon is about one *record*);
* the unit-level one, ``fit(..., unit_ids=person)``, for each k of
  ``max_records_per_unit`` in {1, 4, 16, 64} (its epsilon is about one
  *person*);
* scikit-learn's LogisticRegression (not private), for reference;

and prints test accuracy and log-loss (median over seeds), the validation
log-loss of each k, and the epsilon that the record-level fit gives the
largest person. That last figure is computed with the accountant on the
record-level fit's own event: a person with s records moves every release by
at most s times its record bound (noise multiplier sigma / s), and is touched
by a step when any of its s records is sampled, with probability
``1 - (1 - q)**s`` (its records are sampled one by one, so the rate q alone
would understate the risk); the one-off releases after training likewise
get multiplier sigma / s. Usage::

    python benchmarks/bench_units.py [--seeds 3] [--persons 2000]
"""

import argparse
import logging
import statistics
import time
import warnings

import dp_accounting as dpa
import numpy as np
from _common import print_table
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, log_loss

from skdp import (
    DPBilevelLogisticRegression,
    DPDROClassifier,
    DPFERMIClassifier,
    DPRateConstrainedClassifier,
    DPSGDClassifier,
)
from skdp._fit.units import MAX_RECORDS_PER_UNIT
from skdp.metrics import demographic_parity_difference, worst_group_accuracy
from skdp.privacy import compute_epsilon

EPSILONS = (1.0, 3.0, 8.0)
KS = (1, 4, 16, 64)
DELTA = 1e-5


def make_panel(n_persons, seed, n_features=40):
    """Records of ``n_persons`` persons: X, y, person id of each record."""
    rng = np.random.default_rng(seed)
    sizes = np.clip(np.ceil(np.exp(rng.normal(1.5, 1.3, n_persons))), 1, 300).astype(int)
    person = np.repeat(np.arange(n_persons), sizes)
    means = rng.normal(0.0, 0.7, (n_persons, n_features))
    X = means[person] + rng.normal(0.0, 1.0, (len(person), n_features))
    w = np.random.default_rng(12345).normal(0.0, 1.0, n_features) / np.sqrt(n_features) * 1.5
    intercept = rng.normal(0.0, 1.0, n_persons)[person]
    y = (rng.random(len(person)) < 1.0 / (1.0 + np.exp(-(X @ w + intercept)))).astype(int)
    # a person-level binary group tied to the person's mean features (its
    # own stream, so X, y and person are those of the DP-SGD tables)
    tilt = 1.0 / (1.0 + np.exp(-2.0 * means[:, 0]))
    group = (np.random.default_rng(seed + 1).random(n_persons) < tilt).astype(int)[person]
    return X, y, person, group


def split(X, y, person, group, parts):
    """Records of the persons in each part (persons split at random)."""
    persons = np.random.default_rng(7).permutation(person.max() + 1)
    out, start = [], 0
    for size in parts:
        chosen = np.isin(person, persons[start:start + size])
        out.append((X[chosen], y[chosen], person[chosen], group[chosen]))
        start += size
    return out


def scores(model, X, y):
    proba = model.predict_proba(X)
    return accuracy_score(y, proba.argmax(1)), log_loss(y, proba)


def group_epsilon(report, size):
    """Accountant epsilon of the record-level fit ``report`` for a group of
    ``size`` records (see the module docstring)."""
    (q,), (steps,), (z,) = report.sampling_rates, report.steps, report.joint_noise_multipliers
    rate = 1.0 - (1.0 - q) ** size
    step = dpa.PoissonSampledDpEvent(rate, dpa.GaussianDpEvent(z / size))
    events = [dpa.SelfComposedDpEvent(step, steps)]
    if report.initial_event is not None:
        events.insert(0, dpa.GaussianDpEvent(report.initial_event.noise_multiplier / size))
    return compute_epsilon(dpa.ComposedDpEvent(events), DELTA, "rdp")


#: The other estimators that take unit ids, at their defaults, with a
#: metric of what each is for: the demographic-parity gap that RaCO-DP's
#: default constraint bounds, the worst-group accuracy that DRO improves.
OTHERS = {
    "DPRateConstrainedClassifier": (DPRateConstrainedClassifier, "sensitive_features",
                                    "DP gap", lambda y, p, g: demographic_parity_difference(
                                        y, p, sensitive_features=g)),
    "DPDROClassifier": (DPDROClassifier, None, "worst-group acc",
                        lambda y, p, g: worst_group_accuracy(y, p, sensitive_features=g)),
    "DPFERMIClassifier": (DPFERMIClassifier, "sensitive_features", "DP gap",
                          lambda y, p, g: demographic_parity_difference(
                              y, p, sensitive_features=g)),
    "DPBilevelLogisticRegression": (DPBilevelLogisticRegression, None, "-", None),
}


def others(args, train, test):
    """Record-level and person-level fits of :data:`OTHERS` at default k."""
    Xtr, ytr, ptr, gtr = train
    Xte, yte, _, gte = test
    rows = []
    for name, (Estimator, group_arg, metric, metric_fn) in OTHERS.items():
        for eps in EPSILONS:
            for unit in ("record", "person"):
                results = []
                for seed in range(args.seeds):
                    fit_params = {} if group_arg is None else {group_arg: gtr}
                    if unit == "person":
                        fit_params["unit_ids"] = ptr
                    model = Estimator(epsilon=eps, delta=DELTA, random_state=seed).fit(
                        Xtr, ytr, **fit_params)
                    accuracy, loss = scores(model, Xte, yte)
                    value = np.nan if metric_fn is None else metric_fn(
                        yte, model.predict(Xte), gte)
                    results.append((accuracy, loss, value))
                med = [statistics.median(r[i] for r in results) for i in range(3)]
                rows.append([name, eps, unit, f"{med[0]:.3f}", f"{med[1]:.4f}",
                             "-" if metric_fn is None else f"{metric} {med[2]:.3f}"])
    print_table(f"Other estimators at their defaults (max_records_per_unit="
                f"{MAX_RECORDS_PER_UNIT}), test on held-out persons, median over seeds",
                ["estimator", "epsilon", "unit", "accuracy", "log-loss", "metric"], rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--persons", type=int, default=2000)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    logging.getLogger("absl").setLevel(logging.ERROR)  # RDP orders it drops
    start = time.perf_counter()
    n_train = args.persons
    X, y, person, group = make_panel(n_train * 7 // 4, seed=0)
    train, valid, test = split(X, y, person, group, [n_train, n_train // 4, n_train // 2])
    Xtr, ytr, ptr, _ = train
    sizes = np.bincount(ptr)[np.unique(ptr)]
    print(f"training: {len(np.unique(ptr))} persons, {len(ytr)} records "
          f"(records per person: median {int(np.median(sizes))}, mean {sizes.mean():.1f}, "
          f"max {sizes.max()}); validation: {len(valid[1])} records, "
          f"test: {len(test[1])} records of held-out persons")

    lr = LogisticRegression(max_iter=1000).fit(Xtr, ytr)
    lr_acc, lr_loss = scores(lr, *test[:2])

    rows, valid_rows, group_rows, valid_loss = [], [], [], {}
    for eps in EPSILONS:
        fits = {"record": [], **{k: [] for k in KS}}
        for seed in range(args.seeds):
            record = DPSGDClassifier(epsilon=eps, delta=DELTA, random_state=seed).fit(Xtr, ytr)
            fits["record"].append((scores(record, *test[:2]), scores(record, *valid[:2])))
            for k in KS:
                unit = DPSGDClassifier(epsilon=eps, delta=DELTA, max_records_per_unit=k,
                                       random_state=seed).fit(Xtr, ytr, unit_ids=ptr)
                fits[k].append((scores(unit, *test[:2]), scores(unit, *valid[:2])))
        med = {key: [statistics.median(f[i][j] for f in values) for i in (0, 1) for j in (0, 1)]
               for key, values in fits.items()}
        valid_rows.append([eps] + [f"{med[k][3]:.4f}" for k in KS])
        valid_loss[eps] = {k: med[k][3] for k in KS}
        best = min(KS, key=lambda k: med[k][3])
        rows.append([eps, "record", "record", f"{med['record'][0]:.3f}", f"{med['record'][1]:.4f}"])
        for k in KS:
            rows.append([eps, "person", f"k={k}" + (" *" if k == best else ""),
                         f"{med[k][0]:.3f}", f"{med[k][1]:.4f}"])
        group_rows.append([eps, f"{record.epsilon_:.3g}", sizes.max(),
                           f"{group_epsilon(record.privacy_report_, int(sizes.max())):.4g}",
                           f"{group_epsilon(record.privacy_report_, int(np.median(sizes))):.4g}"])
    rows.append(["-", "LogisticRegression", "-", f"{lr_acc:.3f}", f"{lr_loss:.4f}"])
    print_table("Test (held-out persons), median over seeds; * = best k on validation",
                ["epsilon", "unit", "k", "accuracy", "log-loss"], rows)
    print_table("Validation log-loss of the unit-level fit by max_records_per_unit",
                ["epsilon"] + [f"k={k}" for k in KS], valid_rows)
    print_table("Epsilon of the record-level fit for one person (accountant, group of s "
                "records: multiplier sigma/s at rate 1-(1-q)^s)",
                ["epsilon (record)", "record epsilon_", "largest s", "person epsilon",
                 "median-person epsilon"], group_rows)
    # the default: the smallest k within 0.0005 of the best validation
    # log-loss at every epsilon (a larger k only costs compute)
    default = min(k for k in KS if all(losses[k] <= min(losses.values()) + 5e-4
                                       for losses in valid_loss.values()))
    others(args, train, test)
    print(f"\nmax_records_per_unit rule (smallest k within 0.0005 of the best validation "
          f"log-loss at every epsilon): {default}")
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
