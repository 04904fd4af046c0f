"""Mamba block: generation with a constant-size state, scan choices, bad input."""

import pytest
import torch

from sci_moe.language.mamba import MambaBlock, MambaConfig


def test_stepwise_generation_equals_full_forward(float_dtype):
    torch.manual_seed(0)
    block = MambaBlock(d_model=12, d_state=4, d_conv=3, bias=True)
    x = torch.randn(2, 9, 12)
    y, final = block(x, return_state=True)
    state = block.initial_state(2)
    outs = []
    for t in range(9):
        o, state = block.step(x[:, t], state)
        assert state.ssm.shape == (2, 24, 4) and state.conv.shape == (2, 24, 2)
        outs.append(o)
    tol = 1e-5 if float_dtype == torch.float32 else 1e-12
    torch.testing.assert_close(torch.stack(outs, 1), y, atol=tol, rtol=tol)
    torch.testing.assert_close(state.ssm, final.ssm, atol=tol, rtol=tol)
    # prefill in two pieces == one piece
    y1, s1 = block(x[:, :4], return_state=True)
    y2 = block(x[:, 4:], state=s1)
    torch.testing.assert_close(torch.cat([y1, y2], 1), y, atol=tol, rtol=tol)


def test_parallel_and_reference_blocks_agree_with_gradients():
    torch.manual_seed(1)
    fast = MambaBlock(d_model=8, d_state=3, chunk_size=4).double()
    ref = MambaBlock(MambaConfig(d_model=8, d_state=3, scan="reference")).double()
    ref.load_state_dict(fast.state_dict())
    x = torch.randn(2, 11, 8, dtype=torch.float64)
    yf, yr = fast(x), ref(x)
    torch.testing.assert_close(yf, yr)
    gf = torch.autograd.grad(yf.square().sum(), list(fast.parameters()))
    gr = torch.autograd.grad(yr.square().sum(), list(ref.parameters()))
    for a, b in zip(gf, gr, strict=True):
        torch.testing.assert_close(a, b)


def test_config_and_input_errors():
    with pytest.raises(ValueError, match="d_state"):
        MambaConfig(d_model=8, d_state=0)
    with pytest.raises(ValueError, match="expand"):
        MambaConfig(d_model=8, expand=1.5)
    with pytest.raises(ValueError, match="dt_min"):
        MambaConfig(d_model=8, dt_min=0.5, dt_max=0.1)
    with pytest.raises(ValueError, match="scan"):
        MambaConfig(d_model=8, scan="fft")
    assert MambaConfig(d_model=40).dt_rank == 3
    block = MambaBlock(d_model=8, d_state=3)
    with pytest.raises(ValueError, match="hidden_states must have shape"):
        block(torch.randn(2, 5, 7))
    with pytest.raises(ValueError, match="state does not fit"):
        block(torch.randn(2, 5, 8), state=block.initial_state(3))
    with pytest.raises(ValueError, match="token must have shape"):
        block.step(torch.randn(2, 1, 8), block.initial_state(2))
