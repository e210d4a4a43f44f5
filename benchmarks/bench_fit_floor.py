"""The floors of a private fit on Adult: what no change inside skdp can remove.

A ``DPSGDClassifier`` fit (``epsilon=1``, ``delta=1e-5``, ``batch_size=1024``,
318 steps, cold calibration caches) is set beside, in this one process:

* scikit-learn's ``LogisticRegression`` (lbfgs, one thread), the peer, and
  one epoch of its ``SGDClassifier`` (the peer of small batches: its time
  for as many rows as a batch holds is set beside a step's);
* one evaluation of dp-accounting's PLD accountant on the event the fit
  reports: every private fit makes at least this one (its epsilon is the
  accountant's number), so it is the floor of the calibration;
* the same DP-SGD steps written inline with nothing of skdp around them
  (gather the Poisson batch, logits, softmax output gradient, closed-form
  per-sample norms, clip, clipped sum, noise, momentum step): the floor of
  training in eager torch for this step count and batch.

Prints the medians, each as a multiple of ``LogisticRegression``'s time.
Usage::

    python benchmarks/bench_fit_floor.py [--repeats 5] [--batch-size 1024] [--steps 318]
"""

import argparse
import time
import warnings

import torch
from _common import load_adult, median, print_table, timed
from sklearn.linear_model import LogisticRegression, SGDClassifier
from threadpoolctl import threadpool_limits

from skdp import DPSGDClassifier
from skdp.debug import record_fit_times
from skdp.privacy import _accounting

EPSILON, DELTA = 1.0, 1e-5


def clear_calibration_caches():
    _accounting._calibrate_noise_cached.cache_clear()
    _accounting._epsilon_cached.cache_clear()


@torch.inference_mode()
def inline_steps(X, y, batch_size, n_steps, noise_std, seed):
    """Seconds the DP-SGD steps take written inline, their Poisson batches
    drawn as skdp draws them (geometric gaps between sampled rows, every
    step's at once) and their noise in one block."""
    n, d = X.shape
    rate = batch_size / n
    generator = torch.Generator().manual_seed(seed)
    rows = torch.as_tensor(X, dtype=torch.float32)
    onehot_t = torch.nn.functional.one_hot(torch.as_tensor(y).long(), 2).T.float().contiguous()
    sq_norms = (rows * rows).sum(1) + 1.0
    weights = torch.zeros((2, d + 1))
    velocity = torch.zeros_like(weights)
    width = int(batch_size + 6 * (batch_size * (1 - rate)) ** 0.5 + 16)
    batch = torch.empty((width, d + 1))
    batch[:, -1] = 1.0
    start = time.perf_counter()
    uniforms = torch.rand((n_steps, width), dtype=torch.float64, generator=generator)
    positions = uniforms.log_().div_(torch.log1p(torch.tensor(-rate))).floor_().add_(1).cumsum_(1)
    counts = (positions <= n).sum(1).tolist()
    positions = positions.long().sub_(1)
    noise = torch.randn((n_steps, weights.numel()), generator=generator)
    for step, count in enumerate(counts):
        idx = positions[step, :count]
        rows_b = batch[:count]
        torch.index_select(rows, 0, idx, out=rows_b[:, :-1])
        out_grad = torch.softmax(weights @ rows_b.T, 0).sub_(onehot_t.index_select(1, idx))
        sq = (out_grad * out_grad).sum(0) * sq_norms.index_select(0, idx)
        factors = sq.clamp_min(1e-30).rsqrt_().clamp_(max=1.0).nan_to_num_(nan=0.0)
        total = (out_grad * factors).nan_to_num_(nan=0.0, posinf=0.0, neginf=0.0) @ rows_b
        total.add_(noise[step].view(total.shape), alpha=noise_std)
        velocity.mul_(0.9).add_(total)
        weights.add_(velocity, alpha=-1.0 / batch_size)
    return time.perf_counter() - start


def accountant_seconds(event):
    """One cold evaluation of dp-accounting's PLD accountant on ``event``."""
    accountant = _accounting.make_accountant("pld")
    start = time.perf_counter()
    accountant.compose(event)
    accountant.get_epsilon(DELTA)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=318)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    X, y, *_ = load_adult()
    batch_size, n_steps = args.batch_size, args.steps
    print(f"Adult: {X.shape[0]} x {X.shape[1]}; epsilon={EPSILON}, delta={DELTA}, "
          f"batch={batch_size}, steps={n_steps}, one thread")

    DPSGDClassifier(epsilon=EPSILON, delta=DELTA, batch_size=batch_size, max_steps=n_steps,
                    random_state=99).fit(X, y)  # imports and first calls
    lr, sgd, fit, calibration, training, accountant, inline = ([] for _ in range(7))
    for seed in range(args.repeats):
        with threadpool_limits(1):
            lr.append(timed(LogisticRegression(max_iter=1000).fit, X, y)[1])
            sgd.append(timed(SGDClassifier(max_iter=1, tol=None, random_state=seed).fit, X, y)[1])
        clear_calibration_caches()
        clf = DPSGDClassifier(epsilon=EPSILON, delta=DELTA, batch_size=batch_size,
                              max_steps=n_steps, random_state=seed)
        with record_fit_times() as times:
            fit.append(timed(clf.fit, X, y)[1])
        calibration.append(times[-1]["calibration"])
        training.append(times[-1]["training"])
        report = clf.privacy_report_
        accountant.append(accountant_seconds(report.dp_event))
        inline.append(inline_steps(X, y, batch_size, clf.n_steps_,
                                   report.scale("gradient"), seed))

    peer = median(lr)
    per_step = 1e6 / n_steps

    def row(name, values, step_figure=False):
        value = median(values)
        return [name, f"{1e3 * value:.1f}", f"{value / peer:.3f}",
                f"{per_step * value:.0f}" if step_figure else "-"]

    print_table(
        f"Median of {args.repeats} (cold calibration caches)",
        ["part", "ms", "x LogisticRegression", "us/step"],
        [
            row("LogisticRegression fit", lr),
            ["SGDClassifier epoch, per batch of rows", "-", "-",
             f"{1e6 * median(sgd) * batch_size / X.shape[0]:.0f}"],
            row("DPSGDClassifier whole fit", fit),
            row("  its noise calibration", calibration),
            row("  its training", training, True),
            row("one dp-accounting evaluation of its event", accountant),
            row("the same steps inline, nothing of skdp", inline, True),
        ],
    )
    floor = median(accountant) + median(inline)
    print(f"\nfloor (one accountant evaluation + the inline steps): {1e3 * floor:.1f} ms = "
          f"{floor / peer:.3f}x LogisticRegression; skdp's steps / inline steps: "
          f"{median(training) / median(inline):.2f}")


if __name__ == "__main__":
    main()
