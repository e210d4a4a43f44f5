"""ERMI: the exponential Renyi mutual information (chi-squared divergence)
regularizer of FERMI, and its min-max form (specs/fair_fl.md §1.3-1.4).

Pure tensor functions, no training loop and no privacy accounting.

Notation. ``l`` classes, ``k`` groups, ``M`` *strata*: the conditioning sets
of the fairness notion. Demographic parity has one stratum (every record);
equalized odds one per class (records of label ``y``); equal opportunity one
(records of label ``classes_[1]``). A record in no stratum (a negative under
equal opportunity) carries no fairness term. ``F(x)`` are the model's class
probabilities, ``pi[m, r]`` the prior of group ``r`` in stratum ``m`` and
``W`` a dual tensor of shape (M, k, l).

The per-record term (scalar form of the paper's trace form) is::

    psi(x, s, m; W) = sum_u F_u(x) * (2 W[m, s, u] / sqrt(pi[m, s]) - ||W[m, :, u]||^2) - 1

Its average over the data is concave in ``W`` and its maximum, reached at
``W*[m, r, u] = p(u, r | m) / (sqrt(pi[m, r]) p(u | m))``, is the ERMI
``sum_m p(m) * chi2_m`` with ``chi2_m = sum_{u, r} p(u, r | m)^2 / (p(u | m)
pi[m, r]) - 1`` (soft predictions: ``p(u, r | m)`` is the mean of ``F_u`` over
the records of stratum ``m`` and group ``r``). Because ``psi`` is an average
over records, minibatch gradients of the min-max objective are unbiased.

Records are indexed by *cells*: ``cell = m * k + s`` for a record of stratum
``m`` and group ``s``, and the spare cell ``M * k`` for records in no
stratum. Tables of shape (M * k + 1, l) are looked up by cell; their spare
row is zero.
"""

import math

import numpy as np
import torch

FAIRNESS_NOTIONS = ("demographic_parity", "equalized_odds", "equal_opportunity")


def fairness_strata(fairness, y_codes, n_classes):
    """Stratum of each record for a fairness notion.

    Parameters
    ----------
    fairness : {"demographic_parity", "equalized_odds", "equal_opportunity"}
    y_codes : ndarray or tensor of shape (n_samples,)
        Label codes in ``0 .. n_classes - 1``.
    n_classes : int

    Returns
    -------
    strata : same type as ``y_codes``, int64
        Stratum of each record; -1 for records in none (negatives under
        equal opportunity, which conditions on label code 1).
    n_strata : int

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.fairness.fermi._ermi import fairness_strata
    >>> fairness_strata("equalized_odds", np.array([0, 2, 1]), 3)
    (array([0, 2, 1]), 3)
    >>> fairness_strata("equal_opportunity", np.array([0, 1, 1]), 2)
    (array([-1,  0,  0]), 1)
    """
    if fairness not in FAIRNESS_NOTIONS:
        raise ValueError(f"fairness must be one of {FAIRNESS_NOTIONS}, got {fairness!r}.")
    is_tensor = isinstance(y_codes, torch.Tensor)
    lib = torch if is_tensor else np
    if fairness == "demographic_parity":
        return lib.zeros_like(y_codes), 1
    if fairness == "equalized_odds":
        return y_codes + 0, int(n_classes)
    return lib.where(y_codes == 1, 0, -1), 1


def record_cells(groups, strata, n_groups, n_strata):
    """Cell index ``m * k + s`` of each record; ``M * k`` outside every stratum.

    Examples
    --------
    >>> import torch
    >>> from skdp.fairness.fermi._ermi import record_cells
    >>> record_cells(torch.tensor([0, 1, 1]), torch.tensor([0, 1, -1]), 2, 2)
    tensor([0, 3, 4])
    """
    spare = n_strata * n_groups
    is_tensor = isinstance(groups, torch.Tensor)
    lib = torch if is_tensor else np
    return lib.where(strata >= 0, strata * n_groups + groups, spare)




def ermi_coefficients(W, inv_sqrt):
    """Per-cell coefficients ``c`` of the linear form ``psi + 1 = <F, c>``.

    ``c[m, r, u] = 2 W[m, r, u] / sqrt(pi[m, r]) - ||W[m, :, u]||^2``, as a
    table of shape (M * k + 1, l) whose last (spare) row is zero.

    Parameters
    ----------
    W : tensor of shape (M, k, l)
    inv_sqrt : tensor of shape (M, k)
        ``1 / sqrt(pi)``.

    Returns
    -------
    tensor of shape (M * k + 1, l)
    """
    n_strata, n_groups, n_classes = W.shape
    col_sq = (W * W).sum(1, keepdim=True)  # (M, 1, l)
    table = 2.0 * W * inv_sqrt.unsqueeze(-1) - col_sq
    spare = W.new_zeros((1, n_classes))
    return torch.cat([table.reshape(n_strata * n_groups, n_classes), spare])


def w_gradient_sq_table(W, inv_sqrt):
    """``||e_r / sqrt(pi[m, r]) - W[m, :, u]||^2`` per cell and class.

    The squared norm of one record's W-gradient is
    ``4 * sum_u F_u^2 * table[cell, u]``. Shape (M * k + 1, l), spare row 0.
    """
    n_strata, n_groups, n_classes = W.shape
    col_sq = (W * W).sum(1, keepdim=True)
    table = inv_sqrt.square().unsqueeze(-1) - 2.0 * inv_sqrt.unsqueeze(-1) * W + col_sq
    spare = W.new_zeros((1, n_classes))
    return torch.cat([table.reshape(n_strata * n_groups, n_classes), spare]).clamp_min_(0.0)


def psi_values(probs, cells, coefficients):
    """Per-record ``psi`` (0 for records in no stratum).

    Parameters
    ----------
    probs : tensor of shape (n, l)
        Class probabilities ``F(x)``, batch-major.
    cells : long tensor of shape (n,)
    coefficients : tensor of shape (M * k + 1, l)
        From :func:`ermi_coefficients`.

    Returns
    -------
    tensor of shape (n,)
    """
    spare = coefficients.shape[0] - 1
    inside = (cells < spare).to(probs.dtype)
    return (probs * coefficients.index_select(0, cells)).sum(1) - inside


def psi_output_grad(probs_t, coef_t):
    """Gradient of ``psi`` with respect to softmax logits, class-major.

    With ``F = softmax(h)`` and ``psi + 1 = <F, c>``:
    ``d psi / d h_v = F_v (c_v - <F, c>)``.

    Parameters
    ----------
    probs_t : tensor of shape (l, n)
    coef_t : tensor of shape (l, n)
        Each record's coefficient column (its cell's row of the table).

    Returns
    -------
    tensor of shape (l, n)
    """
    return probs_t * (coef_t - (probs_t * coef_t).sum(0, keepdim=True))


def w_gradient_from_sums(cell_sums, W, inv_sqrt):
    """Sum of per-record W-gradients from per-cell sums of ``F``.

    One record of cell ``(m, s)`` has gradient
    ``G[m, r, u] = 2 F_u (1{r = s} / sqrt(pi[m, s]) - W[m, r, u])``, so a sum
    of (weighted) records with per-cell sums ``S[m, r, u] = sum F_u`` is
    ``2 S / sqrt(pi) - 2 W * sum_r S``.

    Parameters
    ----------
    cell_sums : tensor of shape (..., M, k, l)
    W : tensor of shape (M, k, l)
    inv_sqrt : tensor of shape (M, k)

    Returns
    -------
    tensor of shape (..., M, k, l)
    """
    per_class = cell_sums.sum(-2, keepdim=True)
    return 2.0 * cell_sums * inv_sqrt.unsqueeze(-1) - 2.0 * W * per_class


def per_record_w_gradients(probs, cells, W, inv_sqrt):
    """Each record's W-gradient, materialized (for tests and small data).

    Returns
    -------
    tensor of shape (n, M, k, l)
    """
    n_strata, n_groups, n_classes = W.shape
    n = probs.shape[0]
    onehot = torch.zeros((n, n_strata * n_groups + 1), dtype=probs.dtype, device=probs.device)
    onehot[torch.arange(n), cells] = 1.0
    sums = onehot[:, :-1].reshape(n, n_strata, n_groups, 1) * probs.reshape(n, 1, 1, n_classes)
    grads = w_gradient_from_sums(sums, W, inv_sqrt)
    inside = (cells < n_strata * n_groups).to(probs.dtype).reshape(n, 1, 1, 1)
    return grads * inside


def w_gradient_bound(priors, radius):
    """Bound on one record's W-gradient norm (add/remove-one records).

    ``||G|| = 2 (sum_u F_u^2 ||e_s / sqrt(pi_s) - W_u||^2)^(1/2)
    <= 2 (1 / sqrt(min pi) + radius)`` when ``sum_u F_u^2 <= 1`` and every
    ``W[m]`` lies in the Frobenius ball of ``radius`` (so every column does).

    Parameters
    ----------
    priors : array-like of shape (M, k)
        Released (or public) group priors.
    radius : float

    Examples
    --------
    >>> from skdp.fairness.fermi._ermi import w_gradient_bound
    >>> round(w_gradient_bound([[0.25, 0.75]], 1.0), 6)
    6.0
    """
    priors = np.asarray(priors, dtype=np.float64)
    return float(2.0 * (1.0 / math.sqrt(priors.min()) + radius))


def w_gradient_clip(priors):
    """Default clipping bound of one record's W-gradient: ``2 / sqrt(min pi)``.

    The norm ``2 (sum_u F_u^2 ||e_s / sqrt(pi_s) - W_u||^2)^(1/2)`` is at
    most ``2 / sqrt(pi_s)`` at ``W = 0`` and, when predictions are nearly
    independent of the group, about ``2 sqrt((1 - pi_s) / pi_s)`` at the
    maximizer ``W*``, and on the segment between them (convexity): records
    rarely reach the bound, which is ``2.4`` times smaller than the worst case
    over the ball of :func:`default_w_radius` (:func:`w_gradient_bound`). It
    depends only on the (released) priors; the records beyond it are clipped,
    so it is the sensitivity of the clipped sum.

    Examples
    --------
    >>> from skdp.fairness.fermi._ermi import w_gradient_clip
    >>> w_gradient_clip([[0.25, 0.75]])
    4.0
    """
    priors = np.asarray(priors, dtype=np.float64)
    return float(2.0 / math.sqrt(priors.min()))


def w_gradient_replace_sensitivity(priors):
    """Sensitivity of one record's W-gradient when only its group changes.

    Replacing ``s`` by ``s'`` (same features and label, so same stratum and
    ``F``) changes the gradient by ``2 F (e_s / sqrt(pi_s) - e_s' /
    sqrt(pi_s'))^T``, of norm ``2 ||F|| sqrt(1/pi_s + 1/pi_s') <= 2 sqrt(1/pi_a
    + 1/pi_b)`` for the two smallest priors ``pi_a, pi_b`` of a stratum
    (specs/fair_fl.md §2.5). With one group nothing can change: 0.

    Examples
    --------
    >>> from skdp.fairness.fermi._ermi import w_gradient_replace_sensitivity
    >>> round(w_gradient_replace_sensitivity([[0.5, 0.5]]), 6)
    4.0
    """
    priors = np.atleast_2d(np.asarray(priors, dtype=np.float64))
    if priors.shape[1] < 2:
        return 0.0
    smallest = np.sort(priors, axis=1)[:, :2]
    return float(2.0 * np.sqrt((1.0 / smallest).sum(1)).max())


def default_w_radius(priors, n_classes):
    """``sqrt(l / min pi)``: a Frobenius ball that holds ``W*`` for every model.

    ``||W*[m]||_F^2 = sum_u sum_r p(r | u, m)^2 / pi[m, r] <= l / min pi``
    (specs/fair_fl.md §1.4), when the priors are the data's frequencies.

    Examples
    --------
    >>> from skdp.fairness.fermi._ermi import default_w_radius
    >>> round(default_w_radius([[0.5, 0.5]], 2), 6)
    2.0
    """
    priors = np.asarray(priors, dtype=np.float64)
    return float(math.sqrt(n_classes / priors.min()))


def project_frobenius(W, radius):
    """Project each stratum's ``W[m]`` onto the Frobenius ball of ``radius``
    (in place; no host synchronisation)."""
    norms = W.flatten(1).norm(dim=1).clamp_min(1e-30)
    scale = (radius / norms).clamp_(max=1.0)
    return W.mul_(scale.view(-1, 1, 1))


def _stratum_tables(probs, groups, strata, n_groups, n_strata):
    """``p(u, r | m)`` (M, k, l), ``p(u | m)`` (M, l), ``p(r | m)`` (M, k) and
    the stratum shares ``p(m)`` (M,) of soft predictions."""
    probs = torch.as_tensor(probs, dtype=torch.float64)
    groups = torch.as_tensor(groups, dtype=torch.long)
    strata = torch.as_tensor(strata, dtype=torch.long)
    n, n_classes = probs.shape
    inside = strata >= 0
    cells = record_cells(groups, strata, n_groups, n_strata)
    sums = torch.zeros((n_strata * n_groups + 1, n_classes), dtype=torch.float64)
    sums.index_add_(0, cells, probs)
    counts = torch.bincount(cells, minlength=n_strata * n_groups + 1).to(torch.float64)
    sums = sums[:-1].reshape(n_strata, n_groups, n_classes)
    counts = counts[:-1].reshape(n_strata, n_groups)
    sizes = counts.sum(1).clamp_min(1.0)
    joint = sums / sizes.view(-1, 1, 1)
    marginal = joint.sum(1)
    group_freq = counts / sizes.view(-1, 1)
    share = counts.sum(1) / max(int(inside.numel()), 1)
    return joint, marginal, group_freq, share


def empirical_priors(groups, strata, n_groups, n_strata):
    """Group frequencies within each stratum, shape (M, k) (non-private)."""
    n = len(groups)
    probs = torch.ones((n, 1), dtype=torch.float64)
    _, _, freq, _ = _stratum_tables(probs, groups, strata, n_groups, n_strata)
    return freq


def optimal_w(probs, groups, strata, n_groups, n_strata, priors=None):
    """The inner maximizer ``W*[m, r, u] = p(u, r | m) / (sqrt(pi[m, r]) p(u | m))``.

    Parameters
    ----------
    probs : array-like of shape (n, l)
    groups, strata : array-like of shape (n,)
    n_groups, n_strata : int
    priors : array-like of shape (M, k) or None
        Defaults to the group frequencies of each stratum.

    Returns
    -------
    tensor of shape (M, k, l), float64
    """
    joint, marginal, freq, _ = _stratum_tables(probs, groups, strata, n_groups, n_strata)
    priors = freq if priors is None else torch.as_tensor(priors, dtype=torch.float64)
    return joint / (priors.sqrt().unsqueeze(-1) * marginal.unsqueeze(1).clamp_min(1e-300))


def ermi(probs, groups, strata, n_groups, n_strata, priors=None):
    """ERMI of soft predictions: ``sum_m p(m) * chi2_m`` (eqs. 5-6).

    ``chi2_m = sum_{u, r} p(u, r | m)^2 / (p(u | m) pi[m, r]) - 1``; with the
    data's own group frequencies as priors (the default) this is the chi-
    squared divergence between the joint law of (prediction, group) and the
    product of its marginals in stratum ``m``. Non-private: a diagnostic.

    Parameters
    ----------
    probs : array-like of shape (n, l)
        Class probabilities.
    groups : array-like of shape (n,)
        Group codes in ``0 .. k - 1``.
    strata : array-like of shape (n,)
        Stratum codes (-1: none), see :func:`fairness_strata`.
    n_groups, n_strata : int
    priors : array-like of shape (M, k) or None

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.fairness.fermi._ermi import ermi
    >>> probs = np.array([[1.0, 0.0], [0.0, 1.0]])   # prediction = group
    >>> round(ermi(probs, [0, 1], [0, 0], 2, 1), 6)
    1.0
    >>> round(ermi(np.full((2, 2), 0.5), [0, 1], [0, 0], 2, 1), 6)
    0.0
    """
    joint, marginal, freq, share = _stratum_tables(probs, groups, strata, n_groups, n_strata)
    priors = freq if priors is None else torch.as_tensor(priors, dtype=torch.float64)
    denom = marginal.unsqueeze(1) * priors.unsqueeze(-1)
    terms = torch.where(denom > 0, joint.square() / denom.clamp_min(1e-300), 0.0)
    chi2 = terms.sum((1, 2)) - 1.0
    chi2 = torch.where(share > 0, chi2, 0.0)
    return float((share * chi2).sum())
