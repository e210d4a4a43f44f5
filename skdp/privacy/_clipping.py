"""Per-sample gradients clipped to a norm bound, summed over a batch.

Two paths give the same result on a linear model:

* :func:`clipped_linear_sum` for linear and softmax models: the per-sample
  gradient of a loss of the logits ``h = theta @ x_aug`` is the outer product
  ``e ⊗ x_aug`` of the output gradient ``e = dloss/dh`` with the (bias-
  augmented) input, so its norm is ``|e| |x_aug|`` and the clipped sum is one
  matrix product; per-sample gradients are never formed. Output gradients are
  passed class-major, shape (n_outputs, batch): with few classes, reductions
  over the class axis are an order of magnitude faster in that layout.
* :func:`clipped_module_sum` for any ``torch.nn.Module``: per-sample gradients
  from ``torch.func.vmap(grad(...))``.

Both clip the *whole* per-sample gradient (all parameters together) to
``max_norm``, so one record moves the sum by at most ``max_norm``.

Sample weights multiply a record's contribution *after* it is clipped
(:func:`weighted_clipped_module_sum`; the closed form and the backends in
:mod:`skdp.models` do the same, see :mod:`skdp.privacy._weights`).
"""

import torch
from torch.func import functional_call, grad, vmap

_TINY = 1e-12


def clip_factors(squared_norms, max_norm):
    """Scale factors ``min(1, max_norm / norm)`` for per-sample gradients.

    A non-finite norm gets factor 0 (the caller must also zero that sample's
    gradient, since 0 * inf is NaN).
    """
    factors = squared_norms.clamp_min(_TINY).rsqrt_().mul_(max_norm).clamp_(max=1.0)
    return factors.nan_to_num_(nan=0.0)


def clipped_linear_sum(inputs, output_grads, max_norm, *, input_sq_norms=None):
    """Clipped sum of the per-sample gradients of a linear model.

    Parameters
    ----------
    inputs : torch.Tensor of shape (batch, n_inputs)
        Batch rows, with a trailing column of ones when the model has a bias.
    output_grads : torch.Tensor of shape (n_outputs, batch)
        Per-sample gradients of the loss with respect to the model outputs,
        one column per sample (class-major).
    max_norm : float
        Clipping bound C on the l2 norm of each per-sample gradient.
    input_sq_norms : torch.Tensor of shape (batch,), optional
        Precomputed squared norms of the rows of ``inputs``.

    Returns
    -------
    grad_sum : torch.Tensor of shape (n_outputs, n_inputs)
        ``sum_i min(1, C / |g_i|) g_i`` with ``g_i = output_grads[:, i] ⊗ inputs[i]``.
    squared_norms : torch.Tensor of shape (batch,)
        Squared norms of the unclipped per-sample gradients.

    Notes
    -----
    Inputs must be finite (the estimators check X in the training
    precision). A sample whose output gradient is not finite, or whose
    gradient norm overflows, contributes nothing: a NaN in the sum could
    not be hidden by any noise.

    Examples
    --------
    >>> import torch
    >>> from skdp.privacy import clipped_linear_sum
    >>> x = torch.tensor([[3.0, 4.0], [0.3, 0.4]])
    >>> e = torch.tensor([[1.0, 1.0]])
    >>> total, sq = clipped_linear_sum(x, e, max_norm=1.0)
    >>> total  # first row clipped from norm 5 to 1, second kept (norm 0.5)
    tensor([[0.9000, 1.2000]])
    """
    if input_sq_norms is None:
        input_sq_norms = inputs.square().sum(1)
    # a product, not square(): torch's pow kernel is several times slower here
    squared_norms = (output_grads * output_grads).sum(0) * input_sq_norms
    factors = clip_factors(squared_norms, max_norm)
    # a record whose output gradient is not finite (overflowing logits) gets
    # factor 0, and its NaN * 0 must not reach the sum
    scaled = (output_grads * factors).nan_to_num_(nan=0.0, posinf=0.0, neginf=0.0)
    return scaled @ inputs, squared_norms


def clipped_module_sum(module, sample_loss, inputs, *targets, max_norm):
    """Clipped sum of per-sample gradients of any module, via ``torch.func``.

    Parameters
    ----------
    module : torch.nn.Module
    sample_loss : callable
        ``sample_loss(outputs, *targets)`` returns per-sample losses of shape
        (batch,) for a batch of outputs; it must treat rows independently.
    inputs : torch.Tensor of shape (batch, ...)
    *targets : torch.Tensor
        Per-sample tensors aligned with ``inputs`` (labels, weights...).
    max_norm : float

    Returns
    -------
    grad_sums : dict of str to torch.Tensor
        Clipped gradient sum per named parameter.
    squared_norms : torch.Tensor of shape (batch,)

    Examples
    --------
    >>> import torch
    >>> from skdp.privacy import clipped_module_sum
    >>> model = torch.nn.Linear(2, 1, bias=False)
    >>> with torch.no_grad():
    ...     _ = model.weight.copy_(torch.tensor([[0.0, 0.0]]))
    >>> x = torch.tensor([[3.0, 4.0], [0.3, 0.4]])
    >>> loss = lambda out: out[:, 0]   # gradient of each sample is its row
    >>> sums, sq = clipped_module_sum(model, loss, x, max_norm=1.0)
    >>> sums["weight"]
    tensor([[0.9000, 1.2000]])
    """
    params = {name: p.detach() for name, p in module.named_parameters()}
    buffers = {name: b.detach() for name, b in module.named_buffers()}

    def one_sample_loss(params, x, *ts):
        out = functional_call(module, (params, buffers), (x.unsqueeze(0),))
        return sample_loss(out, *(t.unsqueeze(0) for t in ts)).sum()

    batch = inputs.shape[0]
    if batch == 0:  # an empty Poisson batch contributes nothing
        zeros = {name: torch.zeros_like(p) for name, p in params.items()}
        return zeros, inputs.new_zeros(0)
    in_dims = (None, 0) + (0,) * len(targets)
    per_sample = vmap(grad(one_sample_loss), in_dims=in_dims)(params, inputs, *targets)
    squared_norms = sum(g.flatten(1).square().sum(1) for g in per_sample.values())
    finite = torch.isfinite(squared_norms)
    factors = clip_factors(squared_norms, max_norm)
    grad_sums = {}
    for name, g in per_sample.items():
        # a sample with a non-finite gradient is dropped: its values are
        # zeroed (factor 0 alone would give 0 * inf = NaN)
        keep = finite.view(-1, *([1] * (g.dim() - 1)))
        grad_sums[name] = torch.tensordot(factors, torch.where(keep, g, 0.0), dims=1)
    return grad_sums, squared_norms


def clipped_linear_diff_sum(inputs, output_grads, previous_output_grads, max_norm, *,
                            inner_norm=None, input_sq_norms=None, weights=None,
                            previous_weights=None):
    """Clipped sum of per-sample gradient *differences* of a linear model.

    The difference estimator of SPIDER/SARAH tracks a gradient from step to
    step with ``sum_i d_i``, ``d_i = g_i(theta_t) - g_i(theta_{t-1})``
    computed on the same batch at both points. Clipping each ``d_i`` to
    ``max_norm`` bounds one record's effect on the sum by ``max_norm`` (under
    add/remove-one neighbours), whatever the gradients themselves are; with
    ``inner_norm``, each gradient is first clipped to ``inner_norm`` so that
    the differences track the clipped gradients an anchor releases.

    As in :func:`clipped_linear_sum`, ``g_i = e_i ⊗ x_i``, so
    ``d_i = (a_i e_i - b_i e'_i) ⊗ x_i`` (``a_i, b_i`` the inner clipping
    factors) and its norm is ``|a_i e_i - b_i e'_i| |x_i|``: per-sample
    gradients are never formed.

    Parameters
    ----------
    inputs : torch.Tensor of shape (batch, n_inputs)
        Batch rows, with a trailing column of ones when the model has a bias.
    output_grads : torch.Tensor of shape (n_outputs, batch)
        Per-sample output gradients at the current parameters (class-major).
    previous_output_grads : torch.Tensor of shape (n_outputs, batch)
        Per-sample output gradients at the previous parameters.
    max_norm : float
        Clipping bound on the l2 norm of each per-sample difference.
    inner_norm : float or None, default=None
        Clipping bound applied to each per-sample gradient before the
        difference; None leaves the gradients unclipped.
    input_sq_norms : torch.Tensor of shape (batch,), optional
    weights, previous_weights : torch.Tensor of shape (batch,), optional
        Per-sample weights applied *after* the inner clipping (clip, then
        weight): ``d_i = w_i clip(g_i, C_in) - w'_i clip(g'_i, C_in)``, so a
        record with a large gradient keeps its weight. The inner clipping
        uses the norms of the unweighted gradients.

    Returns
    -------
    diff_sum : torch.Tensor of shape (n_outputs, n_inputs)
        ``sum_i min(1, C / |d_i|) d_i``.
    squared_norms : torch.Tensor of shape (batch,)
        Squared norms of the unclipped differences.

    Examples
    --------
    >>> import torch
    >>> from skdp.privacy._clipping import clipped_linear_diff_sum
    >>> x = torch.tensor([[3.0, 4.0], [0.3, 0.4]])
    >>> new, old = torch.tensor([[1.0, 1.0]]), torch.tensor([[0.0, 0.0]])
    >>> total, sq = clipped_linear_diff_sum(x, new, old, max_norm=1.0)
    >>> total  # the first difference (norm 5) is clipped to 1
    tensor([[0.9000, 1.2000]])
    """
    if input_sq_norms is None:
        input_sq_norms = inputs.square().sum(1)
    if inner_norm is not None:
        new_sq = (output_grads * output_grads).sum(0) * input_sq_norms
        old_sq = (previous_output_grads * previous_output_grads).sum(0) * input_sq_norms
        output_grads = output_grads * clip_factors(new_sq, inner_norm)
        previous_output_grads = previous_output_grads * clip_factors(old_sq, inner_norm)
    if weights is not None:
        output_grads = output_grads * weights.to(output_grads.dtype)
    if previous_weights is not None:
        previous_output_grads = previous_output_grads * previous_weights.to(output_grads.dtype)
    diff = output_grads - previous_output_grads
    squared_norms = (diff * diff).sum(0) * input_sq_norms
    factors = clip_factors(squared_norms, max_norm)
    scaled = (diff * factors).nan_to_num_(nan=0.0, posinf=0.0, neginf=0.0)
    return scaled @ inputs, squared_norms


def clipped_module_diff_sum(module, sample_loss, inputs, targets, previous_params,
                            previous_targets=None, *, max_norm, inner_norm=None, weights=None,
                            previous_weights=None):
    """Clipped sum of per-sample gradient differences of any module.

    The module's current parameters and ``previous_params`` are evaluated on
    the same ``inputs`` (per-sample gradients from ``torch.func``); each
    record's difference of whole gradients (all parameters together) is
    clipped to ``max_norm``, after clipping each gradient to ``inner_norm``
    when given. See :func:`clipped_linear_diff_sum`.

    Parameters
    ----------
    module : torch.nn.Module
    sample_loss : callable
        ``sample_loss(outputs, *targets)`` returning per-sample losses.
    inputs : torch.Tensor of shape (batch, ...)
    targets : sequence of torch.Tensor
        Per-sample tensors at the current point (labels, weights...).
    previous_params : dict of str to torch.Tensor
        The parameters at the previous point, by name.
    previous_targets : sequence of torch.Tensor or None, default=None
        Per-sample tensors at the previous point (default: ``targets``).
    max_norm : float
    inner_norm : float or None, default=None
    weights, previous_weights : torch.Tensor of shape (batch,), optional
        Per-sample weights applied after the inner clipping (see
        :func:`clipped_linear_diff_sum`).

    Returns
    -------
    diff_sums : dict of str to torch.Tensor
    squared_norms : torch.Tensor of shape (batch,)
        Squared norms of the unclipped differences.

    Examples
    --------
    >>> import torch
    >>> from skdp.privacy._clipping import clipped_module_diff_sum
    >>> model = torch.nn.Linear(2, 1, bias=False)
    >>> with torch.no_grad():
    ...     _ = model.weight.copy_(torch.tensor([[1.0, 0.0]]))
    >>> x = torch.tensor([[3.0, 4.0], [0.3, 0.4]])
    >>> loss = lambda out: 0.5 * out[:, 0] ** 2   # gradient (w . x) x
    >>> before = {"weight": torch.zeros(1, 2)}     # gradient 0 there
    >>> sums, sq = clipped_module_diff_sum(model, loss, x, (), before, max_norm=1.0)
    >>> sums["weight"]  # 3 * (3, 4) clipped to norm 1, plus 0.3 * (0.3, 0.4)
    tensor([[0.6900, 0.9200]])
    """
    targets = tuple(targets)
    previous_targets = targets if previous_targets is None else tuple(previous_targets)
    params = {name: p.detach() for name, p in module.named_parameters()}
    previous = {name: previous_params[name].detach() for name in params}
    buffers = {name: b.detach() for name, b in module.named_buffers()}

    def one_sample_loss(params, x, *ts):
        out = functional_call(module, (params, buffers), (x.unsqueeze(0),))
        return sample_loss(out, *(t.unsqueeze(0) for t in ts)).sum()

    if inputs.shape[0] == 0:
        return {name: torch.zeros_like(p) for name, p in params.items()}, inputs.new_zeros(0)
    per_sample = vmap(grad(one_sample_loss), in_dims=(None, 0) + (0,) * len(targets))
    new = per_sample(params, inputs, *targets)
    old = per_sample(previous, inputs, *previous_targets)

    def flat_norms(grads):
        return sum(g.flatten(1).square().sum(1) for g in grads.values())

    def scaled(grads, factors):
        return {
            name: g * factors.view(-1, *([1] * (g.dim() - 1))) for name, g in grads.items()
        }

    if inner_norm is not None:
        new = scaled(new, clip_factors(flat_norms(new), inner_norm))
        old = scaled(old, clip_factors(flat_norms(old), inner_norm))
    if weights is not None:
        new = scaled(new, weights.to(inputs.dtype))
    if previous_weights is not None:
        old = scaled(old, previous_weights.to(inputs.dtype))
    diff = {name: new[name] - old[name] for name in params}
    squared_norms = flat_norms(diff)
    finite = torch.isfinite(squared_norms)
    factors = clip_factors(squared_norms, max_norm)
    sums = {}
    for name, d in diff.items():
        keep = finite.view(-1, *([1] * (d.dim() - 1)))
        sums[name] = torch.tensordot(factors, torch.where(keep, d, 0.0), dims=1)
    return sums, squared_norms


def weighted_clipped_module_sum(module, sample_loss, inputs, targets, weights, *, max_norm):
    """``sum_i w_i clip(g_i, max_norm)`` for any module (clip, then weight).

    Each record's whole per-sample gradient of ``sample_loss`` (unweighted)
    is clipped to ``max_norm`` and then multiplied by its weight, so the sum
    keeps the weighted direction of records whose gradients are large; one
    record moves it by at most ``max(w) * max_norm``.

    Parameters
    ----------
    module : torch.nn.Module
    sample_loss : callable
        ``sample_loss(outputs, *targets)`` returning per-sample losses.
    inputs : torch.Tensor of shape (batch, ...)
    targets : sequence of torch.Tensor
    weights : torch.Tensor of shape (batch,)
    max_norm : float

    Returns
    -------
    grad_sums : dict of str to torch.Tensor
    squared_norms : torch.Tensor of shape (batch,)
        Squared norms of the unclipped, unweighted per-sample gradients.

    Examples
    --------
    >>> import torch
    >>> from skdp.privacy._clipping import weighted_clipped_module_sum
    >>> model = torch.nn.Linear(2, 1, bias=False)
    >>> x = torch.tensor([[3.0, 4.0], [0.3, 0.4]])
    >>> loss = lambda out: out[:, 0]
    >>> sums, _ = weighted_clipped_module_sum(model, loss, x, (), torch.tensor([2.0, 1.0]),
    ...                                       max_norm=1.0)
    >>> sums["weight"]  # 2 * (0.6, 0.8) + (0.3, 0.4)
    tensor([[1.5000, 2.0000]])
    """
    targets = tuple(targets)
    params = {name: p.detach() for name, p in module.named_parameters()}
    buffers = {name: b.detach() for name, b in module.named_buffers()}

    def one_sample_loss(params, x, *ts):
        out = functional_call(module, (params, buffers), (x.unsqueeze(0),))
        return sample_loss(out, *(t.unsqueeze(0) for t in ts)).sum()

    if inputs.shape[0] == 0:
        return {name: torch.zeros_like(p) for name, p in params.items()}, inputs.new_zeros(0)
    per_sample = vmap(grad(one_sample_loss), in_dims=(None, 0) + (0,) * len(targets))(
        params, inputs, *targets)
    squared_norms = sum(g.flatten(1).square().sum(1) for g in per_sample.values())
    finite = torch.isfinite(squared_norms)
    factors = clip_factors(squared_norms, max_norm) * weights.to(inputs.dtype)
    sums = {}
    for name, g in per_sample.items():
        keep = finite.view(-1, *([1] * (g.dim() - 1)))
        sums[name] = torch.tensordot(factors, torch.where(keep, g, 0.0), dims=1)
    return sums, squared_norms
