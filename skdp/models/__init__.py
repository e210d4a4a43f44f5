"""Torch models and loss heads used by skdp trainers."""

from ._backends import LinearBackend, ModuleBackend, make_backend
from ._factories import make_mlp
from ._heads import CrossEntropyHead, SquaredLossHead, WeightedHead
from ._rows import StoreRows, TrainingRows, gather_store_rows, is_row_store, training_rows

__all__ = [
    "CrossEntropyHead",
    "LinearBackend",
    "ModuleBackend",
    "SquaredLossHead",
    "StoreRows",
    "TrainingRows",
    "WeightedHead",
    "gather_store_rows",
    "is_row_store",
    "make_backend",
    "make_mlp",
    "training_rows",
]
