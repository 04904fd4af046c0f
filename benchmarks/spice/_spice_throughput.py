"""The throughput of ``run.py``: training molecules per second of every model.

Forward + backward + AdamW step on the same training batches, models interleaved, the
median of the repeats (molecules/s). A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

import time

import numpy as np
import torch

__all__ = [
    "throughput",
]


def throughput(
    models, opts_of, graphs, batch_size: int, repeats: int = 3, device: str = "cpu"
) -> dict[str, float]:
    """Training molecules/s (fwd + bwd + AdamW) per model, interleaved, median of repeats.

    On ``device`` (``"cpu"``, ``"cuda"``, ``"cuda:N"``: the run's ``--device``): the models
    are built on the CPU as before and moved there with the batches; on a GPU every timed
    epoch ends with a synchronisation.
    """
    from sci_moe._util import to_device
    from sci_moe.molecules import collate_ensembles
    from sci_moe.molecules.spice import build_model
    from sci_moe.train import run_device

    dev = run_device(device)
    batches = [
        collate_ensembles(graphs[s : s + batch_size])
        for s in range(0, min(len(graphs), 4 * batch_size), batch_size)
    ]
    if dev.type != "cpu":
        batches = [to_device(b, dev) for b in batches]
    n_mols = sum(b.num_mols for b in batches)
    built = {}
    for name in models:
        torch.manual_seed(0)
        m = build_model(name, **opts_of(name)).train()
        m.set_target_stats(torch.stack([g.y for g in graphs]))
        m.to(dev)  # before the optimiser, as the engine does
        built[name] = (m, torch.optim.AdamW(m.parameters(), lr=1e-4))

    def epoch(name):
        m, opt = built[name]
        for b in batches:
            loss, _ = m.loss(b)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    times: dict[str, list[float]] = {n: [] for n in models}
    for name in models:
        epoch(name)  # warm-up
    for _ in range(repeats):
        for name in models:
            t0 = time.perf_counter()
            epoch(name)
            times[name].append(time.perf_counter() - t0)
    return {n: n_mols / float(np.median(t)) for n, t in times.items()}
