"""Shared pieces of the metrics' numpydoc docstrings.

A docstring line holding only ``{name}`` is replaced by the block ``name``
(indented like the placeholder), so that parameters shared by many metrics
are described once and every rendered docstring is still complete.
"""

import re
import textwrap

BLOCKS = {
    "y_true": """\
y_true : array-like of shape (n_samples,)
    True labels.""",
    "y_true_unused": """\
y_true : array-like of shape (n_samples,)
    True labels; only checked for length and type.""",
    "y_pred": """\
y_pred : array-like of shape (n_samples,)
    Predicted labels (``estimator.predict(X)``, not probabilities).""",
    "sensitive_features": """\
sensitive_features : array-like of shape (n_samples,) or (n_samples, n_columns)
    Group of each sample; several columns form intersectional groups.""",
    "pos_label": """\
pos_label : int, float, bool or str, default=1
    The positive (favourable, selected) label; with more than two classes
    the rates are ``pos_label`` versus the rest.""",
    "method_difference": """\
method : {"between_groups", "to_overall", "one_vs_rest"}, default="between_groups"
    ``"between_groups"``: largest minus smallest group rate.
    ``"to_overall"``: largest ``|rate(Z = z) - rate|``, each group against
    all samples. ``"one_vs_rest"``: largest ``|rate(Z = z) - rate(Z != z)|``,
    each group against the other groups pooled.""",
    "method_ratio": """\
method : {"between_groups", "to_overall", "one_vs_rest"}, default="between_groups"
    ``"between_groups"``: smallest over largest group rate.
    ``"to_overall"``: smallest ``min(r_z, r) / max(r_z, r)`` over groups
    ``z``, where ``r_z = rate(Z = z)`` and ``r`` is the rate of all samples.
    ``"one_vs_rest"``: the same with ``r = rate(Z != z)``, the other groups
    pooled. Two zero rates have ratio 1.""",
    "sample_weight": """\
sample_weight : array-like of shape (n_samples,), default=None
    Non-negative sample weights.""",
    "agg_difference": """\
agg : {"worst_case", "mean"}, default="worst_case"
    ``"worst_case"``: the largest of the per-class differences;
    ``"mean"``: their mean.""",
    "agg_ratio": """\
agg : {"worst_case", "mean"}, default="worst_case"
    ``"worst_case"``: the smaller of the true and false positive rate
    ratios; ``"mean"``: their mean.""",
    "returns_difference": """\
Returns
-------
difference : float
    In [0, 1]; 0 means every group has the same rates.""",
    "returns_ratio": """\
Returns
-------
ratio : float
    In [0, 1]; 1 means every group has the same rates.""",
    "raises": """\
Raises
------
ValueError
    If no sample has ``y_true {condition} pos_label``.""",
    "examples": """\
Examples
--------
>>> from skdp.metrics import {name}
>>> y_true = [1, 1, 0, 0, 1, 1, 0, 0]
>>> y_pred = [1, 0, 1, 0, 1, 1, 1, 0]
>>> groups = ["a"] * 4 + ["b"] * 4""",
}


def fill_doc(function, **blocks):
    """Expand the ``{name}`` lines of ``function``'s docstring.

    Parameters
    ----------
    function : callable
        Function whose ``__doc__`` is rewritten in place.
    **blocks : str
        Blocks used in addition to (and in place of) :data:`BLOCKS`.

    Returns
    -------
    function : callable
        The same function, so that this can serve as a decorator.
    """
    blocks = {**BLOCKS, **blocks}

    def expand(match):
        indent, name = match.groups()
        return textwrap.indent(blocks[name], indent)

    if function.__doc__:  # None under python -OO
        function.__doc__ = re.sub(r"^( *)\{(\w+)\}$", expand, function.__doc__, flags=re.M)
    return function
