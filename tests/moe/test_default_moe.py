import pytest
import torch

from sci_moe.moe import MoE
from sci_moe.testing import reference_moe_forward, reference_routing


def _naive_default(moe, x, ema_before, beta, scored=False):
    """Direct computation of Eqs. 10-11: EMA from routed outputs, then dense mixture."""
    idx, _ = reference_routing(moe, x)
    probs = torch.softmax(x @ moe.router.weight.T, -1)
    E = moe.num_experts
    ema = ema_before.clone()
    for e in range(E):
        rows = [t for t in range(x.shape[0]) if e in idx[t].tolist()]
        if not rows:
            continue
        outs = torch.stack([moe.experts.forward_expert(e, x[t : t + 1])[0] for t in rows])
        if scored:
            p = probs[rows, e].unsqueeze(-1)
            mean = (p * outs).sum(0) / p.sum()
        else:
            mean = outs.mean(0)
        ema[e] = beta * ema[e] + (1 - beta) * mean.detach()
    y = reference_moe_forward(moe, x)
    extra = []
    for t in range(x.shape[0]):
        others = [e for e in range(E) if e not in idx[t].tolist()]
        extra.append(sum((probs[t, e] * ema[e] for e in others), torch.zeros_like(y[0])))
    return y + torch.stack(extra), ema


@pytest.mark.parametrize("scored", [False, True])
def test_output_and_ema_match_direct_computation(scored, float_dtype):
    moe = MoE(
        d_model=8,
        num_experts=6,
        top_k=2,
        d_hidden=8,
        default_moe=True,
        default_beta=0.7,
        default_scored=scored,
        normalize=False,
    ).to(float_dtype)
    moe.train()
    ema0 = torch.randn(6, 8)
    moe.default.ema.copy_(ema0)
    x = torch.randn(15, 8)
    y_want, ema_want = _naive_default(moe, x, ema0, 0.7, scored)
    y = moe(x)
    torch.testing.assert_close(moe.default.ema, ema_want)
    torch.testing.assert_close(y, y_want)


def test_router_gets_dense_gradient_experts_do_not():
    torch.manual_seed(3)
    moe = MoE(
        d_model=8,
        num_experts=6,
        top_k=1,
        d_hidden=8,
        default_moe=True,
        default_beta=0.0,
        normalize=False,
    ).double()
    x = torch.randn(10, 8, dtype=torch.float64)
    moe.train()
    moe(x)  # fill the EMA
    ema = moe.default.ema.clone()
    moe.default.beta = 0.999999  # freeze the EMA for the gradient check
    g = torch.randn(10, 8, dtype=torch.float64)
    (moe(x) * g).sum().backward()
    got = moe.router.weight.grad.clone()
    # direct: d/dW of sum(g * [sparse + sum_{i not in A} pi_i ema_i])
    moe.zero_grad()
    y_sparse = reference_moe_forward(moe, x)
    probs = torch.softmax(x @ moe.router.weight.T, -1)
    idx, _ = reference_routing(moe, x)
    mask = torch.ones_like(probs).scatter(1, idx, 0.0)
    y = y_sparse + (probs * mask) @ ema
    (y * g).sum().backward()
    torch.testing.assert_close(got, moe.router.weight.grad, atol=1e-6, rtol=1e-6)
    # dense: every expert's score gets gradient, not only the selected one
    assert (mask.sum(1) == 5).all()


def test_no_effect_at_inference_unless_asked():
    moe = MoE(d_model=8, num_experts=4, top_k=1, default_moe=True)
    moe.default.ema.normal_()
    plain = MoE(d_model=8, num_experts=4, top_k=1)
    plain.load_state_dict(moe.state_dict(), strict=False)
    x = torch.randn(5, 8)
    moe.eval()
    plain.eval()
    torch.testing.assert_close(moe(x), plain(x))
    moe.default.at_inference = True
    assert not torch.allclose(moe(x), plain(x))


def test_ema_in_state_dict_and_zero_init():
    moe = MoE(d_model=8, num_experts=4, top_k=1, default_moe=True)
    assert "default.ema" in moe.state_dict()
    assert moe.default.ema.abs().sum() == 0


def test_bad_beta():
    with pytest.raises(ValueError, match="default_beta"):
        MoE(d_model=8, num_experts=4, default_moe=True, default_beta=1.0)
