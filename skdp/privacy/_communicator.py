"""Where the rows of a fit live: in this process, or spread over the ranks
of a data-parallel fit.

A trainer and the fit scaffolding reach the other ranks only through the
communicator that :func:`current_communicator` returns. Outside a
data-parallel fit it is a :class:`LocalCommunicator`, whose every method
hands its input back, so a single-process fit runs the same operations as
without it. :mod:`skdp.distributed` sets another one (ranks of
``torch.distributed``) for the duration of a fit with
:func:`using_communicator`.

The rules a communicator follows, whatever moves the data:

* one rank, the root, owns the randomness of the fit: it draws every
  Poisson batch (of global row indices) and every noise value, in the order
  a single process would; the other ranks draw nothing;
* a released statistic is the sum over the ranks of their local sums, plus
  the root's noise added once, and every rank ends with the same noisy
  value;
* besides the noisy releases, the ranks share only the total number of
  rows (public, as in any fit), their row counts, the batch indices and the
  lists of class and group labels (public in a single-process fit too);
  with privacy units also the list of unit ids, which units each rank holds
  (every unit on one rank) and the key of the stream from which each rank
  derives the random keys of its own records (which records each unit
  keeps; with a :class:`~skdp.privacy.SecureGenerator`, the root's draws
  of every record's key).
"""

from contextlib import contextmanager
from contextvars import ContextVar


class LocalCommunicator:
    """The communicator of a fit in one process: one rank that holds every
    row. Every method returns its input.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.privacy import LocalCommunicator
    >>> comm = LocalCommunicator()
    >>> comm.is_root, comm.total(100)
    (True, 100)
    >>> comm.release(np.array([3.0, 4.0]), noise=lambda: np.array([0.5, -0.5]))
    array([3.5, 3.5])
    """

    #: This process draws the fit's randomness (sampling and noise).
    is_root = True
    #: Whether other ranks hold part of the rows.
    distributed = False
    rank = 0
    world_size = 1
    #: Index of this rank's first row among the rows of every rank.
    offset = 0

    def total(self, n_rows):
        """The number of training rows over all ranks, given this rank's."""
        return n_rows

    def shard(self, sampler):
        """The sampler of this rank's rows (here: ``sampler`` itself)."""
        return sampler

    def sum_(self, tensors):
        """Sum a list of tensors over the ranks, in place; returns it."""
        return tensors

    def draw_rows(self, draw, n_rows):
        """This rank's part of one draw per row of all ranks: ``draw(n)``
        returns a tensor of ``n`` values; the root draws them for every row,
        in the order of the global rows, and each rank keeps its own."""
        return draw(n_rows)

    def release(self, values, noise=None):
        """``values`` summed over the ranks plus ``noise()`` (drawn on the
        root only), the same result on every rank.

        Parameters
        ----------
        values : ndarray or torch.Tensor
            This rank's exact statistic.
        noise : callable or None, default=None
            Returns noise shaped like ``values``; None releases the exact sum
            (a fit without privacy).
        """
        return values if noise is None else values + noise()

    def share(self, value):
        """The root's ``value`` on every rank."""
        return value

    def union(self, labels):
        """The sorted union of every rank's sorted distinct ``labels``."""
        return labels


_LOCAL = LocalCommunicator()
_CURRENT = ContextVar("skdp_communicator", default=None)


def current_communicator():
    """The communicator of the fit in progress (a :class:`LocalCommunicator`
    outside a data-parallel fit).

    >>> from skdp.privacy import current_communicator
    >>> current_communicator().distributed
    False
    """
    communicator = _CURRENT.get()
    return _LOCAL if communicator is None else communicator


@contextmanager
def using_communicator(communicator):
    """Run the block with ``communicator`` as :func:`current_communicator`.

    >>> from skdp.privacy import LocalCommunicator, current_communicator, using_communicator
    >>> comm = LocalCommunicator()
    >>> with using_communicator(comm):
    ...     current_communicator() is comm
    True
    """
    token = _CURRENT.set(communicator)
    try:
        yield communicator
    finally:
        _CURRENT.reset(token)
