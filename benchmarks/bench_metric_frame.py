"""Private fairness assessment on Adult's test split: DPMetricFrame against
fairlearn's exact MetricFrame.

A LogisticRegression trained on Adult's training split predicts the test
split (16,281 rows); the report is by sex (2 groups) and by race (5 groups):
selection rate, true and false positive rates per group, the
demographic-parity difference and the equalized-odds difference. For each
epsilon, over ``--repeats`` noise draws: the median absolute error of the
private values against the exact ones, the median interval half-width, and
how often the interval held the exact value. Times: the median of
DPMetricFrame and of fairlearn's MetricFrame on the same predictions, in
this process. Usage::

    python benchmarks/bench_metric_frame.py [--repeats 100]
"""

import argparse
import warnings

import numpy as np
from _common import data_home, median, print_table, timed
from fairlearn.metrics import MetricFrame, false_positive_rate, selection_rate
from fairlearn.metrics import true_positive_rate as tpr_metric
from sklearn.linear_model import LogisticRegression

from skdp.datasets import fetch_adult, make_preprocessor
from skdp.metrics import DPMetricFrame

METRICS = {"selection_rate": selection_rate, "true_positive_rate": tpr_metric,
           "false_positive_rate": false_positive_rate}
EPSILONS = (0.1, 0.5, 1.0)


def adult_predictions():
    train = fetch_adult(data_home=data_home(), subset="train", as_frame=True, drop_missing=False)
    test = fetch_adult(data_home=data_home(), subset="test", as_frame=True, drop_missing=False)
    race = fetch_adult(data_home=data_home(), subset="test", as_frame=True, drop_missing=False,
                       sensitive_attribute="race").sensitive
    prep = make_preprocessor(train)
    model = LogisticRegression(max_iter=1000).fit(prep.fit_transform(train.data), train.target)
    pred = model.predict(prep.transform(test.data))
    return (np.asarray(test.target), pred,
            {"sex": np.asarray(test.sensitive, dtype=str), "race": np.asarray(race, dtype=str)})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=100)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    y, pred, attributes = adult_predictions()
    rows, timing = [], []
    for attribute, groups in attributes.items():
        names = sorted(set(groups))
        runs = [timed(MetricFrame, metrics=METRICS, y_true=y, y_pred=pred,
                      sensitive_features=groups) for _ in range(5)]
        exact, fl_seconds = runs[-1][0], median([seconds for _, seconds in runs])
        sizes = dict(zip(*np.unique(groups, return_counts=True)))
        exact_dp = exact.difference()["selection_rate"]
        exact_eo = max(exact.difference()["true_positive_rate"],
                       exact.difference()["false_positive_rate"])
        print(f"{attribute}: groups {sizes}; exact DP difference {exact_dp:.4f}, "
              f"EO difference {exact_eo:.4f}")
        for epsilon in EPSILONS:
            errors, halves, held = {}, {}, {}
            seconds = []
            for seed in range(args.repeats):
                frame, s = timed(DPMetricFrame, metrics={k: k for k in METRICS}, y_true=y,
                                 y_pred=pred, sensitive_features=groups,
                                 sensitive_groups=names, epsilon=epsilon, random_state=seed)
                seconds.append(s)
                intervals = frame.by_group_interval
                for metric in METRICS:
                    truth = exact.by_group[metric].loc[names].to_numpy()
                    low = intervals[(metric, "low")].to_numpy()
                    high = intervals[(metric, "high")].to_numpy()
                    value = frame.by_group[metric].to_numpy()
                    errors.setdefault(metric, []).append(np.nanmax(np.abs(value - truth)))
                    halves.setdefault(metric, []).append(np.max((high - low) / 2))
                    held.setdefault(metric, []).append(np.all((low <= truth) & (truth <= high)))
                low, high = frame.difference_interval()["selection_rate"]
                errors.setdefault("DP difference", []).append(
                    abs(frame.difference()["selection_rate"] - exact_dp))
                halves.setdefault("DP difference", []).append((high - low) / 2)
                held.setdefault("DP difference", []).append(low <= exact_dp <= high)
                value, low, high = frame.largest_difference_interval(
                    ["true_positive_rate", "false_positive_rate"])
                errors.setdefault("EO difference", []).append(abs(value - exact_eo))
                halves.setdefault("EO difference", []).append((high - low) / 2)
                held.setdefault("EO difference", []).append(low <= exact_eo <= high)
            for metric in errors:
                rows.append([attribute, f"{epsilon:g}", metric,
                             f"{median(errors[metric]):.4f}", f"{median(halves[metric]):.4f}",
                             f"{np.mean(held[metric]):.2f}"])
            timing.append([attribute, f"{epsilon:g}", f"{1e3 * median(seconds):.2f}",
                           f"{1e3 * fl_seconds:.2f}", f"{median(seconds) / fl_seconds:.2f}"])
    print_table(
        f"Adult test split, LogisticRegression's predictions ({args.repeats} noise draws; "
        "group metrics: the worst group)",
        ["attribute", "epsilon", "metric", "median |error|", "median half-width",
         "all intervals held the exact"], rows,
    )
    print_table("Time: DPMetricFrame (median) against fairlearn MetricFrame",
                ["attribute", "epsilon", "skdp ms", "fairlearn ms", "ratio"], timing)


if __name__ == "__main__":
    main()
