"""FedLEASE's routed layer (LoRAMixtureLinear, a RoutedModule) against the naive loop."""

from __future__ import annotations

import pytest
import torch

from sci_moe.moe import RoutedModule
from sci_moe.testing import assert_routed_module
from tests.federated.fedlease._tiny import tiny_clients


@pytest.mark.parametrize("num_experts", [1, 3])
def test_fedlease_model_routed_calls_match_the_naive_loop(num_experts):
    spec, clients = tiny_clients(1, 1, n=5)
    model = spec.build(num_experts, seed=0)
    with torch.no_grad():  # B = 0 at init: give the experts a non-zero update
        for lin in model.encoder.adapted.values():
            assert isinstance(lin, RoutedModule)
            lin.experts.lora_b.normal_(generator=torch.Generator().manual_seed(1))
    d = clients[0].data
    inputs = model.prepare(d.hidden_train, d.mask_train)
    # the query at [CLS] goes through the layer's forward; the value's update is routed
    # by the same layer with its base precomputed (not a RoutedModule call)
    assert assert_routed_module(model, *inputs, own=num_experts - 1) == 1
    lin = model.encoder.query
    h = torch.randn(2, 3, lin.d_model, generator=torch.Generator().manual_seed(2))
    own = torch.arange(6) % num_experts  # a different own expert per token
    assert assert_routed_module(lin, h, own=own) == 1
    assert lin.last_routing.indices.shape == (6, num_experts)
    assert bool((lin.last_routing.indices[:, 0] == own).all())
    # the update-only path (V, whose frozen base is precomputed) is the same routed sum
    v = model.encoder.value
    x = h.reshape(6, -1)
    torch.testing.assert_close(v.update(x, own), v(x, own=own) - v.experts.base_layer(x))
