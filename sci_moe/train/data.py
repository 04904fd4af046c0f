"""Batches as a pure function of the step: the data position of a checkpoint is the step.

Both sources below compute the batch of optimiser step ``s`` from ``(seed, s)`` alone, so
a resumed run sees exactly the batches an uninterrupted one would, with no sampler state
to save, and a data-parallel run splits each global batch over the processes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .seeding import derive_seed

__all__ = ["Batch", "BatchSource", "ShuffledBatches", "StreamBatches"]


@dataclass
class Batch:
    """One process's share of a step's batch.

    Attributes
    ----------
    data : object
        What the method's loss receives.
    size : int
        Examples in ``data`` (weights the gradient average over processes).
    epoch : int
        Pass over the training set this batch belongs to (0 for streams).
    """

    data: Any
    size: int
    epoch: int = 0


class BatchSource:
    """Interface: ``get(step, rank, world_size) -> Batch``, deterministic in its arguments."""

    def get(self, step: int, rank: int = 0, world_size: int = 1) -> Batch:  # pragma: no cover
        raise NotImplementedError


class ShuffledBatches(BatchSource):
    """Mini-batches of a finite training set, reshuffled every epoch.

    Epoch ``e`` uses the permutation of ``torch.randperm(n)`` under a generator seeded by
    ``(seed, e)``; step ``s`` takes the ``s mod b``-th batch of epoch ``s // b`` (``b``
    batches per epoch, the last one shorter unless ``drop_last``). Under data parallelism
    rank ``r`` of ``W`` takes the positions ``r, r + W, ...`` of that global batch.

    Parameters
    ----------
    n : int
        Training examples.
    batch_size : int
        Global batch size.
    collate : callable
        ``collate(indices: list[int]) -> data`` builds the batch the loss receives.
    seed : int
    shuffle : bool
        ``False`` keeps the order ``0 .. n-1`` every epoch.
    drop_last : bool
        Drop the last, shorter batch of every epoch.
    """

    def __init__(
        self,
        n: int,
        batch_size: int,
        collate: Callable[[list[int]], Any],
        seed: int = 0,
        *,
        shuffle: bool = True,
        drop_last: bool = False,
    ) -> None:
        if n < 1:
            raise ValueError(f"the training set is empty (n={n})")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if drop_last and batch_size > n:
            raise ValueError(f"batch_size={batch_size} > {n} examples with drop_last=True")
        self.n, self.batch_size, self.collate = n, batch_size, collate
        self.seed, self.shuffle, self.drop_last = seed, shuffle, drop_last
        self.batches_per_epoch = n // batch_size if drop_last else math.ceil(n / batch_size)
        self._cache: tuple[int, list[int]] | None = None

    def order(self, epoch: int) -> list[int]:
        """The example order of ``epoch``."""
        if self._cache is not None and self._cache[0] == epoch:
            return self._cache[1]
        if self.shuffle:
            gen = torch.Generator().manual_seed(derive_seed(self.seed, epoch))
            order = torch.randperm(self.n, generator=gen).tolist()
        else:
            order = list(range(self.n))
        self._cache = (epoch, order)
        return order

    def indices(self, step: int, rank: int = 0, world_size: int = 1) -> list[int]:
        """The example indices of ``step`` for ``rank``."""
        epoch, k = divmod(step, self.batches_per_epoch)
        glob = self.order(epoch)[k * self.batch_size : (k + 1) * self.batch_size]
        return glob[rank::world_size]

    def get(self, step: int, rank: int = 0, world_size: int = 1) -> Batch:
        idx = self.indices(step, rank, world_size)
        return Batch(self.collate(idx), len(idx), step // self.batches_per_epoch)


class StreamBatches(BatchSource):
    """Batches drawn fresh every step (generated data: instances, random windows).

    Step ``s`` of rank ``r`` calls ``sample(generator, n)`` with a CPU generator seeded
    by ``(seed, s, r)`` and ``n`` its share of the global ``batch_size``. A
    data-parallel run therefore sees other (equally distributed) examples than a single
    process; use :class:`ShuffledBatches` where the two must be equal.

    Parameters
    ----------
    sample : callable
        ``sample(generator: torch.Generator, n: int) -> data``.
    batch_size : int
        Global batch size.
    seed : int
    """

    def __init__(
        self, sample: Callable[[torch.Generator, int], Any], batch_size: int, seed: int = 0
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.sample, self.batch_size, self.seed = sample, batch_size, seed

    def get(self, step: int, rank: int = 0, world_size: int = 1) -> Batch:
        n = len(range(rank, self.batch_size, world_size))
        gen = torch.Generator().manual_seed(derive_seed(self.seed, step, rank))
        return Batch(self.sample(gen, n), n, 0)


def as_source(data, batch_size: int, seed: int) -> BatchSource:
    """A :class:`BatchSource` from a source, or from a sequence (batched as a list)."""
    if isinstance(data, BatchSource):
        return data
    if isinstance(data, Sequence):
        seq = data
        return ShuffledBatches(len(seq), batch_size, lambda idx: [seq[i] for i in idx], seed)
    raise TypeError(
        f"data must be a BatchSource (ShuffledBatches, StreamBatches) or a sequence, "
        f"got {type(data).__name__}"
    )
