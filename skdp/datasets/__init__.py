"""Datasets for fairness and privacy benchmarks.

Loaders for the public benchmarks of the fairness literature (UCI Adult,
ProPublica COMPAS, UCI Statlog German credit), the standard preprocessing for
them (:func:`make_preprocessor`), and a synthetic generator with controllable
groups (:func:`make_fair_classification`).

Adult and German credit are shipped with skdp as compressed copies, so their
loaders work offline; COMPAS is read from a data folder (see
:func:`get_data_home`) or downloaded on first use. Every file is checked
against its published SHA256.

The loaders return a :class:`~sklearn.utils.Bunch` whose ``sensitive``
attribute holds the sensitive attribute, kept out of the features ``data`` by
default.
"""

from ._adult import fetch_adult
from ._base import get_data_home, make_preprocessor
from ._compas import fetch_compas
from ._german import fetch_german
from ._robust import make_imbalanced_digits, make_rare_subpopulation
from ._silos import make_silos
from ._synthetic import make_fair_classification

__all__ = [
    "fetch_adult",
    "fetch_compas",
    "fetch_german",
    "get_data_home",
    "make_fair_classification",
    "make_imbalanced_digits",
    "make_rare_subpopulation",
    "make_preprocessor",
    "make_silos",
]
