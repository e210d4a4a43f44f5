"""Steps of a linear model at a fixed shape, replayed as a CUDA graph.

A Poisson batch has a random size, so an eager step launches its kernels
for a new shape every time; on a GPU a step of a small batch is then bound
by those launches (about 45 small kernels), not by its arithmetic. Here each
batch is padded to the sampler's public width
(:attr:`~skdp.privacy.PoissonSampler.padded_width`) with rows of weight 0,
so every step has the same shapes and reads its batch, its weights and its
noise from the same buffers at a step counter held on the device: the step
is captured once in a CUDA graph and replayed, one launch a step.

The batches, the noise and the order of the random draws are those of the
eager loop; a padding row's clipped gradient is multiplied by 0, so the
sums are those of the Poisson batch (up to the order in which a matrix
product adds its terms). Privacy is unchanged: the padding depends on the
public ``n_samples`` and sampling rate only.
"""

from dataclasses import dataclass

import torch

#: Eager steps before the step is captured (they warm up cuBLAS and the
#: caching allocator, as CUDA graph capture requires).
GRAPH_WARMUP = 3


@dataclass
class _Buffers:
    """The inputs of a chunk of steps, read at ``counter``."""

    indices: torch.Tensor  # (steps, width) int64
    weights: torch.Tensor  # (steps, width) 1 for a batch row, 0 for padding
    noise: torch.Tensor  # (steps, noise size) or None
    counter: torch.Tensor  # (1,) int64: the step within the chunk
    batch: torch.Tensor  # (width, n_features + 1): the gathered rows


class _NoiseAt:
    """The noise vector of the current step, for ``noisy_update``."""

    def __init__(self, buffers):
        self.buffers = buffers

    def next(self):
        return self.buffers.noise.index_select(0, self.buffers.counter).view(-1)


class FixedShapeSteps:
    """The steps of a DP-SGD loop on a linear backend, at one shape.

    Parameters
    ----------
    backend : LinearBackend
    targets_t : torch.Tensor of shape (n_outputs, n_samples)
        Class-major per-sample targets of the head.
    head : head
        The loss head (``output_grad``).
    max_norm : float
        Clipping bound.
    update : callable
        ``update(grad_sums, noise)`` adds the noise, divides and steps (the
        trainer's noisy update); ``noise.next()`` is the step's noise vector.
    width : int
        The padded batch width.
    chunk_steps : int
        The most steps of one chunk.
    noise_size : int or None
        Length of a noise vector; None when the steps are not noised.
    graphed : bool
        Capture the step in a CUDA graph (after :data:`GRAPH_WARMUP` eager
        steps) and replay it; False runs every step eagerly (any device).
    """

    def __init__(self, backend, targets_t, head, max_norm, update, *, width, chunk_steps,
                 noise_size, graphed):
        self.backend = backend
        self.targets_t = targets_t
        self.head = head
        self.max_norm = max_norm
        self.update = update
        self.noise_size = noise_size
        self.graphed = graphed
        self.buffers = self._buffers(chunk_steps, width)
        self.graph = None
        self._warm = 0

    def _buffers(self, steps, width):
        device = self.targets_t.device
        noise = None
        if self.noise_size is not None:
            noise = torch.zeros((steps, self.noise_size), dtype=self.backend.weights.dtype,
                                device=device)
        return _Buffers(
            indices=torch.zeros((steps, width), dtype=torch.int64, device=device),
            weights=torch.zeros((steps, width), dtype=self.backend.weights.dtype, device=device),
            noise=noise,
            counter=torch.zeros(1, dtype=torch.int64, device=device),
            batch=self.backend.new_batch(width),
        )

    def run_chunk(self, indices, mask, noise_rows=None, after_step=None):
        """Run the steps of one chunk of :meth:`PoissonSampler.padded_batches`.

        ``noise_rows`` holds one noise vector per step (None when the steps
        are not noised); ``after_step()`` is called after each step. A chunk
        wider than the padded width (a batch ran over it) runs eagerly at
        its own width.
        """
        steps, width = indices.shape
        buffers = self.buffers
        if width != buffers.indices.shape[1] or steps > buffers.indices.shape[0]:
            buffers = self._buffers(steps, width)
        buffers.indices[:steps].copy_(indices)
        buffers.weights[:steps].copy_(mask)
        if noise_rows is not None:
            buffers.noise[:steps].copy_(noise_rows)
        buffers.counter.zero_()
        graphed = self.graphed and buffers is self.buffers
        for _ in range(steps):
            if graphed:
                self._graphed_step()
            else:
                self._step(buffers)
            if after_step is not None:
                after_step()

    def _step(self, buffers):
        backend, counter = self.backend, buffers.counter
        idx = buffers.indices.index_select(0, counter).view(-1)
        weights = buffers.weights.index_select(0, counter).view(-1)
        batch, logits_t = backend.forward_into(idx, buffers.batch)
        targets_t = (self.targets_t.index_select(1, idx),)
        sums, _ = backend.clipped_weighted_grad_sum(idx, batch, logits_t, self.head, targets_t,
                                                    weights, self.max_norm)
        self.update(sums, _NoiseAt(buffers))
        counter.add_(1)

    def _graphed_step(self):
        if self.graph is not None:
            self.graph.replay()
            return
        device = self.buffers.counter.device
        current = torch.cuda.current_stream(device)
        if self._warm < GRAPH_WARMUP:
            side = torch.cuda.Stream(device)
            side.wait_stream(current)
            with torch.cuda.stream(side):
                self._step(self.buffers)
            current.wait_stream(side)
            self._warm += 1
            return
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._step(self.buffers)
        self.graph = graph
        graph.replay()
