import pytest
import torch

from sci_moe.vrp import generate_instances
from sci_moe.vrp.moses import MoSESLinear, MTVRPPolicy, PolicyConfig, stage_parameters

FLAGS = torch.tensor([[1, 0, 0, 1], [0, 0, 0, 0], [1, 1, 1, 1], [0, 1, 0, 0]], dtype=torch.bool)


@pytest.mark.parametrize("score", ["sigmoid", "softmax", "norm_softplus"])
@pytest.mark.parametrize("routing", ["exact", "dense"])
def test_lora_experts_at_zero_equal_the_backbone(score, routing, float_dtype):
    layer = MoSESLinear(6, 5, rank=3, gate_score=score, routing=routing)
    x = torch.randn(4, 7, 6)
    f = FLAGS[:, None, :]
    y0 = layer(x, flags=f)
    for mode in ("expert", "gated"):
        layer.mode = mode
        torch.testing.assert_close(layer(x, flags=f), y0)
    # nonzero B changes exactly the tokens whose experts are active (exact routing)
    with torch.no_grad():
        layer.experts.lora_b[1].normal_()  # the B expert
    layer.mode = "expert"
    diff = (layer(x, flags=f) - y0).abs().amax(dim=(1, 2))
    assert diff[1] == 0 and diff[0] == 0 and diff[2] > 0 and diff[3] > 0


@pytest.mark.parametrize("score", ["sigmoid", "softmax", "norm_softplus"])
def test_gate_shapes_and_sums(score):
    layer = MoSESLinear(6, 5, rank=3, gate_score=score, routing="exact")
    torch.nn.init.normal_(layer.router.weight)
    layer.mode = "gated"
    layer(torch.randn(4, 7, 6), flags=FLAGS[:, None, :])
    a = layer.last_gate
    assert a.shape == (4, 7, 5)
    allowed = torch.cat([torch.ones(4, 1, dtype=torch.bool), FLAGS], 1)[:, None, :].expand(
        -1, 7, -1
    )
    assert (a[~allowed] == 0).all() and (a[allowed] > 0).all()
    if score == "sigmoid":
        assert (a <= 2).all()
    else:  # weights sum to the number of allowed entries (uniform at zero logits)
        torch.testing.assert_close(a.sum(-1), allowed.sum(-1).to(a.dtype))
    dense = MoSESLinear(6, 5, rank=3, gate_score=score, routing="dense")
    dense.mode = "gated"
    dense(torch.randn(4, 7, 6), flags=FLAGS[:, None, :])
    assert (dense.last_gate > 0).all()


def test_stage_parameters_and_errors():
    pol = MTVRPPolicy(PolicyConfig(d_model=16, num_heads=2, num_layers=1, d_ff=16, rank=2))
    counts = {
        s: sum(p.numel() for p in stage_parameters(pol, s)) for s in ("backbone", "expert", "gated")
    }
    total = sum(p.numel() for p in pol.parameters())
    assert sum(counts.values()) == total and min(counts.values()) > 0
    assert pol.mode == "gated"
    ins = generate_instances(2, 6, ["VRPTW", "OVRPB"], seed=0)
    _, logp, _ = pol(ins, num_starts=3)
    logp.sum().backward()
    for p in pol.parameters():
        assert (p.grad is not None) == p.requires_grad
    with pytest.raises(ValueError, match="mode"):
        pol.mode = "nope"
    with pytest.raises(ValueError, match="gate_score"):
        MoSESLinear(3, 3, gate_score="relu")
    with pytest.raises(ValueError, match="divisible"):
        PolicyConfig(d_model=10, num_heads=4)
    with pytest.raises(ValueError, match="num_starts"):
        pol(ins, num_starts=7)
    plain = MTVRPPolicy(PolicyConfig(d_model=16, num_heads=2, num_layers=1, d_ff=16, rank=0))
    assert sum(p.numel() for p in plain.parameters()) == counts["backbone"]
