"""A seeded :class:`~sci_moe.moe.ResidualMLPExperts` and its expert written out by hand."""

from __future__ import annotations

import math

import torch

from sci_moe.moe import ResidualMLPExperts

NAMES = ("weight", "bias", "ln_weight", "ln_bias")


@torch.no_grad()
def residual_bank(E=4, d=6, L=2, seed=0, activation="leaky_relu", dtype=None):
    """A bank whose every tensor is drawn from its own generator (no global RNG state).

    Non-trivial biases and LayerNorm affines; ``dtype`` defaults to the default dtype.
    """
    g = torch.Generator().manual_seed(seed)
    dtype = torch.get_default_dtype() if dtype is None else dtype
    bank = ResidualMLPExperts(E, d, L, activation).to(dtype)
    bound = math.sqrt(6.0 / (2 * d))
    bank.weight.copy_((torch.rand(bank.weight.shape, generator=g, dtype=dtype) * 2 - 1) * bound)
    bank.bias.copy_(0.3 * torch.randn(bank.bias.shape, generator=g, dtype=dtype))
    bank.ln_weight.copy_(1 + 0.3 * torch.randn(bank.ln_weight.shape, generator=g, dtype=dtype))
    bank.ln_bias.copy_(0.3 * torch.randn(bank.ln_bias.shape, generator=g, dtype=dtype))
    return bank


def leaky(z):
    return torch.nn.functional.leaky_relu(z, 0.5)


def naive_expert(theta, x, act=leaky, eps=1e-5):
    """One residual-MLP expert from its formula (no bank code): ``theta`` maps NAMES to tensors."""
    h = x
    for layer in range(theta["weight"].shape[0]):
        z = act(h @ theta["weight"][layer].T + theta["bias"][layer]) + h
        mu = z.mean(-1, keepdim=True)
        var = ((z - mu) ** 2).mean(-1, keepdim=True)
        h = (z - mu) / torch.sqrt(var + eps) * theta["ln_weight"][layer] + theta["ln_bias"][layer]
    return h


def randn(*shape, seed=0, requires_grad=False):
    """A draw in the default dtype from its own generator."""
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(*shape, generator=g, dtype=torch.get_default_dtype())
    return t.requires_grad_(requires_grad)
