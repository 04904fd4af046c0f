import pytest
import torch

from sci_moe.moe import Router, RouterConfig


def test_topk_shapes_and_normalisation(float_dtype):
    r = Router(d_model=8, num_experts=6, top_k=3)(torch.randn(10, 8))
    assert r.indices.shape == (10, 3) and r.weights.shape == (10, 3)
    assert r.probs.shape == r.logits.shape == (10, 6)
    torch.testing.assert_close(r.weights.sum(-1), torch.ones(10, dtype=r.weights.dtype))
    assert r.load.sum() == 30
    # the selected experts are the 3 best scores
    best = r.probs.topk(3, -1).indices.sort(-1).values
    assert torch.equal(best, r.indices.sort(-1).values)


def test_router_dtype_at_least_float32():
    router = Router(d_model=8, num_experts=4, top_k=1).to(torch.bfloat16)
    r = router(torch.randn(5, 8, dtype=torch.bfloat16))
    assert r.logits.dtype == torch.float32


def test_selection_bias_changes_selection_not_weights():
    router = Router(d_model=8, num_experts=4, top_k=1, selection_bias=True, normalize=False)
    x = torch.randn(50, 8)
    router.expert_bias[:] = torch.tensor([0.0, 0.0, 0.0, 10.0])
    r = router(x)
    assert (r.indices == 3).all()
    torch.testing.assert_close(r.weights[:, 0], r.probs[:, 3])


def test_update_bias_rule():
    router = Router(d_model=4, num_experts=4, top_k=1, selection_bias=True, bias_update_rate=0.1)
    router.update_bias(torch.tensor([10.0, 0.0, 5.0, 5.0]))
    torch.testing.assert_close(router.expert_bias, torch.tensor([-0.1, 0.1, 0.0, 0.0]))
    with pytest.raises(ValueError, match="selection_bias"):
        Router(d_model=4, num_experts=4, top_k=1).update_bias(torch.zeros(4))


def test_group_limited_only_allowed_groups():
    router = Router(d_model=8, num_experts=8, top_k=2, score="sigmoid", num_groups=4, topk_groups=1)
    r = router(torch.randn(30, 8))
    groups = r.indices // 2
    assert (groups[:, 0] == groups[:, 1]).all()


def test_expert_choice_respects_capacity():
    router = Router(d_model=8, num_experts=4, top_k=2, mode="expert_choice", capacity_factor=1.0)
    r = router(torch.randn(16, 8))
    assert torch.equal(r.load, torch.full((4,), float(router.capacity(16))))
    assert ((r.indices == 4) == (r.weights == 0)).all()


def test_capacity_drops_later_slots_first():
    router = Router(d_model=8, num_experts=4, top_k=2, capacity_factor=0.25)
    r = router(torch.randn(32, 8))
    cap = router.capacity(32)
    assert (r.load <= cap).all()
    dropped = r.indices == 4
    assert (r.weights[dropped] == 0).all()
    assert dropped.any()
    # slot 0 has priority: an expert that drops a slot-0 assignment keeps no slot-1 one
    chosen = router.select(r.probs)
    for e in range(4):
        slot0_dropped = (dropped[:, 0] & (chosen[:, 0] == e)).any()
        slot1_kept = (~dropped[:, 1] & (chosen[:, 1] == e)).any()
        assert not (slot0_dropped and slot1_kept)


def test_dense_routing_uses_every_expert():
    r = Router(d_model=8, num_experts=5, mode="dense")(torch.randn(7, 8))
    assert r.indices.shape == (7, 5)
    torch.testing.assert_close(r.weights, r.probs)


def test_noise_and_jitter_only_in_training():
    router = Router(d_model=8, num_experts=4, top_k=2, jitter=0.5, noise_std=1.0)
    x = torch.randn(20, 8)
    router.eval()
    a, b = router(x), router(x)
    assert torch.equal(a.logits, b.logits)
    router.train()
    assert not torch.equal(router(x).logits, a.logits)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(num_experts=4, top_k=5), "top_k=5"),
        (dict(num_experts=4, top_k=0), "top_k=0"),
        (dict(num_experts=4, score="relu"), "score"),
        (dict(num_experts=4, mode="hash"), "mode"),
        (dict(num_experts=6, num_groups=4), "divide"),
        (dict(num_experts=4, mode="expert_choice"), "capacity_factor"),
        (dict(num_experts=0), "num_experts"),
        (dict(num_experts=8, top_k=4, num_groups=4, topk_groups=1), "topk_groups"),
    ],
)
def test_bad_config(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RouterConfig(d_model=8, **kwargs)


@pytest.mark.parametrize(
    "kw",
    [
        dict(score="sigmoid", num_groups=2, topk_groups=1),
        dict(num_groups=4, topk_groups=2, selection_bias=True),
        dict(mode="expert_choice", capacity_factor=1.0),
        dict(capacity_factor=0.5),
        dict(mode="dense"),
    ],
    ids=["groups_sigmoid", "groups_bias", "expert_choice", "capacity", "dense"],
)
def test_zero_tokens(kw):
    """Issue 27: 0 tokens (e.g. an expert-parallel rank without tokens) route to nothing."""
    router = Router(d_model=8, num_experts=8, top_k=2, **kw)
    r = router(torch.zeros(0, 8))
    assert r.indices.shape[0] == r.weights.shape[0] == 0
    assert r.probs.shape == r.logits.shape == (0, 8)
    assert torch.equal(r.load, torch.zeros(8))
    if router.config.capacity_factor is not None:
        assert router.capacity(0) == 0


def test_config_rejects_non_integers_and_non_finite():
    with pytest.raises(ValueError, match="top_k must be an integer"):
        Router(d_model=8, num_experts=4, top_k=1.5)
    with pytest.raises(ValueError, match="num_groups must be an integer"):
        Router(d_model=8, num_experts=4, num_groups=2.0)
    with pytest.raises(ValueError, match="capacity_factor must be finite"):
        Router(d_model=8, num_experts=4, capacity_factor=float("inf"))
    with pytest.raises(ValueError, match="noise_std must be finite"):
        Router(d_model=8, num_experts=4, noise_std=float("nan"))
