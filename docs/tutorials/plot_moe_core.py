"""
The MoE core in five minutes
============================

Every part of sci-moe (molecules, sampling, theory) uses the same Mixture-of-Experts
core, :mod:`sci_moe.moe`. This tutorial walks through it on a CPU:

1. build an :class:`~sci_moe.moe.MoE` layer and route tokens;
2. read the :class:`~sci_moe.moe.Routing` it returns (indices, weights, load);
3. switch the routing variant: sigmoid scores, expert choice, dense gating, shared
   experts;
4. reuse one routing across two expert banks with :func:`~sci_moe.moe.dispatch`;
5. get the auxiliary losses and check the layer against the naive reference;
6. train a small model and look at which expert handles which input.
"""

# %%
# Build a layer and route tokens
# ------------------------------
# An :class:`~sci_moe.moe.MoE` is a router, a bank of ``num_experts`` experts and an
# optional shared expert. Each token is sent to ``top_k`` experts and their outputs are
# mixed with the router's weights, :math:`y_t = \sum_j w_{tj} E_{i_{tj}}(x_t)`.
# The default experts are SwiGLU (``expert="glu"``) with hidden size ``2 * d_model``.

import matplotlib.pyplot as plt
import numpy as np
import torch

from sci_moe.moe import (
    GLUExperts,
    LinearExperts,
    MoE,
    Router,
    dispatch,
    load_balancing_loss,
    router_z_loss,
)
from sci_moe.testing import assert_moe_matches_reference

torch.manual_seed(0)

d_model, num_experts, top_k = 16, 4, 2
moe = MoE(d_model=d_model, num_experts=num_experts, top_k=top_k)
print(moe)

# %%
# The layer accepts any leading shape; tokens are flattened to ``(T, d_model)`` for
# routing. :meth:`~sci_moe.moe.MoE.route` returns the routing without running the
# experts.

x = torch.randn(2, 12, d_model)  # e.g. 2 molecules of 12 atoms
y = moe(x)
routing = moe.route(x)
print("output", tuple(y.shape), "| tokens routed:", routing.num_tokens, "| k:", routing.top_k)

# %%
# Inspect the Routing
# -------------------
# ``indices[t, j]`` is the ``j``-th expert of token ``t`` and ``weights[t, j]`` its
# weight. With the default softmax scores and ``normalize=True`` the ``k`` weights of
# a token sum to one. ``load`` counts assignments per expert; ``probs`` are the full
# router scores that the auxiliary losses use.

torch.set_printoptions(precision=3, sci_mode=False)
print("indices[:4]\n", routing.indices[:4])
print("weights[:4]\n", routing.weights[:4].detach())
print("weight sums", routing.weights.sum(-1)[:4].detach())
print("probs (all experts):", tuple(routing.probs.shape))
T = routing.num_tokens
print(f"load {routing.load} | total {int(routing.load.sum())} = T * k = {T * top_k}")

# %%
# Softmax or sigmoid scores
# -------------------------
# ``score="sigmoid"`` uses independent sigmoids (as DeepSeek-V3) instead of a softmax
# over experts. Both are monotone in the logits, so with the *same* weights the same
# experts are selected; only the mixing weights change.

moe_sigmoid = MoE(d_model=d_model, num_experts=num_experts, top_k=top_k, score="sigmoid")
moe_sigmoid.load_state_dict(moe.state_dict())
r_soft, r_sig = moe.route(x), moe_sigmoid.route(x)
print("same selection:", torch.equal(r_soft.indices, r_sig.indices))
print("softmax weights[:3]\n", r_soft.weights[:3].detach())
print("sigmoid weights[:3]\n", r_sig.weights[:3].detach())

# %%
# Expert choice
# -------------
# With ``mode="expert_choice"`` each *expert* picks its ``capacity`` best tokens
# (Zhou et al. 2022), ``capacity = ceil(capacity_factor * T * k / E)``. The load is
# perfectly balanced by construction, but a token may get more than ``k`` experts, or
# none: dropped slots carry the index ``num_experts`` and weight zero.

moe_ec = MoE(
    d_model=d_model,
    num_experts=num_experts,
    top_k=top_k,
    mode="expert_choice",
    capacity_factor=1.0,
)
moe_ec.load_state_dict(moe.state_dict())
r_ec = moe_ec.route(x)
experts_per_token = r_ec.kept.sum(1)
print("capacity", moe_ec.router.capacity(r_ec.num_tokens), "| load", r_ec.load)
print("experts per token", experts_per_token.tolist())
print("tokens with no expert:", int((experts_per_token == 0).sum()))

# %%
# Dense gating
# ------------
# ``mode="dense"`` uses every expert with its score as weight (a soft mixture of
# experts); ``top_k`` becomes ``num_experts``.

moe_dense = MoE(d_model=d_model, num_experts=num_experts, mode="dense")
moe_dense.load_state_dict(moe.state_dict())
r_dense = moe_dense.route(x)
print("k =", r_dense.top_k, "| weights == probs:", torch.allclose(r_dense.weights, r_dense.probs))

# %%
# Shared experts
# --------------
# ``num_shared_experts`` adds always-on experts next to the routed ones (DeepSeek-V3);
# ``shared_gate=True`` scales them by ``sigmoid(x w_g)`` (Qwen2-MoE). The routed part
# is unchanged, so the difference from the plain layer is exactly the shared output.

moe_shared = MoE(
    d_model=d_model, num_experts=num_experts, top_k=top_k, num_shared_experts=1, shared_gate=True
)
missing = moe_shared.load_state_dict(moe.state_dict(), strict=False).missing_keys
print("new parameters:", missing)
with torch.no_grad():
    diff = moe_shared(x) - moe(x)
    shared_out = moe_shared.shared(x.reshape(-1, d_model)).reshape(x.shape)
print("y_shared - y == shared(x):", torch.allclose(diff, shared_out, atol=1e-6))

# %%
# One routing, two expert banks
# -----------------------------
# A :class:`~sci_moe.moe.Routing` is computed once and can drive several banks, e.g. a
# feature update and a scalar head that must use the same experts per atom. The sort by
# expert is cached in ``routing.plan`` and reused by every :func:`~sci_moe.moe.dispatch`.

tokens = x.reshape(-1, d_model)
router = Router(d_model=d_model, num_experts=num_experts, top_k=top_k)
features = GLUExperts(num_experts, d_model, 2 * d_model)
heads = LinearExperts(num_experts, d_model, 1)

shared_routing = router(tokens)
h = dispatch(tokens, shared_routing, features)  # (T, d_model)
energy = dispatch(tokens, shared_routing, heads)  # (T, 1)
print("features", tuple(h.shape), "| per-token head", tuple(energy.shape))
print("plan cached on the routing:", shared_routing.plan is shared_routing.plan)

# %%
# :meth:`MoE.from_modules <sci_moe.moe.MoE.from_modules>` wraps such parts into a layer,
# and ``forward(x, routing=...)`` reuses a routing computed elsewhere:

layer = MoE.from_modules(router, features)
print("same output:", torch.allclose(layer(tokens, routing=shared_routing), h))

# %%
# Auxiliary losses
# ----------------
# ``forward(..., return_routing=True)`` also returns an :class:`~sci_moe.moe.MoEInfo`:
# the routing, the unweighted losses and their weighted sum ``aux_loss``, to be added to
# the training loss. The load-balancing loss is normalised so that perfectly balanced
# routing gives 1 and collapse onto one expert gives ``num_experts``.

y, info = moe(x, return_routing=True)
print({name: round(v.item(), 4) for name, v in info.losses.items()})
print(
    f"aux_loss = {moe.load_balance_coef} * load_balance + {moe.z_loss_coef} * z_loss =",
    round(info.aux_loss.item(), 6),
)
print(
    "same as the functions:",
    torch.isclose(info.losses["load_balance"], load_balancing_loss(info.routing)).item(),
    torch.isclose(info.losses["z_loss"], router_z_loss(info.routing)).item(),
)

# %%
# Check against the naive reference
# ---------------------------------
# :mod:`sci_moe.testing` ships a deliberately naive MoE that loops over tokens and
# experts. :func:`~sci_moe.testing.assert_moe_matches_reference` compares the layer's
# output *and* the gradients with respect to the input and every parameter; it raises
# an ``AssertionError`` naming the first tensor that differs.

for name, layer_to_check in [
    ("softmax top-k", moe),
    ("sigmoid top-k", moe_sigmoid),
    ("expert choice", moe_ec),
    ("dense", moe_dense),
    ("shared experts", moe_shared),
]:
    assert_moe_matches_reference(layer_to_check, num_tokens=24)
    print(f"{name:15s} matches the reference")

# %%
# Train it on a piecewise function
# --------------------------------
# A small regression task whose structure suits experts: a 1-D target made of three
# different pieces. The model embeds the scalar input, applies an MoE with MLP experts
# and reads out a scalar. The router logits are affine in the embedding, which is affine
# in ``x``, so each expert is the first choice on at most one interval of ``x``: we can
# watch the experts divide the line between them.


def target(x: torch.Tensor) -> torch.Tensor:
    return torch.where(
        x < -1.0,
        torch.sin(4.0 * x),
        torch.where(x < 1.0, 1.5 * x.abs() - 0.75, 1.5 - 0.6 * x),
    )


torch.manual_seed(0)
x_train = torch.rand(512, 1) * 6.0 - 3.0
y_train = target(x_train) + 0.05 * torch.randn_like(x_train)
x_test = torch.linspace(-3.0, 3.0, 400).unsqueeze(1)
y_test = target(x_test)


class Regressor(torch.nn.Module):
    def __init__(self, d_model: int = 16, num_experts: int = 4) -> None:
        super().__init__()
        self.embed = torch.nn.Linear(1, d_model)
        self.moe = MoE(
            d_model=d_model,
            num_experts=num_experts,
            top_k=2,
            expert="mlp",
            activation="gelu",
            d_hidden=32,
            load_balance_coef=0.01,
        )
        self.head = torch.nn.Linear(d_model, 1)

    def forward(self, x):
        h, info = self.moe(self.embed(x), return_routing=True)
        return self.head(h), info


model = Regressor()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
steps = 400
history = {"mse": [], "test_mse": [], "balance": [], "load": []}
for step in range(steps):
    pred, info = model(x_train)
    mse = torch.nn.functional.mse_loss(pred, y_train)
    loss = mse + info.aux_loss  # 0.01 * load-balancing loss
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    history["mse"].append(mse.item())
    history["balance"].append(info.losses["load_balance"].item())
    history["load"].append((info.routing.load / info.routing.load.sum()).numpy())
    if step % 10 == 0 or step == steps - 1:
        with torch.no_grad():
            test_mse = (model(x_test)[0] - y_test).square().mean().item()
        history["test_mse"].append((step, test_mse))

print(f"train MSE: {history['mse'][0]:.3f} -> {history['mse'][-1]:.4f}")
print(f"test MSE against the noise-free target: {history['test_mse'][-1][1]:.4f}")
print(f"load-balancing loss at the end: {history['balance'][-1]:.3f} (1 = balanced)")

# %%
# Loss curve and per-expert load
# ------------------------------
# Left: the regression loss; the dashed line is the variance of the label noise, the
# training MSE of the exact target. Middle: the load-balancing loss, which the small
# ``load_balance_coef`` keeps close to 1, its value for perfectly balanced routing.
# Right: the share of the ``T k`` assignments each expert receives at every step.

loads = np.stack(history["load"])
fig, (ax_mse, ax_bal, ax_load) = plt.subplots(1, 3, figsize=(12, 3.4), layout="constrained")
ax_mse.semilogy(history["mse"], label="train")
ax_mse.semilogy(*zip(*history["test_mse"], strict=True), "o-", ms=2, label="test")
ax_mse.axhline(0.05**2, color="gray", ls="--", lw=1, label="noise variance")
ax_mse.set_xlabel("step")
ax_mse.set_title("MSE")
ax_mse.legend()
ax_bal.plot(history["balance"])
ax_bal.axhline(1.0, color="gray", ls="--", lw=1)
ax_bal.set_xlabel("step")
ax_bal.set_title("load-balancing loss")
ax_load.stackplot(np.arange(steps), loads.T, labels=[f"expert {e}" for e in range(num_experts)])
ax_load.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
ax_load.set_ylim(0, 1)
ax_load.set_xlabel("step")
ax_load.set_title("share of assignments")
plt.show()

# %%
# Which expert handles which input
# --------------------------------
# Route a fine grid of inputs through the trained model and turn ``Routing.weights``
# into a dense ``(T, E)`` matrix (zero where an expert is not selected). Each column
# of the heatmap is one input ``x``; the brightest cell is its main expert. The split
# is learned from the data alone and need not coincide with the three pieces of the
# target.

model.eval()
with torch.no_grad():
    pred_test, info_test = model(x_test)
r = info_test.routing
dense_w = torch.zeros(r.num_tokens, r.num_experts + 1)  # last column: dropped slots
dense_w.scatter_(1, r.indices, r.weights)
dense_w = dense_w[:, : r.num_experts]

fig, (ax_fit, ax_map) = plt.subplots(
    2, 1, figsize=(8, 5.5), sharex=True, height_ratios=(1.3, 1), layout="constrained"
)
ax_fit.plot(x_train, y_train, ".", color="0.7", ms=3, label="training data")
ax_fit.plot(x_test, y_test, color="black", lw=1.5, label="target")
ax_fit.plot(x_test, pred_test, color="crimson", lw=1.5, ls="--", label="MoE fit")
ax_fit.legend(fontsize=8)
ax_fit.set_title("fit and routing after training")
im = ax_map.imshow(
    dense_w.T.numpy(),
    aspect="auto",
    cmap="viridis",
    extent=(-3.0, 3.0, num_experts - 0.5, -0.5),
    vmin=0.0,
    vmax=1.0,
    interpolation="nearest",
)
fig.colorbar(im, ax=ax_map, label="routing weight")
ax_map.set_yticks(range(num_experts))
ax_map.set_ylabel("expert")
ax_map.set_xlabel("x")
plt.show()

# %%
# Where next
# ----------
# * :class:`~sci_moe.moe.RouterConfig` lists every routing option (group-limited
#   routing, capacity dropping, jitter, noisy top-k, auxiliary-loss-free balancing with
#   :meth:`MoE.update_router_bias <sci_moe.moe.MoE.update_router_bias>`).
# * :mod:`sci_moe.testing` documents the reference used above; use it in your own tests.
