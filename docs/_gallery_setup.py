"""Per-tutorial set-up for sphinx-gallery (referenced by name from ``conf.py``).

sphinx-gallery runs every tutorial inside the ``sphinx-build`` process, so process-wide
state set by one tutorial would leak into the next. :func:`reset_torch` runs before and
after each tutorial:

* before: seed torch and use **one** intra-op thread. The tutorials use tiny tensors,
  for which extra threads bring no speed-up, while on a shared or busy CI machine every
  OpenMP barrier can stall on a descheduled thread. On a 2-core machine the MoE
  tutorial took about 2 s with either setting while the machine was quiet, but 15 to
  120 s with two threads (and still about 3 s with one) while it was busy.
* after: restore the previous thread count.
"""

from __future__ import annotations

_saved_threads: int | None = None


def reset_torch(gallery_conf, fname, when):
    """sphinx-gallery ``reset_modules`` hook (called with ``when`` = before/after)."""
    global _saved_threads
    import torch

    if when == "before":
        _saved_threads = torch.get_num_threads()
        torch.set_num_threads(1)
        torch.manual_seed(0)
    elif _saved_threads is not None:
        torch.set_num_threads(_saved_threads)
        _saved_threads = None
