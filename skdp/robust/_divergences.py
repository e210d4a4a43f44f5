"""psi-divergences and their convex conjugates (pure tensor functions).

A psi-divergence ``D_psi(p, 1/n) = (1/n) sum_i psi(n p_i)`` penalises
reweighting the training records away from uniform. Its convex conjugate
``psi*(s) = sup_{a >= 0} s a - psi(a)`` gives the dual of the penalised
distributionally robust problem (Levy et al., 2020):

    min_x max_p  sum_i p_i l_i(x) - lam D_psi(p, 1/n)
  = min_{x, eta}  lam mean_i psi*((l_i(x) - eta) / lam) + eta,

and ``(psi*)'((l_i - eta) / lam) / n`` are the worst-case weights of the
records. Conjugates here are the corrected forms of the DP-DRO spec (sec. 1.4):
the paper's Table 1 prints the chi-square row without its positive part and
the KL-regularised CVaR row as a ``min`` that lies below ``exp`` everywhere.

Every conjugate has ``psi*(0) = 0`` and ``(psi*)'(0) = 1`` (uniform weights
when every loss equals ``eta``), and ``(psi*)'`` is non-decreasing and
non-negative, so the optimal ``eta`` lies between the smallest and the
largest loss.
"""

import math

import torch

__all__ = ["DIVERGENCES", "Divergence", "make_divergence"]

DIVERGENCES = ("chi2", "kl", "kl_cvar", "cressie_read")


class Divergence:
    """A psi-divergence: ``psi``, its conjugate and the conjugate's derivative.

    Parameters
    ----------
    name : {"chi2", "kl", "kl_cvar", "cressie_read"}
        ``"chi2"``: ``psi(t) = (t - 1)^2`` (the paper's Table 1 conjugate,
        corrected with a positive part); ``"kl"``: ``t log t - t + 1``;
        ``"kl_cvar"``: KL restricted to ``t <= 1/alpha`` (KL-regularised
        CVaR); ``"cressie_read"``: ``(t^k - k t + k - 1) / (k (k - 1))``
        (``k = 2`` is half the chi-square).
    alpha : float in (0, 1), default=0.2
        Largest weight ratio of ``"kl_cvar"``.
    k : float > 1, default=2.0
        Exponent of ``"cressie_read"``.
    max_ratio : float >= 1, default=inf
        Cap ``W`` on the weight ratio: the divergence becomes
        ``psi + indicator[0, W]`` (as KL-CVaR is KL capped at ``1/alpha``),
        whose conjugate follows ``psi*`` up to the point ``s_W`` where
        ``(psi*)'(s_W) = W`` and is linear with slope ``W`` beyond, so
        ``(psi*)' = min((psi*)', W)``. A finite cap bounds how much one record
        can weigh, which a private fit needs (its sensitivity is ``W C``).

    Examples
    --------
    >>> import torch
    >>> from skdp.robust import make_divergence
    >>> div = make_divergence("kl_cvar", alpha=0.2)
    >>> float(div.conjugate(torch.tensor(0.0)))
    0.0
    >>> float(div.weight(torch.tensor(5.0)))  # (psi*)' is capped at 1/alpha
    5.0
    """

    def __init__(self, name, *, alpha=0.2, k=2.0, max_ratio=math.inf):
        if name not in DIVERGENCES:
            raise ValueError(f"divergence must be one of {DIVERGENCES}, got {name!r}.")
        if name == "kl_cvar" and not (0.0 < alpha < 1.0):
            raise ValueError(
                f"alpha must be in (0, 1) for divergence='kl_cvar' (the largest weight ratio "
                f"is 1/alpha); got alpha={alpha!r}."
            )
        if name == "cressie_read" and not (k > 1.0 and math.isfinite(k)):
            raise ValueError(
                f"k must be a finite number > 1 for divergence='cressie_read'; got k={k!r} "
                "(k = 2 is half the chi-square divergence; use divergence='kl' for k -> 1)."
            )
        if not max_ratio >= 1.0:
            raise ValueError(f"max_ratio must be >= 1 (1 is uniform weights); got {max_ratio!r}.")
        self.name = name
        self.alpha = float(alpha)
        self.k = float(k)
        self.max_ratio = float(max_ratio)

    def __repr__(self):
        extra = {"kl_cvar": f", alpha={self.alpha}", "cressie_read": f", k={self.k}"}
        cap = f", max_ratio={self.max_ratio:g}" if math.isfinite(self.max_ratio) else ""
        return f"Divergence({self.name!r}{extra.get(self.name, '')}{cap})"

    def _knee(self):
        """``s_W`` with ``(psi*)'(s_W) = W`` (inf when the cap never binds)."""
        W = self.max_ratio
        if self.name == "kl_cvar" and W >= 1.0 / self.alpha:
            return math.inf
        if not math.isfinite(W):
            return math.inf
        if self.name == "chi2":
            return 2.0 * W - 2.0
        if self.name in ("kl", "kl_cvar"):
            return math.log(W)
        k = self.k
        return (W ** (k - 1.0) - 1.0) / (k - 1.0)

    @property
    def uses_exp(self):
        """Whether the conjugate is exponential (overflow must be guarded)."""
        return self.name in ("kl", "kl_cvar")

    @property
    def max_weight(self):
        """Supremum of ``(psi*)'``: the largest worst-case weight ratio."""
        return min(1.0 / self.alpha if self.name == "kl_cvar" else math.inf, self.max_ratio)

    def psi(self, t):
        """``psi(t)``; ``inf`` outside its domain."""
        t = torch.as_tensor(t, dtype=torch.float64)
        inf = torch.full_like(t, math.inf)
        if self.name == "chi2":
            value = (t - 1.0) ** 2
        elif self.name in ("kl", "kl_cvar"):
            value = torch.special.xlogy(t, t) - t + 1.0
            if self.name == "kl_cvar":
                value = torch.where(t <= 1.0 / self.alpha, value, inf)
        else:
            k = self.k
            value = (t.clamp_min(0.0) ** k - k * t + k - 1.0) / (k * (k - 1.0))
        if math.isfinite(self.max_ratio):
            value = torch.where(t <= self.max_ratio, value, inf)
        return torch.where(t >= 0, value, inf)

    def conjugate(self, s):
        """``psi*(s) = sup_{a >= 0} s a - psi(a)``."""
        knee = self._knee()
        if math.isfinite(knee):
            s = torch.as_tensor(s)
            inside = self._conjugate(s.clamp_max(knee))
            at_knee = self._conjugate(torch.as_tensor(knee, dtype=s.dtype))
            return torch.where(s <= knee, inside, at_knee + self.max_ratio * (s - knee))
        return self._conjugate(s)

    def weight(self, s):
        """``(psi*)'(s)``: the worst-case weight ratio of a record at ``s``."""
        knee = self._knee()
        if math.isfinite(knee):
            return self._weight(torch.as_tensor(s).clamp_max(knee))
        return self._weight(s)

    def _conjugate(self, s):
        if self.name == "chi2":
            return (s + 2.0).clamp_min(0.0).square() / 4.0 - 1.0
        if self.name == "kl":
            return torch.expm1(s)
        if self.name == "kl_cvar":
            knee = -math.log(self.alpha)
            linear = (1.0 + s + math.log(self.alpha)) / self.alpha - 1.0
            return torch.where(s <= knee, torch.expm1(s.clamp_max(knee)), linear)
        k = self.k
        base = ((k - 1.0) * s + 1.0).clamp_min(0.0)
        return (base ** (k / (k - 1.0)) - 1.0) / k

    def _weight(self, s):
        if self.name == "chi2":
            return (s + 2.0).clamp_min(0.0) / 2.0
        if self.name == "kl":
            return torch.exp(s)
        if self.name == "kl_cvar":
            return torch.exp(s.clamp_max(-math.log(self.alpha)))
        k = self.k
        return ((k - 1.0) * s + 1.0).clamp_min(0.0) ** (1.0 / (k - 1.0))


def make_divergence(name, *, alpha=0.2, k=2.0, max_ratio=math.inf):
    """The :class:`Divergence` named ``name`` (see its parameters)."""
    return Divergence(name, alpha=alpha, k=k, max_ratio=max_ratio)
