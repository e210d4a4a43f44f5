"""Model backends: parameters, forward pass and clipped gradient sums.

A trainer talks to a backend only; the backend chooses the per-sample
gradient path. :class:`LinearBackend` keeps one ``(n_classes, n_features + 1)``
weight matrix (bias in the last column) and uses the closed form;
:class:`ModuleBackend` wraps any ``torch.nn.Module`` and uses ``torch.func``.

A backend never copies the training rows it is given (a tensor, possibly a
view of a numpy array or of a ``numpy.memmap``, or a
:class:`~skdp.models.TrainingRows` that converts a float64 table to the
training dtype as it is read): each step gathers the rows of its batch. A trainer that iterates over its batches through
:meth:`~_BatchRows.feed` lets the backend gather the rows of the next
batches on background threads while the current step computes (set
``prefetch``, e.g. for rows read from disk); the rows gathered are the same
either way, so the model does not depend on it.

Both may hold ``record_weights``: the factors ``w_i / max_sample_weight`` in
[0, 1] of a weighted fit (:func:`skdp.privacy.record_weight_factors`), one
per row. Every clipped gradient sum then multiplies each record's clipped
gradient by its factor (clip, then weight), so trainers get sample weights
without knowing about them and every sensitivity stays the clipping bound.
With ``record_weights=None`` (the default) the unweighted code runs.
"""

import ctypes
import sys
from concurrent.futures import ThreadPoolExecutor

import torch

from ..privacy import (
    clip_factors,
    clipped_linear_diff_sum,
    clipped_linear_sum,
    clipped_module_diff_sum,
    clipped_module_sum,
    weighted_clipped_module_sum,
)
from ._rows import as_training_rows


def _release_free_memory():
    """Hand the heap memory freed by a training pass back to the operating
    system (glibc's ``malloc_trim``; nothing elsewhere).

    A pass allocates a batch of rows per step, of varying sizes; glibc keeps
    much of what they free in its heaps, where it would count as the
    process's memory through the scoring that follows (over 100 MB for
    batches of 40,000 rows)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (AttributeError, OSError):  # not glibc
        pass


#: Rows per block when a linear backend computes its rows' squared norms:
#: small on the CPU (the block stays in cache), large on an accelerator
#: (where a small block's time is that of its kernel launches).
_NORM_BLOCK = 2048
_DEVICE_NORM_BLOCK = 2**16


class _RecordWeights:
    """The per-record weight factors a backend applies to its clipped sums."""

    #: Factors in [0, 1], one per row, or None (unweighted).
    record_weights = None

    def batch_weights(self, idx, weights=None):
        """The record weights of rows ``idx``, times ``weights`` when given;
        ``weights`` itself when the backend holds no record weights."""
        if self.record_weights is None:
            return weights
        own = self.record_weights.index_select(0, idx)
        return own if weights is None else weights * own.to(weights.dtype)


class _Scratch:
    """One batch tensor reused from step to step (grown when a batch is
    larger): in a step loop a batch is dropped before the next is gathered,
    so allocating, and filling a bias column, once is enough."""

    def __init__(self, empty_batch):
        self.empty_batch = empty_batch
        self.tensor = None

    def batch(self, idx):
        size = idx.numel()
        if self.tensor is None or self.tensor.shape[0] < size:
            self.tensor = self.empty_batch(size + size // 8 + 64)
        return self.tensor[:size]


class _BatchRows(_RecordWeights):
    """Rows of a batch gathered on demand, or ahead on background threads.

    A subclass allocates a batch of ``size`` rows with
    ``_empty_batch(size)`` and fills it with the rows ``idx`` with
    ``_fill(idx, batch)``; only the filling runs on a background thread
    (the memory is the main thread's). In :meth:`feed` without prefetching
    one batch tensor serves every step (:class:`_Scratch`): a batch from
    :meth:`forward` is then valid until the next one is gathered, which is
    how the trainers use it.
    """

    #: How many upcoming batches :meth:`feed` gathers ahead, each on its
    #: own background thread (0: every batch is gathered when it is used).
    #: Worth it when gathering is slow (rows read from disk).
    prefetch = 0
    _pending = None
    _scratch = None

    def feed(self, batches):
        """Yield the index tensors of ``batches``, gathering the rows of
        those already drawn ahead (up to :attr:`prefetch` of them).

        ``batches`` is a :class:`~skdp.privacy.Batches` iterator (any
        iterator of index tensors is passed through). Nothing is drawn
        ahead: only batches the sampler has drawn already are gathered, so
        the random draws keep their order and the model is the same with
        and without prefetching. Inside the loop a batch from
        :meth:`forward` is valid until the next batch is gathered.
        """
        try:
            if not self.prefetch or not hasattr(batches, "drawn"):
                self._scratch = _Scratch(self._empty_batch)
                yield from batches
            else:
                yield from self._feed_ahead(batches)
        finally:
            self._scratch = None
            _release_free_memory()

    def _feed_ahead(self, batches):
        pending = self._pending = {}
        pool = ThreadPoolExecutor(max_workers=int(self.prefetch),
                                  thread_name_prefix="skdp-gather")
        try:
            for idx in batches:
                for upcoming in batches.drawn(int(self.prefetch)):
                    if id(upcoming) not in pending:
                        batch = self._empty_batch(upcoming.numel())
                        pending[id(upcoming)] = (upcoming, pool.submit(self._fill_ahead,
                                                                       upcoming, batch))
                yield idx
        finally:
            self._pending = None
            pool.shutdown(wait=True, cancel_futures=True)

    def _fill_ahead(self, idx, batch):
        # grad modes are per thread: a batch allocated by a training loop
        # under inference mode is filled under it too
        with torch.no_grad(), torch.inference_mode(batch.is_inference()):
            return self._fill(idx, batch)

    def computed_row_sq_norms(self):
        """The rows' squared norms ``|x|^2`` (with the bias input: ``+ 1``)
        if training computed them, else None; this backend never does."""
        return None

    def prepare(self):
        """Do the backend's passes over the rows before training (which may
        run on one thread): nothing here."""

    def _gather(self, idx):
        """The rows ``idx`` (a fresh tensor): gathered ahead by :meth:`feed`,
        or now."""
        if self._pending:
            entry = self._pending.pop(id(idx), None)
            if entry is not None and entry[0] is idx:
                return entry[1].result()
        if self._scratch is not None:
            return self._fill(idx, self._scratch.batch(idx))
        return self._fill(idx, self._empty_batch(idx.numel()))


class LinearBackend(_BatchRows):
    """Linear/softmax model ``logits = [x, 1] @ weights.T`` on a fixed dataset.

    The rows are kept as given, never copied: a batch is a fresh tensor of
    its rows with a trailing column of ones (the bias input), shape
    ``(batch, n_features + 1)``, in the rows' training dtype. The squared norms ``|x|^2 + 1`` of all rows
    (one value per row) are computed once, when a clipped sum first needs
    them, a block of rows at a time; a step then gathers those of its batch.

    Parameters
    ----------
    X : torch.Tensor or TrainingRows of shape (n_samples, n_features)
        The training rows (possibly a view of a numpy array or memmap);
        the model's dtype is their training dtype.
    n_outputs : int
    """

    def __init__(self, X, n_outputs):
        self.rows = as_training_rows(X)
        self.weights = torch.zeros(
            (n_outputs, X.shape[1] + 1), dtype=self.rows.dtype, device=X.device
        )
        self.parameters = [self.weights]
        self._row_sq_norms = None


    def _empty_batch(self, size):
        """A batch of ``size`` rows whose trailing column (the bias input)
        holds ones already."""
        batch = torch.empty((size, self.rows.shape[1] + 1), dtype=self.rows.dtype,
                            device=self.rows.device)
        batch.select(1, -1).fill_(1.0)
        return batch

    def _fill(self, idx, batch):
        """Rows ``idx`` into ``batch`` (from :meth:`_empty_batch`)."""
        self.rows.index_select(0, idx, out=batch[:, :-1])
        return batch

    @property
    def _sq_norms(self):
        """Squared norm of every row with its bias input, ``|x|^2 + 1``."""
        if self._row_sq_norms is None:
            n, d = self.rows.shape
            size = _NORM_BLOCK if self.rows.device.type == "cpu" else _DEVICE_NORM_BLOCK
            block = torch.ones((min(n, size), d + 1), dtype=self.rows.dtype,
                               device=self.rows.device)
            norms = torch.empty(n, dtype=self.rows.dtype, device=self.rows.device)
            for start in range(0, n, size):
                rows = block[: min(size, n - start)]
                rows[:, :-1] = self.rows.block(start, start + size)
                # a product, not square(): torch's pow kernel is several times slower
                norms[start:start + size] = (rows * rows).sum(1)
            self._row_sq_norms = norms
        return self._row_sq_norms

    def computed_row_sq_norms(self):
        """The rows' ``|x|^2 + 1`` (training dtype and device) if a clipped
        sum computed them, else None: the releases after training read them
        instead of computing them again."""
        return self._row_sq_norms

    def prepare(self):
        """Compute the rows' squared norms now, on the process's threads: a
        pass over every row that training (on one thread for a linear model
        on the CPU) would otherwise make at its first step. Each row's norm
        is reduced by one thread in a fixed order, so the values do not
        depend on the number of threads."""
        return self._sq_norms

    def forward(self, idx):
        """Return ``(batch, logits_t)`` for the rows ``idx``; logits class-major."""
        batch = self._gather(idx)
        return batch, self.weights @ batch.T

    def new_batch(self, size):
        """A batch tensor of ``size`` rows for :meth:`forward_into` (its bias
        column filled)."""
        return self._empty_batch(size)

    def forward_into(self, idx, batch):
        """:meth:`forward` with the rows ``idx`` gathered into ``batch`` (from
        :meth:`new_batch`, as many rows as ``idx``): no allocation of its
        own, so a captured step can replay it."""
        batch = self._fill(idx, batch)
        return batch, self.weights @ batch.T

    def clipped_grad_sum(self, idx, batch, logits_t, head, targets_t, max_norm):
        """Clipped per-sample gradient sum (list aligned with ``parameters``).

        ``targets_t`` are class-major per-sample tensors (n_classes, batch).
        With ``record_weights``, each clipped gradient is multiplied by its
        record's factor.
        """
        if self.record_weights is not None:
            return self.clipped_weighted_grad_sum(idx, batch, logits_t, head, targets_t, None,
                                                  max_norm)
        out_grad = head.output_grad(logits_t, *targets_t)
        total, sq_norms = clipped_linear_sum(
            batch, out_grad, max_norm, input_sq_norms=self._sq_norms.index_select(0, idx)
        )
        return [total], sq_norms

    def forward_at(self, batch, params):
        """Class-major logits of ``batch`` (from :meth:`forward`) under other
        ``params`` (a list aligned with ``parameters``)."""
        return params[0] @ batch.T

    def clipped_weighted_grad_sum(self, idx, batch, logits_t, head, targets_t, weights,
                                  max_norm):
        """``sum_i w_i clip(g_i, max_norm)`` (clip, then weight): the norms
        are those of the unweighted per-sample gradients ``|e_i| |x_i|``, in
        closed form; one record moves the sum by at most ``max(w) max_norm``.
        The backend's ``record_weights`` multiply ``weights`` (or replace
        them when None).
        """
        weights = self.batch_weights(idx, weights)
        out_grad = head.output_grad(logits_t, *targets_t)
        sq_norms = (out_grad * out_grad).sum(0) * self._sq_norms.index_select(0, idx)
        factors = clip_factors(sq_norms, max_norm) * weights.to(out_grad.dtype)
        scaled = (out_grad * factors).nan_to_num_(nan=0.0, posinf=0.0, neginf=0.0)
        return [scaled @ batch], sq_norms

    def clipped_grad_diff_sum(self, idx, batch, previous, head, targets_t, previous_targets_t,
                              max_norm, *, inner_norm=None, logits_t=None,
                              previous_logits_t=None, weights=None, previous_weights=None):
        """Clipped sum of per-sample gradient differences between the current
        parameters and ``previous`` (list aligned with ``parameters``) on the
        same batch; with ``weights``, each gradient is clipped to
        ``inner_norm`` *then* weighted (the backend's ``record_weights``
        multiply both sides); see
        :func:`skdp.privacy.clipped_linear_diff_sum`.
        """
        weights = self.batch_weights(idx, weights)
        previous_weights = self.batch_weights(idx, previous_weights)
        if logits_t is None:
            logits_t = self.weights @ batch.T
        if previous_logits_t is None:
            previous_logits_t = previous[0] @ batch.T
        total, sq_norms = clipped_linear_diff_sum(
            batch, head.output_grad(logits_t, *targets_t),
            head.output_grad(previous_logits_t, *previous_targets_t), max_norm,
            inner_norm=inner_norm, input_sq_norms=self._sq_norms.index_select(0, idx),
            weights=weights, previous_weights=previous_weights,
        )
        return [total], sq_norms

    def predict_logits(self, X):
        return X @ self.weights[:, :-1].T + self.weights[:, -1]

    def state(self):
        return {"weights": self.weights.detach().cpu().numpy().astype("float64")}


class ModuleBackend(_BatchRows):
    """Any ``torch.nn.Module`` mapping a batch of rows to logits."""

    def __init__(self, X, module):
        self.inputs = as_training_rows(X)
        self.module = module.to(device=X.device, dtype=self.inputs.dtype)
        self.parameters = [p for p in self.module.parameters() if p.requires_grad]
        self._names = [n for n, p in self.module.named_parameters() if p.requires_grad]

    def _empty_batch(self, size):
        return torch.empty((size,) + tuple(self.inputs.shape[1:]),
                           dtype=self.inputs.dtype, device=self.inputs.device)

    def _fill(self, idx, batch):
        return self.inputs.index_select(0, idx, out=batch)

    def forward(self, idx):
        batch = self._gather(idx)
        with torch.no_grad():
            return batch, self.module(batch).T.contiguous()

    def clipped_grad_sum(self, idx, batch, logits_t, head, targets_t, max_norm):
        if self.record_weights is not None:
            return self.clipped_weighted_grad_sum(idx, batch, logits_t, head, targets_t, None,
                                                  max_norm)
        sums, sq_norms = clipped_module_sum(
            self.module, head.loss, batch, *(t.T for t in targets_t), max_norm=max_norm
        )
        return [sums[name] for name in self._names], sq_norms

    def forward_at(self, batch, params):
        """Class-major outputs of ``batch`` under other ``params`` (list
        aligned with ``parameters``)."""
        named = dict(zip(self._names, params))
        with torch.no_grad():
            return torch.func.functional_call(self.module, named, (batch,)).T.contiguous()

    def clipped_weighted_grad_sum(self, idx, batch, logits_t, head, targets_t, weights,
                                  max_norm):
        """``sum_i w_i clip(g_i, max_norm)`` (clip, then weight; ``torch.func``);
        see :func:`skdp.privacy.weighted_clipped_module_sum`; the
        backend's ``record_weights`` multiply ``weights``."""
        weights = self.batch_weights(idx, weights)
        sums, sq_norms = weighted_clipped_module_sum(
            self.module, head.loss, batch, [t.T for t in targets_t], weights, max_norm=max_norm
        )
        return [sums[name] for name in self._names], sq_norms

    def clipped_grad_diff_sum(self, idx, batch, previous, head, targets_t, previous_targets_t,
                              max_norm, *, inner_norm=None, logits_t=None,
                              previous_logits_t=None, weights=None, previous_weights=None):
        """Clipped sum of per-sample gradient differences (``torch.func``);
        see :func:`skdp.privacy.clipped_module_diff_sum`."""
        weights = self.batch_weights(idx, weights)
        previous_weights = self.batch_weights(idx, previous_weights)
        sums, sq_norms = clipped_module_diff_sum(
            self.module, head.loss, batch, [t.T for t in targets_t],
            dict(zip(self._names, previous)), [t.T for t in previous_targets_t],
            max_norm=max_norm, inner_norm=inner_norm, weights=weights,
            previous_weights=previous_weights,
        )
        return [sums[name] for name in self._names], sq_norms

    def predict_logits(self, X):
        with torch.no_grad():
            return self.module(X)

    def state(self):
        return {k: v.detach().cpu().numpy() for k, v in self.module.state_dict().items()}


def make_backend(X, n_outputs, module=None):
    """Linear backend when ``module`` is None, else a module backend."""
    if module is None:
        return LinearBackend(X, n_outputs)
    return ModuleBackend(X, module)
