"""``torch.compile`` with an eager fallback: the one place that catches compiler failures."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

__all__ = ["CompiledOrEager"]


class CompiledOrEager:
    """Call ``torch.compile(fn)``; on its first failure, warn once and call ``eager`` from then on.

    Compilation happens lazily at the first call (as ``torch.compile`` does), so a missing
    or broken compiler shows up there; the call that failed is repeated with ``eager``, so
    nothing computed is lost and the caller sees one warning.

    Parameters
    ----------
    fn : callable
        The function to compile (``dynamic=False``: the shapes of a training or MD loop
        are fixed).
    eager : callable
        Same signature and results as ``fn`` without compilation (often ``fn`` itself).
    what : str
        Names the function in the warning ("the DSM step", "the model forces").
    instead : str
        Names the fallback in the warning ("the eager step", "autograd").
    """

    def __init__(self, fn: Callable, eager: Callable, what: str, instead: str) -> None:
        import torch

        self._compiled: Callable | None = torch.compile(fn, dynamic=False)
        self._eager = eager
        self._what, self._instead = what, instead

    @property
    def failed(self) -> bool:
        """Whether compilation failed and ``eager`` is used."""
        return self._compiled is None

    def __call__(self, *args: Any) -> Any:
        if self._compiled is None:
            return self._eager(*args)
        try:
            return self._compiled(*args)
        except Exception as err:  # any compiler failure falls back
            warnings.warn(
                f"torch.compile of {self._what} failed ({type(err).__name__}: {err}); "
                f"using {self._instead}",
                RuntimeWarning,
                stacklevel=3,
            )
            self._compiled = None
            return self._eager(*args)
