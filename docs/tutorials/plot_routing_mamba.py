"""
Routing Mamba: a Mamba block with routed projection experts
===========================================================

Routing Mamba (RoM; Zhan et al., NeurIPS 2025, arXiv 2506.18145) turns the Conv, Gate
and Out projections of a Mamba block into banks of linear experts that share **one**
routing decision per token, while the depthwise convolution, ``x_proj``, ``dt_proj``
and the selective scan stay shared. This tutorial, on a CPU:

1. builds a :class:`~sci_moe.language.mamba.RoMBlock` and checks that its one router
   runs once per call;
2. checks the parallel chunked scan against the step-by-step recurrent reference;
3. checks that one expert gives back the dense :class:`~sci_moe.language.mamba.MambaBlock`;
4. trains a tiny byte-level RoM language model for a few steps;
5. generates text with the constant-size recurrent state.
"""

# %%
# A RoM block and its one shared routing
# --------------------------------------
# Every token's router picks ``top_k`` of ``num_experts`` experts; the same indices
# and weights drive the three banks (``conv_proj``, ``gate_proj``, ``out_proj``).

import matplotlib.pyplot as plt
import torch

from sci_moe.language import MoELMConfig, TrainConfig, load_corpus, train
from sci_moe.language.mamba import (
    MambaBlock,
    RoMBlock,
    recurrent_generate,
    selective_scan,
    selective_scan_reference,
)

torch.manual_seed(0)
block = RoMBlock(d_model=32, d_state=8, num_experts=4, top_k=2)
calls = []
block.router.register_forward_hook(lambda *_: calls.append(1))
x = torch.randn(2, 24, 32)
out, info = block(x)
print("output", tuple(out.shape), "| router calls:", len(calls))
print("experts of the first 4 tokens:", info.routing.indices[:4].tolist())
print("aux losses:", {k: round(float(v.detach()), 4) for k, v in info.losses.items()})
total = sum(p.numel() for p in block.parameters())
print(f"active / total parameters: {block.active_parameters()} / {total}")

# %%
# The parallel scan equals the recurrence
# ---------------------------------------
# :func:`~sci_moe.language.mamba.selective_scan` has no Python loop over time (a
# chunked log-depth scan of the maps ``h -> exp(dt A) h + dt B u``; on CUDA it runs as
# Triton kernels). The reference is the step-by-step loop of transformers' slow path.

b, d, n, L = 2, 16, 8, 50
u, delta, z = torch.randn(b, d, L), torch.randn(b, d, L), torch.randn(b, d, L)
A = -torch.rand(d, n) * 4
B, C, D = torch.randn(b, n, L), torch.randn(b, n, L), torch.randn(d)
fast = selective_scan(u, delta, A, B, C, D, z, delta_softplus=True, chunk_size=16)
ref = selective_scan_reference(u, delta, A, B, C, D, z, delta_softplus=True)
print("max |parallel - reference| =", float((fast - ref).abs().max()), "(float32 rounding)")

# %%
# The whole block agrees too: a copy with ``scan="reference"`` gives the same output.

slow = RoMBlock(d_model=32, d_state=8, num_experts=4, top_k=2, scan="reference")
slow.load_state_dict(block.state_dict())
print("block, parallel vs reference:", float((slow(x)[0] - out).abs().max()))

# %%
# One expert is the dense Mamba block
# -----------------------------------
# :meth:`~sci_moe.language.mamba.RoMBlock.from_dense` copies a dense block's
# projections into every expert; with one expert and ``top_k=1`` the routing weight
# is 1 and the RoM block computes exactly the dense one.

dense = MambaBlock(d_model=32, d_state=8)
rom1 = RoMBlock.from_dense(dense, num_experts=1, top_k=1)
print("RoM(1 expert) vs dense:", float((rom1(x)[0] - dense(x)).abs().max()))

# %%
# Train a tiny RoM language model
# -------------------------------
# Two RoM blocks (``layers="rr"``, no position table: Mamba needs none) on the
# byte-level text that ships with gensim (:func:`~sci_moe.language.load_corpus`),
# trained by the package's LM trainer. Sixty steps of 8 x 64 bytes is far from a
# useful model; ``benchmarks/routing_mamba/run.py`` does the real comparison.

corpus = load_corpus()
cfg = MoELMConfig(
    d_model=32,
    n_layers=2,
    n_heads=4,
    seq_len=64,
    layers="rr",
    positions=False,
    mamba={"d_state": 8, "num_experts": 4, "top_k": 1},
)
tc = TrainConfig(steps=60, batch_size=8, lr=3e-3, warmup=1 / 6, eval_every=10, progress=False)
history, model = train(cfg, tc, corpus=corpus, return_model=True)
bpb = [v / torch.log(torch.tensor(2.0)).item() for v in history["val_loss"]]
fig, ax = plt.subplots(figsize=(5, 3))
ax.plot(history["tokens"], bpb, marker="o")
ax.set_xlabel("training tokens")
ax.set_ylabel("validation bits per byte")
ax.set_title("tiny RoM LM (2 blocks, 4 experts, top-1)")
fig.tight_layout()
print(f"validation bits/byte: {bpb[0]:.2f} -> {bpb[-1]:.2f}")

# %%
# Generate with the constant-size state
# -------------------------------------
# :func:`~sci_moe.language.mamba.recurrent_generate` prefills the prompt with the
# parallel scan and then steps one byte at a time; each block carries only its conv
# window ``(d_inner, d_conv - 1)`` and SSM state ``(d_inner, d_state)``, whatever
# the position (a transformer's KV cache grows with it).

prompt = torch.tensor([list(b"The ")])
gen = torch.Generator().manual_seed(0)
text = recurrent_generate(model, prompt, 40, temperature=0.8, generator=gen)
print(repr(bytes(text[0].tolist()).decode("utf-8", errors="replace")))
state = model.blocks[0].attn.initial_state(1)
print("state per block:", tuple(state.conv.shape), tuple(state.ssm.shape))
