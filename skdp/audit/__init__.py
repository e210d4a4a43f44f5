"""Privacy auditing: empirical lower bounds on the epsilon of a mechanism.

An audit cannot prove that a mechanism is private; a lower bound above the
epsilon it claims proves, at the stated confidence, that the claim is wrong.
See :ref:`audit`.
"""

from ._audit import AuditResult, audit_one_run, audit_repeated, is_gaussian_event, one_run_bound
from ._bounds import (
    OneRunAuditResult,
    clopper_pearson_epsilon_lower_bound,
    epsilon_lower_bound_from_scores,
    fdp_one_run_epsilon_lower_bound,
    one_run_epsilon_lower_bound,
)

__all__ = [
    "AuditResult",
    "OneRunAuditResult",
    "audit_one_run",
    "audit_repeated",
    "clopper_pearson_epsilon_lower_bound",
    "epsilon_lower_bound_from_scores",
    "fdp_one_run_epsilon_lower_bound",
    "is_gaussian_event",
    "one_run_bound",
    "one_run_epsilon_lower_bound",
]
