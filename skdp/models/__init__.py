"""Torch models and loss heads used by skdp trainers, and the statistics
of a returned model's private check."""

from ._backends import LinearBackend, ModuleBackend, make_backend
from ._check import CHECK_LOSS_BOUND, CHECK_SHARE, check_sums, check_terms, top_class
from ._factories import make_mlp
from ._heads import CrossEntropyHead, SquaredLossHead, WeightedHead, one_hot
from ._rows import (StoreRows, TrainingRows, gather_store_rows, is_row_store, shared_tensor,
                    training_rows)

__all__ = [
    "CHECK_LOSS_BOUND",
    "CHECK_SHARE",
    "CrossEntropyHead",
    "LinearBackend",
    "ModuleBackend",
    "SquaredLossHead",
    "StoreRows",
    "TrainingRows",
    "WeightedHead",
    "check_sums",
    "check_terms",
    "gather_store_rows",
    "is_row_store",
    "make_backend",
    "make_mlp",
    "one_hot",
    "shared_tensor",
    "top_class",
    "training_rows",
]
