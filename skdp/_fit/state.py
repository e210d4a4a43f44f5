"""What one fit carries from stage to stage.

An estimator's ``fit`` validates its inputs into a :class:`FitState` and runs
the fit sequence (:meth:`~skdp._fit.template.BaseDPEstimator._fit_private`);
each stage reads what earlier stages set. An algorithm whose hooks pass more
along subclasses :class:`FitState` with typed fields of its own.
"""

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

__all__ = ["FitState", "PreviousFit"]


@dataclass
class PreviousFit:
    """What ``warm_start=True`` continues from: a snapshot of the fitted
    estimator before the new fit overwrites it.

    Attributes
    ----------
    report : PrivacyReport
        The previous fit's report.
    private : bool
        Whether the previous fit is private: accounted, with a finite
        ``epsilon_`` (a model chosen outside the accountant is not).
    coef, intercept : ndarray or None
        The previous linear model (None for a module).
    module_state : dict or None
        The previous module's state dict (None for a linear model).
    attributes : dict
        The fitted attributes that validating the new data overwrites
        (``n_features_in_``, ``classes_``...), put back when the new data
        does not continue the previous fit.
    silos : ndarray or None
        DP-FERMI: the previous fit's silos.
    silo_reports : list or None
        DP-FERMI: each silo's previous report.
    """

    report: Any
    private: bool
    coef: Optional[np.ndarray] = None
    intercept: Optional[np.ndarray] = None
    module_state: Optional[dict] = None
    attributes: dict = field(default_factory=dict)
    silos: Optional[np.ndarray] = None
    silo_reports: Optional[list] = None


@dataclass
class FitState:
    """The state of one fit, filled stage by stage.

    Set by the estimator's ``fit`` from the validated inputs:

    Attributes
    ----------
    y_codes : ndarray of int or None
        Class codes (classifiers).
    group_codes : ndarray of int or None
        Codes of the sensitive groups, None without ``sensitive_features``.
    n_classes : int or None
    sample_weight : ndarray or None
        Validated weights, clipped to ``max_sample_weight``.
    unit_codes : ndarray of int or None
        Codes of ``unit_ids``, None without units.
    n_units : int or None
    previous : PreviousFit or None
        What ``warm_start`` continues from.
    make_targets : callable or None
        ``make_targets(report, generator, device, weights=None)``: the
        per-sample targets of the trainer (may draw a one-off release).
    head : object or None
        The trainer's loss head (DP-SGD).
    n_outputs : int or None
        Model outputs, when they differ from the estimator's default.

    Set by the fit sequence:

    units : UnitBounds or None
        The records each unit keeps and their factors
        (:func:`~skdp.privacy.bound_units`), None without units.
    record_weights : tensor or None
        Each record's factor on its clipped contributions (sample, class
        and unit weights), None when every factor is 1.
    initial_weights : ndarray or None
        A warm start's weights for trainers without a backend.
    n : int or None
        Records (or units) the sampling rate is about.
    q : float or None
        The Poisson sampling rate of a training step.
    returned_scores : ndarray or None
        The returned model's decision scores on the training rows, computed
        once by the model check for the releases after it.
    returned_row_sq_norms : ndarray or None
        The training rows' squared norms, float64: those the linear backend
        computed for training, or from the pass of the returned model's
        scores when a release after the check needs them (a linear model's
        clipped share).
    """

    y_codes: Optional[np.ndarray] = None
    group_codes: Optional[np.ndarray] = None
    n_classes: Optional[int] = None
    sample_weight: Optional[np.ndarray] = None
    unit_codes: Optional[np.ndarray] = None
    n_units: Optional[int] = None
    previous: Optional[PreviousFit] = None
    make_targets: Optional[Callable] = None
    head: Any = None
    n_outputs: Optional[int] = None
    units: Any = None
    record_weights: Any = None
    initial_weights: Optional[np.ndarray] = None
    n: Optional[int] = None
    q: Optional[float] = None
    returned_scores: Optional[np.ndarray] = None
    returned_row_sq_norms: Optional[np.ndarray] = None
