"""A tiny BERT-shaped layer and clients of planted tasks for the federated tests.

The layer has the attribute layout of ``transformers``' ``BertLayer`` (built from plain
``nn`` modules, so these tests do not import transformers); ``test_pieces`` checks the
adapted layer against a real tiny ``BertModel``.
"""

from __future__ import annotations

import torch
from torch import nn

from sci_moe.federated import Client, ClientData, TrainConfig
from sci_moe.federated.fedlease import ModelSpec


def tiny_bert(seed: int = 0):
    """A random 2-layer ``transformers.BertModel`` (hidden size 16, 2 heads)."""
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    cfg = BertConfig(
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        vocab_size=40,
        max_position_embeddings=16,
    )
    return BertModel(cfg).eval()


class _Mod(nn.Module):
    def __init__(mod, **children):
        super().__init__()
        for k, v in children.items():
            setattr(mod, k, v)


def bert_like_layer(d: int = 16, ff: int = 32, seed: int = 0) -> nn.Module:
    """Random modules laid out like a ``BertLayer`` (query/key/value, output, FFN)."""
    torch.manual_seed(seed)
    att = _Mod(
        self=_Mod(query=nn.Linear(d, d), key=nn.Linear(d, d), value=nn.Linear(d, d)),
        output=_Mod(dense=nn.Linear(d, d), LayerNorm=nn.LayerNorm(d)),
    )
    return _Mod(
        attention=att,
        intermediate=_Mod(dense=nn.Linear(d, ff), intermediate_act_fn=nn.GELU()),
        output=_Mod(dense=nn.Linear(ff, d), LayerNorm=nn.LayerNorm(d)),
    )


def tiny_clients(n_clients: int = 4, n_tasks: int = 2, n: int = 24, seed: int = 0, faults=None):
    """Clients of ``n_tasks`` planted tasks (client ``i`` has task ``i % n_tasks``).

    Inputs are random token vectors; the label is whether the task's marker vector was
    added to token 3, so the tasks need different LoRA directions.
    """
    d, L = 16, 6
    spec = ModelSpec(bert_like_layer(d, seed=seed), num_attention_heads=2, num_classes=2, rank=2)
    g = torch.Generator().manual_seed(seed)
    markers = torch.randn(n_tasks, d, generator=g) * 2
    faults = faults or {}
    clients = []
    for i in range(n_clients):
        task = i % n_tasks
        h = torch.randn(2 * n, L, d, generator=g)
        y = torch.randint(0, 2, (2 * n,), generator=g)
        h[y == 1, 3] += markers[task]
        mask = torch.ones(2 * n, L)
        mask[::3, L - 1] = 0
        data = ClientData(h[:n], mask[:n], y[:n], h[n:], mask[n:], y[n:])
        train = TrainConfig(lr=1e-2, batch_size=8, seed=seed)
        clients.append(Client(i, data, spec, train, faults.get(i, {})))
    return spec, clients
