"""Torch models and loss heads used by skdp trainers."""

from ._backends import LinearBackend, ModuleBackend, make_backend
from ._factories import make_mlp
from ._heads import CrossEntropyHead, SquaredLossHead, WeightedHead

__all__ = [
    "CrossEntropyHead",
    "LinearBackend",
    "ModuleBackend",
    "SquaredLossHead",
    "WeightedHead",
    "make_backend",
    "make_mlp",
]
