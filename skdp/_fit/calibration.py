"""Private probability calibration of a binary classifier's scores.

A model trained under DP noise ranks the records well but often puts its
scores on the wrong scale: noisy, clipped gradient steps leave it over- or
under-confident, and the shift of the intercept is the part the noise hits
hardest. Platt scaling maps each score ``s`` to ``scale * s + shift`` with
the two numbers chosen to minimise the log-loss on the training records.

Privately, the records enter through one Gaussian release: the counts of
(score bin, true class) over fixed, public bins of the clipped score. A
record adds one to one count, so the l2 sensitivity is 1 under add/remove
neighbours, whatever the model. Everything after the release is
post-processing: adjacent bins are pooled until each holds enough noisy
records to outweigh the noise, and the map is fitted to the pooled counts
by weighted logistic regression on the bins' centres.

A temperature-only map (``shift=0``, ``scale>=0``) keeps the sign of every
score, hence every prediction: the fairness estimators use it, so that the
rates their constraints bound are those of the calibrated model.
"""

import math

import numpy as np
from scipy.optimize import minimize

#: Scores are clipped to [-SCORE_BOUND, SCORE_BOUND] before binning. A
#: noisy model's raw scores can spread far beyond the range of useful
#: probabilities; the map shrinks them back.
SCORE_BOUND = 64.0
#: Number of score bins of the release, equal-width in ``asinh(score)``:
#: about 0.3 wide near 0, where probabilities change fastest, and wider in
#: the tails.
N_BINS = 32
#: Pooled bins hold at least this many noise standard deviations of records.
POOL_STDS = 8.0
#: A bin whose noisy total exceeds this many standard deviations of its
#: noise counts as holding records (it places its pool's centre).
OCCUPIED_STDS = 2.0
#: With fewer pooled bins than this, the map is a constant predictor.
MIN_POOLED_BINS = 3
#: Strength of the shrinkage of the calibrated scores towards a constant,
#: per noise standard deviation per record.
SHRINKAGE = 2.0
#: Largest scale the fit may choose (a scale of 0 is a constant predictor).
MAX_SCALE = 4.0
#: Smallest scale of a temperature-only map: positive, so that the sign of
#: every score, hence every prediction, is kept.
MIN_TEMPERATURE_SCALE = 0.01


def score_bins():
    """The public bin edges and centres of the release."""
    positions = np.linspace(-np.arcsinh(SCORE_BOUND), np.arcsinh(SCORE_BOUND), N_BINS + 1)
    return np.sinh(positions), np.sinh((positions[:-1] + positions[1:]) / 2)


def score_bin_codes(scores):
    """The bin of each score in ``[-SCORE_BOUND, SCORE_BOUND]`` (float64, no
    NaN): ``searchsorted(edges, scores, side="right") - 1``, clipped to
    ``[0, N_BINS - 1]``, without a binary search per score.

    The bins are equal-width in ``asinh``, so ``asinh(s)`` gives each
    score's bin up to the rounding of the edges, at most one bin off next
    to an edge; one comparison with each neighbouring edge then gives
    searchsorted's answer exactly (it is 5 times faster).

    >>> import numpy as np
    >>> from skdp._fit.calibration import score_bin_codes, score_bins
    >>> edges, _ = score_bins()
    >>> scores = np.concatenate([edges, np.nextafter(edges, 0), [0.0, 1.0]])
    >>> expected = np.clip(np.searchsorted(edges, scores, side="right") - 1, 0, 31)
    >>> bool(np.array_equal(score_bin_codes(scores), expected))
    True
    """
    edges, _ = score_bins()
    half_range = np.arcsinh(SCORE_BOUND)
    width = 2.0 * half_range / N_BINS
    # candidate count of edges <= s (searchsorted's answer), in [1, N_BINS + 1]
    guess = np.floor((np.arcsinh(scores) + half_range) / width)
    guess = np.clip(guess, 0, N_BINS).astype(np.int64) + 1
    # edges with a sentinel above every score: padded[j] = edges[j], j <= N_BINS
    padded = np.append(edges, np.inf)
    found = guess - (padded[guess - 1] > scores) + (padded[guess] <= scores)
    return np.clip(found - 1, 0, N_BINS - 1)


def calibration_counts(scores, y_codes, weights=None):
    """Counts of (score bin, class) of a binary problem, shape (N_BINS, 2).

    Parameters
    ----------
    scores : ndarray of shape (n_samples,)
        Scores of the positive class; non-finite scores (an extreme record)
        fall in the outermost bins or, for NaN, the middle one.
    y_codes : ndarray of shape (n_samples,)
        True classes coded 0 and 1.
    weights : ndarray of shape (n_samples,) or None, default=None
        Each record's weight factor in [0, 1] (``sample_weight`` over its
        bound, times its class factor): a record then adds its factor, at
        most 1, so the sensitivity stays 1.

    Returns
    -------
    ndarray of shape (N_BINS, 2), float64

    Examples
    --------
    >>> import numpy as np
    >>> from skdp._fit.calibration import calibration_counts
    >>> counts = calibration_counts(np.array([-100.0, 0.1, np.inf]), np.array([0, 1, 1]))
    >>> counts.sum(), counts[0, 0], counts[-1, 1]
    (np.float64(3.0), np.float64(1.0), np.float64(1.0))
    """
    scores = np.nan_to_num(np.asarray(scores, dtype=np.float64), nan=0.0,
                           posinf=SCORE_BOUND, neginf=-SCORE_BOUND)
    bins = score_bin_codes(np.clip(scores, -SCORE_BOUND, SCORE_BOUND, out=scores))
    cells = bins * 2 + np.asarray(y_codes, dtype=np.int64)
    if weights is not None:
        weights = np.clip(np.asarray(weights, dtype=np.float64), 0.0, 1.0)
    return np.bincount(cells, weights=weights, minlength=2 * N_BINS).astype(
        np.float64).reshape(N_BINS, 2)


def pool_bins(counts, noise_std):
    """Pool adjacent bins of noisy counts until each holds at least
    :data:`POOL_STDS` noise standard deviations of records (post-processing).

    Pools are formed on the raw noisy counts, so the noise of empty bins
    cancels rather than adds up; a pool's centre is the count-weighted mean
    of the centres of its bins that hold clearly more than noise (more than
    :data:`OCCUPIED_STDS` standard deviations of a bin's noisy total), so
    that the noise in the empty tails cannot drag it outwards.

    Returns ``(centres, pooled)``: the centre of each pool and its counts
    per class, clipped at zero.
    """
    _, centres = score_bins()
    counts = np.asarray(counts, dtype=np.float64)
    masses = counts.sum(1)
    occupied = masses > OCCUPIED_STDS * noise_std * np.sqrt(2.0)
    if not occupied.any():
        return np.zeros(0), np.zeros((0, 2))
    threshold = POOL_STDS * noise_std
    pools = []  # (first bin, end bin) of each pool
    first = 0
    for end in range(1, len(masses) + 1):
        # a loop over the public bins, not over records
        if occupied[first:end].any() and masses[first:end].sum() >= max(threshold, 1e-12):
            pools.append([first, end])
            first = end
    if not pools:
        pools.append([0, len(masses)])
    pools[-1][1] = len(masses)  # the remainder joins the last pool
    pooled_centres, pooled_counts = [], []
    for first, end in pools:
        weights = np.where(occupied[first:end], masses[first:end], 0.0)
        if weights.sum() <= 0:  # a remainder of noise only: merge it backwards
            pooled_counts[-1] = pooled_counts[-1] + counts[first:end].sum(0)
            continue
        pooled_centres.append(float(weights @ centres[first:end] / weights.sum()))
        pooled_counts.append(counts[first:end].sum(0))
    return np.asarray(pooled_centres), np.clip(np.asarray(pooled_counts), 0.0, None)


def fit_score_map(counts, noise_std=0.0, temperature_only=False):
    """Fit ``scale`` and ``shift`` of the calibrated score ``scale * s + shift``
    to (noisy) counts of :func:`calibration_counts`.

    Parameters
    ----------
    counts : ndarray of shape (N_BINS, 2)
        Counts of (score bin, class), possibly noisy.
    noise_std : float, default=0.0
        Standard deviation of the noise on each count (0 when exact).
    temperature_only : bool, default=False
        Fit the scale alone (``shift=0``, ``scale >= MIN_TEMPERATURE_SCALE``),
        which keeps every prediction.

    Returns
    -------
    scale, shift : float
        ``1.0, 0.0`` (the identity) when the noisy total of a class is not
        positive; the constant predictor of the noisy class shares (scale
        0, or the smallest temperature) when fewer than
        :data:`MIN_POOLED_BINS` pooled bins rise above the noise.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp._fit.calibration import calibration_counts, fit_score_map
    >>> rng = np.random.default_rng(0)
    >>> true_scores = rng.normal(size=20000)
    >>> y = (rng.random(20000) < 1 / (1 + np.exp(-true_scores))).astype(int)
    >>> scale, shift = fit_score_map(calibration_counts(3 * true_scores - 1, y))
    >>> round(scale, 1), round(shift, 1)
    (0.3, 0.3)
    """
    negative, positive = np.asarray(counts, dtype=np.float64).sum(0)
    if negative <= 0 or positive <= 0:
        return 1.0, 0.0
    centres, pooled = pool_bins(counts, noise_std)
    if len(pooled) < MIN_POOLED_BINS or (pooled.sum(0) == 0).any():
        # too few records above the noise to tell a slope: the model as
        # trained (the noise cannot say that another map is better)
        return 1.0, 0.0
    weights = np.concatenate([pooled[:, 0], pooled[:, 1]])
    scores = np.concatenate([centres, centres])
    labels = np.concatenate([np.zeros(len(centres)), np.ones(len(centres))])
    total = weights.sum()
    weights = weights / total
    spread = np.sum(weights * (scores - np.sum(weights * scores)) ** 2)
    # a Gaussian prior as strong as the noise per record, centred on one of
    # two maps: the identity (the model as trained) or the constant
    # predictor of the class shares. The counts choose the centre whose
    # fitted map explains them better, so that a noisy map leaves a good
    # model as trained and a model worse than a constant is flattened
    strength = SHRINKAGE * noise_std * math.sqrt(len(pooled)) / total
    fits = [_fit_around(centre, scores, labels, weights, spread, strength, temperature_only)
            for centre in ((1.0, 0.0), (0.0, 0.0 if temperature_only
                                        else float(np.log(positive / negative))))]
    (scale, shift), _ = min(fits, key=lambda fit: fit[1])
    return scale, shift


def _fit_around(centre, scores, labels, weights, spread, strength, temperature_only):
    """``((scale, shift), objective)``: the map minimising the weighted
    log-loss of the pooled bins plus a Gaussian penalty of ``strength``
    around ``centre`` (the scale's in units of the scores' ``spread``)."""
    scale0, shift0 = centre

    def loss(params):
        scale, shift = params[0], (0.0 if temperature_only else params[1])
        z = scale * scores + shift
        p = 0.5 * (1.0 + np.tanh(z / 2))  # the logistic function, stable
        value = (np.sum(weights * (np.logaddexp(0.0, z) - labels * z))
                 + 0.5 * strength * (spread * (scale - scale0) ** 2 + (shift - shift0) ** 2))
        residual = weights * (p - labels)
        grad = np.array([np.sum(residual * scores) + strength * spread * (scale - scale0),
                         np.sum(residual) + strength * (shift - shift0)])
        return value, grad[:1] if temperature_only else grad

    start = np.array([1.0] if temperature_only else [1.0, 0.0])
    if temperature_only:
        bounds = [(MIN_TEMPERATURE_SCALE, MAX_SCALE)]
    else:
        bounds = [(0.0, MAX_SCALE), (-20.0, 20.0)]
    result = minimize(loss, start, jac=True, method="L-BFGS-B", bounds=bounds)
    scale = float(result.x[0])
    shift = 0.0 if temperature_only else float(result.x[1])
    return (scale, shift), float(result.fun)
