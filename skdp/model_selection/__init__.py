"""Model selection helpers for fair and private learning."""

from ._refit import best_within

__all__ = ["best_within"]
