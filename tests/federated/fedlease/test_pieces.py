"""Model and clustering pieces of FedLEASE (sci_moe.federated.fedlease)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sci_moe.federated import Client, ClientData
from sci_moe.federated.fedlease import CLSAdaptedLayer, b_matrix_distances, cluster_clients
from tests.conftest import FLOAT_TOLERANCE
from tests.federated.fedlease._tiny import tiny_bert, tiny_clients


def test_cls_layer_is_exact_bert_layer(float_dtype):
    pytest.importorskip("transformers")
    bert = tiny_bert().to(float_dtype)
    ids = torch.randint(0, 40, (3, 7))
    mask = torch.ones(3, 7)
    mask[1, 4:] = 0
    with torch.no_grad():
        out = bert(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    for M in (1, 3):  # B = 0: the adapted layer is the frozen layer, whatever the routing
        layer = CLSAdaptedLayer(bert.encoder.layer[-1], 2, num_experts=M)
        z = layer(*layer.prepare(out.hidden_states[-2], mask), own=M - 1)
        tol = FLOAT_TOLERANCE[float_dtype]
        torch.testing.assert_close(z, out.last_hidden_state[:, 0], atol=tol, rtol=tol)


def test_cls_layer_rejects_non_bert():
    with pytest.raises(TypeError, match="BERT encoder layer"):
        CLSAdaptedLayer(torch.nn.Linear(4, 4), 2)


def test_one_expert_model_is_plain_lora():
    spec, clients = tiny_clients(2, 1, n=6)
    model = spec.build(3, seed=1)
    with torch.no_grad():
        for lin in model.encoder.adapted.values():
            lin.experts.lora_b.normal_()
    single = spec.build(1)
    single.load_expert_state(0, model.expert_state(2))
    d = clients[0].data
    inputs = single.prepare(d.hidden_train, d.mask_train)
    # the M = 1 router is the identity gate: the plain LoRA of expert 2 ...
    h = inputs[0][:, 0]
    q = single.encoder.query
    lora = q.experts
    manual = lora.base_layer(h) + lora.scale * h @ lora.lora_a[0].t() @ lora.lora_b[0].t()
    torch.testing.assert_close(q(h, own=0), manual)
    assert single(*inputs, own=0).shape == (6, 2)


def test_gradient_mask_freezes_other_experts():
    spec, clients = tiny_clients(2, 1, n=8)
    model = spec.build(3, seed=0)
    with torch.no_grad():
        for lin in model.encoder.adapted.values():
            lin.experts.lora_b.normal_()
    before = [model.expert_state(e) for e in range(3)]
    params = model.trainable_parameters(own=1, train_router=True)
    opt = torch.optim.Adam(params, lr=0.1)
    d = clients[0].data
    loss = torch.nn.functional.cross_entropy(
        model(*model.prepare(d.hidden_train, d.mask_train), own=1), d.y_train
    )
    loss.backward()
    opt.step()
    after = [model.expert_state(e) for e in range(3)]
    for e in (0, 2):
        for k in before[e]:
            assert torch.equal(before[e][k], after[e][k]), (e, k)
    assert not torch.equal(before[1]["query.lora_b"], after[1]["query.lora_b"])


def _planted_b(n_per: int, k: int, seed: int, noise: float = 0.3):
    g = torch.Generator().manual_seed(seed)
    centres = [
        {"q": torch.randn(8, 2, generator=g), "v": torch.randn(8, 2, generator=g)} for _ in range(k)
    ]
    bs, truth = [], []
    for c in range(k):
        for _ in range(n_per):
            bs.append(
                {n: t + noise * torch.randn(t.shape, generator=g) for n, t in centres[c].items()}
            )
            truth.append(c)
    return bs, np.array(truth)


@pytest.mark.parametrize("k", [2, 3, 4])
def test_clustering_recovers_planted_clusters(k):
    from sklearn.metrics import adjusted_rand_score

    bs, truth = _planted_b(3, k, seed=k)
    d = b_matrix_distances(bs)
    assert np.allclose(d, d.T) and np.allclose(np.diag(d), 0) and d.max() <= 2
    res = cluster_clients(d, max_clusters=6)
    assert res.num_clusters == k
    assert adjusted_rand_score(truth, res.labels) == 1.0
    assert set(res.silhouette) == set(range(2, min(6, 3 * k - 1) + 1))


def test_distance_is_scale_invariant_and_errors():
    bs, _ = _planted_b(2, 2, seed=0)
    scaled = [{n: 5.0 * t for n, t in b.items()} for b in bs]
    np.testing.assert_allclose(b_matrix_distances(bs), b_matrix_distances(scaled), atol=1e-12)
    with pytest.raises(ValueError, match="at least two"):
        b_matrix_distances(bs[:1])
    with pytest.raises(ValueError, match="layers"):
        b_matrix_distances([bs[0], {"q": bs[1]["q"]}])
    with pytest.raises(ValueError, match="at least 3"):
        cluster_clients(np.zeros((2, 2)), 2)
    with pytest.raises(ValueError, match="max_clusters"):
        cluster_clients(np.zeros((4, 4)), 1)


def test_client_with_nan_inputs_is_refused_naming_it():
    spec, clients = tiny_clients(n_clients=1)
    d = clients[0].data
    h = d.hidden_train.clone()
    h[5, 2, 0] = float("nan")
    bad = ClientData(h, d.mask_train, d.y_train, d.hidden_test, d.mask_test, d.y_test)
    with pytest.raises(ValueError, match=r"^client 7: hidden_train has NaN or inf in 1 of 24 "):
        Client(7, bad, spec)
    m = d.mask_test.clone()
    m[0, 0] = float("inf")
    bad = ClientData(d.hidden_train, d.mask_train, d.y_train, d.hidden_test, m, d.y_test)
    with pytest.raises(ValueError, match=r"client 3: mask_test .* first is example 0"):
        Client(3, bad, spec)
