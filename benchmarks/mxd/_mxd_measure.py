"""The measurements of ``run.py`` beside the decomposition's own: windows, probes, throughput.

:data:`METHODS` names the three decompositions, :func:`_windows` cuts a split of the
corpus into windows, :func:`_mlp_neurons` gives the MLP's hidden neurons at the site,
:func:`_probe_dense`, :func:`_probe_subset` and :func:`_probe_code` run the sparse probe on
the neurons or a method's top units, and :func:`_throughput` times fwd+bwd of the MxD
layer against the dense MLP. A helper module: ``run.py`` imports it.

Each runs where its model is (``run.py --device``): the inputs, kept on the CPU, are moved
to the model's device and the features come back to the CPU for the probes.
"""

from __future__ import annotations

import torch
from _common import time_fn

from sci_moe._util import module_device
from sci_moe.language.mxd import (
    code_columns,
    corpus_windows,
    rank_units,
    sparse_codes,
    sparse_probe,
)

__all__ = [
    "METHODS",
]


METHODS = ("mxd", "transcoder", "skip_transcoder")


def _windows(pm, cfg, split):
    n = cfg["train_windows"] if split == "train" else cfg["val_windows"]
    return corpus_windows(pm.tokenize, cfg["context_len"], split=split, max_windows_per_source=n)


def _mlp_neurons(site, x):
    """The MLP's hidden neurons on ``x`` (computed on the MLP's device), on the CPU."""
    mlp = site.input_module
    x = x.to(module_device(mlp))
    with torch.no_grad():
        return (mlp.act_fn(mlp.gate_proj(x)) * mlp.up_proj(x)).cpu()


def _probe_dense(train_feats, train_lab, val_feats, val_lab, n):
    gap = (train_feats[train_lab == 1].mean(0) - train_feats[train_lab == 0].mean(0)).abs()
    top = gap.argsort(descending=True)[:n]
    return sparse_probe(train_feats[:, top], train_lab, val_feats[:, top], val_lab)


def _probe_subset(tr, n_tokens):
    """Evenly spaced training tokens used to rank units and fit the probes."""
    return torch.linspace(0, tr["x"].shape[0] - 1, min(n_tokens, tr["x"].shape[0])).long()


def _codes(module, x):
    """:func:`sparse_codes` of ``module`` on ``x`` (moved to its device), on the CPU."""
    v, i, units = sparse_codes(module, x.to(module_device(module)))
    return v.cpu(), i.cpu(), units


def _probe_code(module, tr, va, n, n_tokens):
    sub = _probe_subset(tr, n_tokens)
    v, i, units = _codes(module, tr["x"][sub])
    labels = tr["source"][sub]
    top = rank_units(v, i, units, labels)[:n]
    vv, vi, _ = _codes(module, va["x"])
    return sparse_probe(code_columns(v, i, top), labels, code_columns(vv, vi, top), va["source"])


def _throughput(site, sizes, k, T=512):
    """fwd+bwd tokens/s of the MxD layer and of the dense MLP (own trainable copy), on the
    MLP's device (the layers built and the input drawn on the CPU, then moved; ``time_fn``
    synchronises CUDA around each call)."""
    import copy

    dense = copy.deepcopy(site.input_module).train()
    for p in dense.parameters():
        p.requires_grad_(True)
    dev = module_device(dense)
    mxd = sizes.build("mxd", top_k=k).to(dev)
    tc = sizes.build("transcoder", top_k=k).to(dev)
    x = torch.randn(T, sizes.d_in).to(dev)

    def step(f):
        def run():
            out = f(x)
            getattr(out, "y", out).sum().backward()

        return run

    res = {}
    for name, f in (("dense_mlp", dense), ("mxd", mxd), ("transcoder", tc)):
        res[name] = T / time_fn(step(f), repeats=3, warmup=1).median
    return res
