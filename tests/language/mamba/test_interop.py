"""Our Mamba block == transformers' MambaMixer (its slow, pure-torch path)."""

import pytest
import torch

from sci_moe.language.mamba import config_from_transformers, from_transformers_mixer

transformers = pytest.importorskip("transformers")
from transformers.models.mamba.modeling_mamba import MambaMixer  # noqa: E402


def _mixer(**kw):
    cfg = transformers.MambaConfig(
        hidden_size=16,
        state_size=4,
        conv_kernel=3,
        expand=2,
        time_step_rank=3,
        num_hidden_layers=1,
        **kw,
    )
    torch.manual_seed(0)
    mixer = MambaMixer(cfg, 0)
    with torch.no_grad():  # make every weight matter
        mixer.D.normal_()
        mixer.A_log.add_(0.3 * torch.randn_like(mixer.A_log))
    return mixer


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("train", [False, True])
def test_matches_transformers_mixer(bias, train):
    mixer = _mixer(use_bias=bias, use_conv_bias=True)
    block = from_transformers_mixer(mixer, chunk_size=4)
    x = torch.randn(2, 13, 16)
    mixer.train(train)
    block.train(train)
    xa, xb = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    ya, yb = mixer(xa), block(xb)
    torch.testing.assert_close(yb, ya, atol=1e-5, rtol=1e-5)
    gy = torch.randn_like(ya)
    ga = torch.autograd.grad((ya * gy).sum(), [xa, *mixer.parameters()])
    gb = torch.autograd.grad((yb * gy).sum(), [xb, *block.parameters()])
    names = ["x", *(n for n, _ in block.named_parameters())]
    names_hf = ["x", *(n for n, _ in mixer.named_parameters())]
    grads_hf = dict(zip(names_hf, ga, strict=True))
    for name, g in zip(names, gb, strict=True):
        torch.testing.assert_close(g, grads_hf[name], atol=1e-4, rtol=1e-4, msg=name)


def test_config_conversion_errors():
    cfg = transformers.MambaConfig(hidden_size=16, hidden_act="gelu")
    with pytest.raises(ValueError, match="silu"):
        config_from_transformers(cfg)
    ours = config_from_transformers(transformers.MambaConfig(hidden_size=32, state_size=8))
    assert (ours.d_model, ours.d_state, ours.d_inner) == (32, 8, 64)
    with pytest.raises(TypeError, match="MambaMixer"):
        from_transformers_mixer(torch.nn.Linear(2, 2))
