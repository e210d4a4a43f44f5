"""Linear (and MLP) classifiers trained with DP-SGD."""

from ._dpsgd import DPSGDClassifier

__all__ = ["DPSGDClassifier"]
