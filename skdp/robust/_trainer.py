"""DP Double-SPIDER, DP Recursive-SPIDER and DP-SGD on the DRO dual (torch only).

Notation: ``l_i`` is record i's loss, capped at the public ``loss_bound`` B
where it enters a weight (``lt_i = min(l_i, B)``); ``lam`` the penalty (or
the KL temperature), ``eta`` the dual variable of the penalised form.

* Double SPIDER (spec sec. 2.2, general psi, penalised dual
  ``L(x, eta) = lam mean psi*((lt - eta)/lam) + eta``): ``eta`` moves first on
  its own SPIDER estimate, then ``x`` on the gradient taken at the new
  ``eta``. Per-sample gradients are ``w_i grad l_i`` (x) and ``1 - w_i``
  (eta), with ``w_i = (psi*)'((lt_i - eta)/lam)``.

Clip, then weight: the x statistic of record i is ``w_i clip(grad l_i, C)``,
never ``clip(w_i grad l_i, C)``. Clipping the weighted gradient throws the
DRO weight away for every record whose gradient is longer than ``C`` (most
hard records, the very ones DRO upweights), so the fit barely depends on
``lam``. Weights are bounded by a public ``W = (psi*)'(B / lam)`` (``eta``
is kept in ``[0, B]``), capped at ``max_weight`` by the divergence, so a
record moves the sum by at most ``W C``: that is the sensitivity in the
release plan. Differences ``w_i clip(g_i) - w'_i clip(g'_i)`` are clipped
again to an adaptive bound at most ``2 W C``. Recursive SPIDER's shifted
weights ``exp((lt - B)/lam)`` are at most 1 (``W = 1``).
* Recursive SPIDER (spec sec. 2.3, KL, compositional form
  ``Psi = lam log mean exp(lt/lam) + lam rho``) in the shifted, overflow-free
  form ``gt_i = exp((lt_i - B)/lam)`` in (0, 1]: SPIDER estimates of
  ``mean gt grad l`` (x) and ``mean (B - lt) gt`` (lam), and a STORM
  estimate ``s`` of ``mean gt``; the step is ``x -= lr v/s`` and
  ``lam -= lr (u/(lam s) + log s + rho)``.
* DP-SGD on the finite-sum dual (the baseline): per-sample gradients in
  ``x`` and in the dual variables (``eta``, and ``lam`` for the constrained
  KL form ``lam mean(exp((lt - eta)/lam) - 1) + eta + lam rho``).

Sample weights (the backend's ``record_weights``, factors ``a_i`` in
[0, 1]) weigh the empirical distribution: every per-record term -- the x
statistic (``a_i w_i clip(grad l_i, C)``: the backend folds ``a_i`` into
the DRO weight) and each clipped scalar statistic -- is multiplied by
``a_i`` after it is bounded, so no sensitivity changes. Sums are still
divided by the public expected batch sizes, so weights below 1 also scale
the steps by their mean.

Every released statistic is a clipped per-sample sum plus Gaussian noise of
standard deviation ``multiplier * clip``; anchors on one Poisson batch every
``epoch_size`` steps, differences on a smaller one in between (each record's
difference of clipped gradients clipped again to an adaptive bound computed
from the released iterates). Noise multipliers come from the estimator's
release plan.
"""

import math
import time
from dataclasses import dataclass

import torch

from .._training import make_optimizer
from ..privacy import NoiseStream, clip_factors, current_communicator, make_sampler, weigh

#: Largest per-sample weight handed to float32 gradient code: clip(w g, C)
#: only differs from clip(min(w, cap) g, C) for records with |g| < C / cap.
_WEIGHT_CAP = {torch.float32: 1e15, torch.float64: 1e150}
_TINY = 1e-12


@dataclass(frozen=True)
class DROConfig:
    """Settings of one DRO run, built by the estimator.

    ``noise`` maps release names to noise multipliers (noise standard
    deviation over the release's clipping bound); None trains without noise.
    """

    algorithm: str
    divergence: object
    formulation: str
    lam: float
    rho: float
    lam_min: float
    loss_bound: float
    n_steps: int
    epoch_size: int
    anchor_rate: float
    diff_rate: float
    max_grad_norm: float
    dual_grad_norm: float
    diff_clip: float
    learning_rate: float
    dual_learning_rate: float
    momentum: float = 0.0
    storm_beta: float = 0.0
    step_norm_cap: float = 1.0
    weight_bound: float = 1.0
    noise: dict = None
    iterate: str = "last"
    verbose: int = 0
    #: privacy units (:func:`~skdp.privacy.bound_units`) or None: batches are
    #: then Poisson samples of units (rates over units) and every sum is
    #: divided by an expected number of units; the backend's record weights
    #: hold the unit factors
    units: object = None


class _Problem:
    """Per-sample losses, weights and clipped sums on a backend."""

    def __init__(self, backend, loss, targets, config):
        self.backend = backend
        self.loss = loss
        self.targets = targets
        self.config = config
        self.dtype = backend.parameters[0].dtype
        self.cap = _WEIGHT_CAP.get(self.dtype, 1e15)

    def batch(self, idx):
        batch, outputs_t = self.backend.forward(idx)
        return batch, outputs_t, (self.targets.index_select(0, idx).T,)

    def capped_losses(self, outputs_t, targets_t):
        """Per-sample losses in ``[0, B]``; a loss that is not finite (an
        extreme record's overflowing outputs) counts as ``B``, so no record
        can turn a weight or a dual statistic into NaN."""
        losses = self.loss.losses_t(outputs_t, *targets_t).double()
        bound = self.config.loss_bound
        return losses.nan_to_num_(nan=bound, posinf=bound).clamp_(0.0, bound)

    def record_weights(self, idx):
        """The sample-weight factors of the rows ``idx`` (None: unweighted)."""
        return self.backend.batch_weights(idx)

    def weights_t(self, weights):
        """Per-sample weights in the model's precision, shape (batch,)."""
        return weights.clamp(0.0, self.cap).to(self.dtype)

    def grad_sum(self, idx, batch, outputs_t, targets_t, weights, clip):
        """``sum_i w_i clip(grad l_i, clip)`` (clip, then weight)."""
        sums, _ = self.backend.clipped_weighted_grad_sum(
            idx, batch, outputs_t, self.loss, targets_t, self.weights_t(weights), clip
        )
        return sums

    def diff_sum(self, idx, batch, previous, outputs_t, prev_outputs_t, targets_t, weights,
                 prev_weights, clip, inner):
        """``sum_i clip(w_i clip(g_i, inner) - w'_i clip(g'_i, inner), clip)``.

        The backend's record weights ``a_i`` multiply ``w_i`` and ``w'_i``
        before the outer clip, so each record moves the sum by at most
        ``clip`` whatever its weight: enough for records, not for units (a
        unit's k records would move it by up to ``k clip``). With units
        (``config.units``) the outer bound of record i is ``a_i clip``
        instead, so its term is ``a_i clip(w_i clip(g_i) - w'_i clip(g'_i),
        clip)`` (clip, then weight) and a unit, whose factors sum to at most
        1, moves the sum by at most ``clip``.
        """
        if getattr(self.config, "units", None) is not None:
            own = self.backend.batch_weights(idx)
            clip = torch.as_tensor(clip, dtype=self.dtype, device=own.device) * own.to(self.dtype)
        sums, _ = self.backend.clipped_grad_diff_sum(
            idx, batch, previous, self.loss, targets_t, targets_t, clip, inner_norm=inner,
            logits_t=outputs_t, previous_logits_t=prev_outputs_t,
            weights=self.weights_t(weights), previous_weights=self.weights_t(prev_weights),
        )
        return sums


def _clip_scalar(values, bound):
    """Per-sample clipping of scalars: ``values`` clamped to ``[-bound, bound]``."""
    return torch.maximum(torch.minimum(values, bound), -bound) if torch.is_tensor(bound) else \
        values.clamp(-bound, bound)


def _norm(tensors):
    return torch.sqrt(sum(t.double().square().sum() for t in tensors))


class _Noise:
    """Unit Gaussian noise for the x statistic and up to three scalars.

    ``root=False`` (a rank other than the root of a data-parallel fit):
    zeros, drawn from nothing; the root adds the noise of the sums over the
    ranks.
    """

    def __init__(self, parameters, generator, private, root=True):
        self.private = private
        self.sizes = [p.numel() for p in parameters]
        self.stream = NoiseStream(sum(self.sizes) + 3, generator, dtype=parameters[0].dtype) \
            if private else None
        self.root = root

    def draw(self):
        """``(list of x-shaped unit noise, float64 tensor of 3 unit scalars)``."""
        if not self.root:
            like = {"dtype": self.stream.dtype, "device": self.stream.generator.device}
            return ([torch.zeros(size, **like) for size in self.sizes],
                    torch.zeros(3, dtype=torch.float64, device=like["device"]))
        row = self.stream.next()
        parts, offset = [], 0
        for size in self.sizes:
            parts.append(row[offset:offset + size])
            offset += size
        return parts, row[offset:].double()


def _add_noise(sums, unit, std):
    for total, noise in zip(sums, unit):
        total.add_(noise.view(total.shape) * std)
    return sums


class _History:
    """Per-step private quantities, kept on the device and read once."""

    def __init__(self, n_steps, device, names):
        self.values = {k: torch.zeros(n_steps, dtype=torch.float64, device=device) for k in names}

    def record(self, step, **values):
        for name, value in values.items():
            self.values[name][step] = value

    def finish(self):
        return {k: v.cpu().numpy() for k, v in self.values.items()}


def _n_sampled(targets, config):
    """The number of sampled items: records, or units with ``config.units``
    (public either way); expected batches are rates times it."""
    if config.units is not None:
        return config.units.n_units
    return current_communicator().total(targets.shape[0])  # all ranks' rows


class _AnchoredBatches:
    """The batches of a SPIDER run in step order: an anchor batch every
    ``epoch_size`` steps (from step 0), difference batches in between.

    An iterator like :class:`~skdp.privacy.Batches`, whose :meth:`drawn`
    shows the upcoming batches both samplers have already drawn (so a
    backend can gather them ahead without changing the order of draws).
    """

    def __init__(self, n, config, generator):
        self.n_steps, self.epoch_size = config.n_steps, config.epoch_size
        n_anchor = -(-config.n_steps // config.epoch_size)
        anchors, _ = make_sampler(n, config.anchor_rate, generator, config.units)
        diffs, _ = make_sampler(n, config.diff_rate, generator, config.units)
        comm = current_communicator()  # data-parallel: this rank's part of each batch
        self.anchors = comm.shard(anchors).batches(n_anchor)
        self.diffs = comm.shard(diffs).batches(config.n_steps - n_anchor)
        self.step = 0

    def is_anchor(self, step):
        return step % self.epoch_size == 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.step >= self.n_steps:
            raise StopIteration
        source = self.anchors if self.is_anchor(self.step) else self.diffs
        self.step += 1
        return next(source)

    def drawn(self, count):
        """Up to ``count`` next batches in step order, as long as their
        sampler has drawn them already."""
        out, seen = [], {True: 0, False: 0}
        for step in range(self.step, min(self.step + count, self.n_steps)):
            anchor = self.is_anchor(step)
            ready = (self.anchors if anchor else self.diffs).drawn(seen[anchor] + 1)
            if len(ready) <= seen[anchor]:
                break
            out.append(ready[seen[anchor]])
            seen[anchor] += 1
        return out


def _average(params, total, count):
    if count:
        for p, s in zip(params, total):
            p.copy_(s / count)


class _Averager:
    """Average of the iterates over the second half of the run (post-processing)."""

    def __init__(self, params, n_steps, enabled):
        self.start = n_steps // 2 if enabled else n_steps
        self.params = params
        self.sums = [torch.zeros_like(p) for p in params] if enabled else []
        self.scalar = torch.zeros((), dtype=torch.float64, device=params[0].device)
        self.count = 0

    def update(self, step, scalar):
        if step >= self.start:
            self.count += 1
            for s, p in zip(self.sums, self.params):
                s.add_(p)
            self.scalar += scalar

    def finalize(self, scalar):
        if not self.count:
            return scalar
        _average(self.params, self.sums, self.count)
        return self.scalar / self.count


def _progress(name, step, n_steps, start, verbose):
    if verbose and ((step + 1) % max(1, n_steps // 10) == 0 or step + 1 == n_steps):
        print(f"[{name}] step {step + 1}/{n_steps}  elapsed {time.perf_counter() - start:.2f}s")


@torch.inference_mode()
def train_double_spider(backend, loss, targets, config, generator):
    """DP Double-SPIDER (spec sec. 2.2, with the library's fixes).

    Returns
    -------
    eta : float
    history : dict of str to ndarray
        Released quantities per step: ``eta``, ``grad_norm`` (norm of the
        noisy x estimate), ``eta_grad``, ``step_size``, ``diff_clip``.
    """
    cfg, n = config, _n_sampled(targets, config)
    problem = _Problem(backend, loss, targets, cfg)
    params = backend.parameters
    device = params[0].device
    noise = cfg.noise or {}
    private = cfg.noise is not None
    comm = current_communicator()
    units = _Noise(params, generator, private, root=comm.is_root)
    lam, B = cfg.lam, cfg.loss_bound
    div = cfg.divergence
    c_x, c_eta = cfg.max_grad_norm, cfg.dual_grad_norm
    W = cfg.weight_bound  # public bound on the weights: x sensitivity W * c_x
    n_anchor_exp, n_diff_exp = cfg.anchor_rate * n, cfg.diff_rate * n
    eta = torch.tensor(0.0, dtype=torch.float64, device=device)
    eta_prev = eta.clone()
    prev = [p.clone() for p in params]
    v = [torch.zeros_like(p) for p in params]
    g = torch.zeros((), dtype=torch.float64, device=device)
    step_x = torch.zeros((), dtype=torch.float64, device=device)
    batches = _AnchoredBatches(n, cfg, generator)
    history = _History(cfg.n_steps, device, ("eta", "grad_norm", "eta_grad", "step_size",
                                             "diff_clip"))
    averager = _Averager(params, cfg.n_steps, cfg.iterate == "average")
    start = time.perf_counter()
    for t, idx in enumerate(backend.feed(batches)):
        anchor = batches.is_anchor(t)
        batch, out_t, tgt = problem.batch(idx)
        lt = problem.capped_losses(out_t, tgt)
        a = problem.record_weights(idx)
        unit_x, unit_s = units.draw() if private else (None, None)
        if anchor:
            w = div.weight((lt - eta) / lam)
            stat = weigh(_clip_scalar(1.0 - w, c_eta), a).sum()
            if private:
                stat = stat + unit_s[0] * noise["eta_anchor"] * c_eta
            comm.sum_([stat])
            g = stat / n_anchor_exp
            clip_t = torch.zeros((), dtype=torch.float64, device=device)
        else:
            prev_out_t = backend.forward_at(batch, prev)
            prev_lt = problem.capped_losses(prev_out_t, tgt)
            # adaptive difference bound from released iterates (post-processing)
            move = torch.sqrt(step_x.square() + (eta - eta_prev).square())
            clip_t = (cfg.diff_clip * move).clamp(_TINY, 2.0 * max(c_x, c_eta))
            clip_eta = torch.minimum(clip_t, torch.tensor(2.0 * c_eta, dtype=torch.float64,
                                                          device=device))
            w = div.weight((lt - eta) / lam)
            w_prev = div.weight((prev_lt - eta_prev) / lam)
            d = weigh(_clip_scalar(_clip_scalar(1.0 - w, c_eta) - _clip_scalar(1.0 - w_prev, c_eta),
                                   clip_eta), a).sum()
            if private:
                d = d + unit_s[0] * noise["eta_diff"] * clip_eta
            comm.sum_([d])
            g = g + d / n_diff_exp
        eta_new = (eta - cfg.dual_learning_rate * g).clamp(0.0, B)
        w_new = div.weight((lt - eta_new) / lam)
        if anchor:
            sums = problem.grad_sum(idx, batch, out_t, tgt, w_new, c_x)
            if private:
                _add_noise(sums, unit_x, noise["x_anchor"] * W * c_x)
            v = [s.div_(n_anchor_exp) for s in comm.sum_(sums)]
        else:
            # the weighted gradients are up to W times longer, and so are
            # their changes: the difference bound scales with W
            clip_x = (clip_t * W).clamp(max=2.0 * W * c_x)
            w_old = div.weight((prev_lt - eta) / lam)  # v_{t-1} was taken at (x_{t-1}, eta_t)
            sums = problem.diff_sum(idx, batch, prev, out_t, prev_out_t, tgt, w_new, w_old,
                                    clip_x.to(problem.dtype), c_x)
            if private:
                _add_noise(sums, unit_x, (noise["x_diff"] * clip_x).to(problem.dtype))
            for acc, s in zip(v, comm.sum_(sums)):
                acc.add_(s, alpha=1.0 / n_diff_exp)
        v_norm = _norm(v)
        beta = torch.clamp(cfg.learning_rate * torch.ones_like(v_norm), max=cfg.step_norm_cap / v_norm.clamp_min(_TINY))
        for p, q_, vv in zip(params, prev, v):
            q_.copy_(p)
            p.sub_(vv * beta.to(p.dtype))
        step_x = beta * v_norm
        eta_prev, eta = eta, eta_new
        history.record(t, eta=eta, grad_norm=v_norm, eta_grad=g, step_size=beta, diff_clip=clip_t)
        averager.update(t, eta)
        _progress("DP Double-SPIDER", t, cfg.n_steps, start, cfg.verbose)
    eta = averager.finalize(eta)
    return float(eta), history.finish()


@torch.inference_mode()
def train_recursive_spider(backend, loss, targets, config, generator, lam_init):
    """DP Recursive-SPIDER on the shifted KL compositional objective.

    Returns
    -------
    lam : float
    history : dict of str to ndarray
        ``lam``, ``grad_norm`` (norm of the x step direction ``v/s``),
        ``s`` (noisy mean of the shifted exponentials), ``step_size``,
        ``diff_clip``.
    """
    cfg, n = config, _n_sampled(targets, config)
    problem = _Problem(backend, loss, targets, cfg)
    params = backend.parameters
    device = params[0].device
    noise = cfg.noise or {}
    private = cfg.noise is not None
    comm = current_communicator()
    units = _Noise(params, generator, private, root=comm.is_root)
    B, rho = cfg.loss_bound, cfg.rho
    constrained = cfg.formulation == "constrained"
    c_x, c_u = cfg.max_grad_norm, cfg.dual_grad_norm
    n_anchor_exp, n_diff_exp = cfg.anchor_rate * n, cfg.diff_rate * n
    beta_s = cfg.storm_beta
    lam = torch.tensor(float(lam_init), dtype=torch.float64, device=device)
    lam_prev = lam.clone()
    # the optimal temperature is at most B / rho + lam_min: projecting on it is free
    lam_max = B / rho + cfg.lam_min if rho > 0 else math.inf
    prev = [p.clone() for p in params]
    v = [torch.zeros_like(p) for p in params]
    u = torch.zeros((), dtype=torch.float64, device=device)
    s = torch.ones((), dtype=torch.float64, device=device)
    step_w = torch.zeros((), dtype=torch.float64, device=device)
    batches = _AnchoredBatches(n, cfg, generator)
    history = _History(cfg.n_steps, device, ("lam", "grad_norm", "s", "step_size", "diff_clip"))
    averager = _Averager(params, cfg.n_steps, cfg.iterate == "average")
    start = time.perf_counter()
    for t, idx in enumerate(backend.feed(batches)):
        anchor = batches.is_anchor(t)
        batch, out_t, tgt = problem.batch(idx)
        lt = problem.capped_losses(out_t, tgt)
        gt = torch.exp((lt - B) / lam)
        a = problem.record_weights(idx)
        unit_x, unit_s = units.draw() if private else (None, None)
        if anchor:
            sums = problem.grad_sum(idx, batch, out_t, tgt, gt, c_x)
            s_sum = weigh(gt, a).sum()
            u_sum = weigh(_clip_scalar((B - lt) * gt, c_u), a).sum()
            if private:
                _add_noise(sums, unit_x, noise["v_anchor"] * c_x)
                s_sum = s_sum + unit_s[0] * noise["s_anchor"]
                if constrained:
                    u_sum = u_sum + unit_s[1] * noise["u_anchor"] * c_u
            v = [t_.div_(n_anchor_exp) for t_ in comm.sum_(sums)]
            comm.sum_([s_sum, u_sum])
            s = s_sum / n_anchor_exp
            u = u_sum / n_anchor_exp
            clip_t = torch.zeros((), dtype=torch.float64, device=device)
        else:
            prev_out_t = backend.forward_at(batch, prev)
            prev_lt = problem.capped_losses(prev_out_t, tgt)
            gt_prev = torch.exp((prev_lt - B) / lam_prev)
            clip_t = (cfg.diff_clip * step_w).clamp(_TINY, 2.0 * max(c_x, c_u))
            clip_x = clip_t.clamp(max=2.0 * c_x)
            sums = problem.diff_sum(idx, batch, prev, out_t, prev_out_t, tgt, gt, gt_prev,
                                    clip_x.to(problem.dtype), c_x)
            # STORM estimate of mean gt (SPIDER when beta = 0): each record adds
            # beta gt + (1 - beta) clip(gt - gt_prev, clip_s), at most
            # beta + (1 - beta) clip_s in size
            clip_s = (clip_t / lam).clamp(max=1.0)
            s_sens = beta_s + (1.0 - beta_s) * clip_s
            s_sum = weigh(beta_s * gt + (1.0 - beta_s) * _clip_scalar(gt - gt_prev, clip_s),
                          a).sum()
            if private:
                _add_noise(sums, unit_x, (noise["v_diff"] * clip_x).to(problem.dtype))
                s_sum = s_sum + unit_s[0] * noise["s_diff"] * s_sens
            for acc, d in zip(v, comm.sum_(sums)):
                acc.add_(d, alpha=1.0 / n_diff_exp)
            comm.sum_([s_sum])
            s = s_sum / n_diff_exp + (1.0 - beta_s) * s
            if constrained:
                clip_u = clip_t.clamp(max=2.0 * c_u)
                du = weigh(_clip_scalar(_clip_scalar((B - lt) * gt, c_u)
                                        - _clip_scalar((B - prev_lt) * gt_prev, c_u), clip_u),
                           a).sum()
                if private:
                    du = du + unit_s[1] * noise["u_diff"] * clip_u
                comm.sum_([du])
                u = u + du / n_diff_exp
        # s >= exp(-B / lam) for the true mean: clamping is post-processing
        s = torch.maximum(s, torch.exp(-B / lam))
        direction = [vv / s.to(vv.dtype) for vv in v]
        d_norm = _norm(direction)
        beta = torch.clamp(cfg.learning_rate * torch.ones_like(d_norm),
                           max=cfg.step_norm_cap / d_norm.clamp_min(_TINY))
        for p, q_, dd in zip(params, prev, direction):
            q_.copy_(p)
            p.sub_(dd * beta.to(p.dtype))
        lam_prev = lam
        if constrained:
            z_lam = u / (lam * s) + torch.log(s) + rho
            lam = (lam - cfg.dual_learning_rate * z_lam).clamp(cfg.lam_min, lam_max)
        step_w = torch.sqrt((beta * d_norm).square() + (lam - lam_prev).square())
        history.record(t, lam=lam, grad_norm=d_norm, s=s, step_size=beta, diff_clip=clip_t)
        averager.update(t, lam)
        _progress("DP Recursive-SPIDER", t, cfg.n_steps, start, cfg.verbose)
    lam = averager.finalize(lam)
    return float(lam), history.finish()


@torch.inference_mode()
def train_dual_sgd(backend, loss, targets, config, generator, lam_init):
    """DP-SGD on the finite-sum dual in ``(x, eta)`` (and ``lam`` when
    constrained): one Poisson batch per step at ``diff_rate``.

    Returns
    -------
    eta, lam : float
    history : dict of str to ndarray
        ``eta``, ``lam``, ``grad_norm`` (noisy x gradient), ``dual_grad``.
    """
    cfg, n = config, _n_sampled(targets, config)
    problem = _Problem(backend, loss, targets, cfg)
    params = backend.parameters
    device = params[0].device
    noise = cfg.noise or {}
    private = cfg.noise is not None
    comm = current_communicator()
    units = _Noise(params, generator, private, root=comm.is_root)
    B, rho, div = cfg.loss_bound, cfg.rho, cfg.divergence
    constrained = cfg.formulation == "constrained"
    c_x, c_d = cfg.max_grad_norm, cfg.dual_grad_norm
    W = cfg.weight_bound
    expected = cfg.diff_rate * n
    opt = make_optimizer("sgd", params, cfg.learning_rate, cfg.momentum)
    eta = torch.tensor(0.0, dtype=torch.float64, device=device)
    lam = torch.tensor(float(lam_init), dtype=torch.float64, device=device)
    lam_max = B / rho + cfg.lam_min if rho > 0 else math.inf
    history = _History(cfg.n_steps, device, ("eta", "lam", "grad_norm", "dual_grad"))
    averager = _Averager(params, cfg.n_steps, cfg.iterate == "average")
    sampler, _ = make_sampler(n, cfg.diff_rate, generator, cfg.units)
    sampler = comm.shard(sampler)
    start = time.perf_counter()
    for t, idx in enumerate(backend.feed(sampler.batches(cfg.n_steps))):
        batch, out_t, tgt = problem.batch(idx)
        lt = problem.capped_losses(out_t, tgt)
        r = (lt - eta) / lam
        w = div.weight(r)
        sums = problem.grad_sum(idx, batch, out_t, tgt, w, c_x)
        a = problem.record_weights(idx)
        d_eta = 1.0 - w
        if constrained:
            d_lam = div.conjugate(r) - r * w  # + rho, public, added after
            norms = torch.sqrt(d_eta.square() + d_lam.square())
            factors = weigh(clip_factors(norms.square(), c_d).double(), a)
            g_eta, g_lam = (d_eta * factors).sum(), (d_lam * factors).sum()
        else:
            g_eta, g_lam = weigh(_clip_scalar(d_eta, c_d), a).sum(), torch.zeros_like(eta)
        if private:
            unit_x, unit_s = units.draw()
            _add_noise(sums, unit_x, noise["x_grad"] * W * c_x)
            g_eta = g_eta + unit_s[0] * noise["dual_grad"] * c_d
            g_lam = g_lam + unit_s[1] * noise["dual_grad"] * c_d
        comm.sum_(sums)
        comm.sum_([g_eta, g_lam])
        grad_norm = _norm(sums) / expected
        opt.apply(sums, 1.0 / expected)
        eta = (eta - cfg.dual_learning_rate * g_eta / expected).clamp(0.0, B)
        if constrained:
            lam = (lam - cfg.dual_learning_rate * (g_lam / expected + rho)).clamp(cfg.lam_min, lam_max)
        history.record(t, eta=eta, lam=lam, grad_norm=grad_norm, dual_grad=g_eta / expected)
        averager.update(t, eta)
        _progress("DP-SGD (DRO dual)", t, cfg.n_steps, start, cfg.verbose)
    eta = averager.finalize(eta)
    return float(eta), float(lam), history.finish()


def release_names(algorithm, formulation):
    """Names of the releases of each batch: ``(anchor_names, diff_names)``;
    DP-SGD has one batch (``((), names)``)."""
    if algorithm == "double_spider":
        return ("eta_anchor", "x_anchor"), ("eta_diff", "x_diff")
    if algorithm == "recursive_spider":
        if formulation == "constrained":
            return ("v_anchor", "u_anchor", "s_anchor"), ("v_diff", "u_diff", "s_diff")
        return ("v_anchor", "s_anchor"), ("v_diff", "s_diff")
    return (), ("x_grad", "dual_grad")
