"""Solver options: the settings one default serves, in one ``solver_options``
dict per estimator.

A user tunes the budget, the model, the batch, the epochs, the learning rate
and the fairness or robustness target; the rest (the optimizer's momentum,
the accountant, a solver's internal bounds...) works at its default on every
data set tried, and lives in ``solver_options``. Each estimator lists the
options it accepts, with their defaults, constraints and documentation, in
one place (:attr:`~skdp._fit.template.BaseDPEstimator._solver_option_specs`);
its docstring renders them (:func:`document_solver_options`), and ``fit``
refuses an unknown key or a bad value, naming it.
"""

import textwrap
from dataclasses import dataclass
from numbers import Real
from typing import Any

from sklearn.utils._param_validation import Interval, StrOptions

from ..privacy import ACCOUNTANTS, NEIGHBORING

__all__ = ["BASE_SOLVER_OPTIONS", "SolverOption", "document_solver_options"]

#: The marker a docstring holds where its solver options are listed.
MARKER = "{solver_options}"


@dataclass(frozen=True)
class SolverOption:
    """One solver option: its default, its constraints (scikit-learn's
    ``_parameter_constraints`` form), what it takes and what it does."""

    default: Any
    constraints: list
    kind: str
    doc: str


#: The options of every estimator trained by the fit sequence.
BASE_SOLVER_OPTIONS = {
    "sample_rate": SolverOption(
        None, [Interval(Real, 0, 1, closed="right"), None], "float in (0, 1] or None",
        "Poisson sampling rate q used instead of ``batch_size``: each record (or unit) "
        "joins each batch with probability q, for an expected batch of ``q * n`` (at "
        "least 1). Keeps the privacy cost of a step fixed when the data size changes "
        "(e.g. across cross-validation folds)."),
    "noise_multiplier": SolverOption(
        None, [Interval(Real, 0, None, closed="neither"), None], "float or None",
        "Noise standard deviation over the gradient's sensitivity. None calibrates it so "
        "that the requested steps spend the budget; a number fixes it and training "
        "stops at the largest step count the budget affords."),
    "accountant": SolverOption(
        "pld", [StrOptions(set(ACCOUNTANTS))], '{"pld", "rdp"}',
        "dp-accounting accountant of the calibration and of ``epsilon_`` (the privacy "
        "loss distribution is the tighter)."),
    "neighboring": SolverOption(
        "add_remove", [StrOptions(set(NEIGHBORING))], '{"add_remove", "replace"}',
        "Neighbouring relation of the guarantee: adding or removing one record (or "
        "unit), or replacing one (which doubles the sensitivities)."),
    "secure_rng": SolverOption(
        False, ["boolean"], "bool",
        "With ``random_state`` set, still draw the sampling and the noise from the "
        "operating system's secure generator; the seed then only initialises the model "
        "(with ``random_state=None`` this is always the case, see :ref:`privacy`)."),
}


def document_solver_options(cls):
    """Class decorator: replace the ``{solver_options}`` line of ``cls``'s
    docstring by the list of its solver options (key, what it takes, its
    default and what it does), indented as the line was."""
    doc = cls.__doc__
    if not doc or MARKER not in doc:
        return cls
    lines = doc.split("\n")
    at = next(i for i, line in enumerate(lines) if line.strip() == MARKER)
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    rendered = []
    for name, option in sorted(cls._solver_option_specs.items()):
        rendered.append(f"{indent}- ``{name!r}`` ({option.kind}, default "
                        f"``{option.default!r}``):")
        rendered.extend(textwrap.wrap(option.doc, width=79, initial_indent=indent + "  ",
                                      subsequent_indent=indent + "  ",
                                      break_on_hyphens=False))
    cls.__doc__ = "\n".join(lines[:at] + rendered + lines[at + 1:])
    return cls
