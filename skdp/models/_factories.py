"""Torch module factories."""

from torch import nn


def make_mlp(n_features, n_classes, hidden_layer_sizes=(), activation="relu"):
    """Multi-layer perceptron mapping features to class logits (no BatchNorm).

    BatchNorm mixes examples within a batch, which breaks per-sample gradient
    clipping; use this MLP or a module with GroupNorm/LayerNorm.

    Parameters
    ----------
    n_features : int
    n_classes : int
    hidden_layer_sizes : tuple of int, default=()
        Empty gives logistic regression.
    activation : {"relu", "tanh"}, default="relu"

    Returns
    -------
    torch.nn.Module

    Examples
    --------
    >>> from skdp.models import make_mlp
    >>> make_mlp(4, 3, (8,))
    Sequential(
      (0): Linear(in_features=4, out_features=8, bias=True)
      (1): ReLU()
      (2): Linear(in_features=8, out_features=3, bias=True)
    )
    """
    activations = {"relu": nn.ReLU, "tanh": nn.Tanh}
    if activation not in activations:
        raise ValueError(f"activation must be one of {sorted(activations)}, got {activation!r}.")
    layers, width = [], n_features
    for size in hidden_layer_sizes:
        layers += [nn.Linear(width, int(size)), activations[activation]()]
        width = int(size)
    layers.append(nn.Linear(width, n_classes))
    return nn.Sequential(*layers)
