"""The privacy engine shared by every skdp estimator.

Poisson sampling, splits by a coin per record, per-sample gradient clipping
(a closed form for linear and softmax models, ``torch.func`` for any module),
Gaussian and Laplace noise, and accounting on dp-accounting events. A
:class:`ReleasePlan` turns what a fit releases (sensitivities, mechanisms,
budget shares) into noise scales and one accounted event; it is the only
place where noise is calibrated. (Budgets over a workflow -- a search, a
pipeline -- and :func:`~skdp.model_selection.spent` live a layer up, in
:mod:`skdp.model_selection`.) Sampling and noise draw from a seeded
``torch.Generator`` or, for unpredictable randomness, from a
:class:`SecureGenerator` backed by the operating system's CSPRNG.
"""

from ._accounting import (
    ACCOUNTANTS,
    NEIGHBORING,
    PLD_DISCRETIZATION,
    PrivacyBudgetError,
    calibrate_noise_multiplier,
    calibrate_steps,
    check_budget,
    compute_epsilon,
    gdp_delta,
    gdp_epsilon,
    gdp_mu,
    gdp_to_pure_dp,
    joint_noise_multiplier,
    make_accountant,
    poisson_gaussian_event,
    poisson_gaussian_step,
    pure_dp_to_gdp,
    sensitivity_factor,
)
from ._clipping import (
    clip_factors,
    clipped_linear_diff_sum,
    clipped_linear_sum,
    clipped_module_diff_sum,
    clipped_module_sum,
    weighted_clipped_module_sum,
)
from ._communicator import LocalCommunicator, current_communicator, using_communicator
from ._noise import NoiseStream, gaussian_noise, laplace_noise
from ._plan import ReleasePlan
from ._random import (
    SecureGenerator,
    counter_uniforms,
    exponential_,
    is_secure,
    normal_,
    stream_key,
    uniform_,
)
from ._releases import BatchReleases, InitialRelease, NoiseScale, Release
from ._report import (
    PrivacyReport,
    check_same_privacy_unit,
    compose_reports,
    silo_summary,
)
from ._sampling import (
    Batches,
    PoissonSampler,
    UnitSampler,
    batches_in_range,
    bernoulli_split,
    make_sampler,
)
from .ledger import LedgerError, PrivacyLedger
from ._verdicts import (
    MET,
    UNDETERMINED,
    VIOLATED,
    bound_verdicts,
    interval_verdicts,
    verdict_margin,
)
from ._weights import (
    UnitBounds,
    balanced_class_weights,
    bound_units,
    record_keys,
    record_weight_factors,
    weigh,
)

__all__ = [
    "BatchReleases",
    "InitialRelease",
    "NoiseScale",
    "PrivacyReport",
    "Release",
    "ReleasePlan",
    "check_same_privacy_unit",
    "compose_reports",
    "silo_summary",
    "NoiseStream",
    "LocalCommunicator",
    "current_communicator",
    "using_communicator",
    "Batches",
    "PoissonSampler",
    "bernoulli_split",
    "SecureGenerator",
    "exponential_",
    "is_secure",
    "normal_",
    "uniform_",
    "counter_uniforms",
    "stream_key",
    "clip_factors",
    "clipped_linear_diff_sum",
    "clipped_linear_sum",
    "clipped_module_diff_sum",
    "clipped_module_sum",
    "weighted_clipped_module_sum",
    "balanced_class_weights",
    "bound_units",
    "record_keys",
    "make_sampler",
    "batches_in_range",
    "UnitBounds",
    "UnitSampler",
    "record_weight_factors",
    "weigh",
    "LedgerError",
    "PrivacyLedger",
    "gaussian_noise",
    "laplace_noise",
    "ACCOUNTANTS",
    "NEIGHBORING",
    "PLD_DISCRETIZATION",
    "PrivacyBudgetError",
    "calibrate_noise_multiplier",
    "calibrate_steps",
    "check_budget",
    "compute_epsilon",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu",
    "gdp_to_pure_dp",
    "joint_noise_multiplier",
    "pure_dp_to_gdp",
    "make_accountant",
    "poisson_gaussian_event",
    "poisson_gaussian_step",
    "sensitivity_factor",
    "MET",
    "UNDETERMINED",
    "VIOLATED",
    "bound_verdicts",
    "interval_verdicts",
    "verdict_margin",
]
