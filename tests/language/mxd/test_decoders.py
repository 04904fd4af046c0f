"""Sparse layer decompositions (MxD, transcoder, skip-transcoder): efficient form == MoE form ==
naive per-expert loop (outputs and every gradient, float32 and float64), the GLU-as-rank-1-MoE
identity, exact parameter matching, the normalised MSE and bad input."""

import pytest
import torch
from torch import nn

from sci_moe.language.mxd import (
    DECOMPOSITION_KINDS,
    DecompositionOutput,
    MixtureOfDecoders,
    SkipTranscoder,
    Transcoder,
    decomposition_parameters,
    match_decomposition_sizes,
    normalized_mse,
)
from sci_moe.testing import reference_decomposition_forward
from tests.conftest import FLOAT_TOLERANCE


def _randomise(layer: nn.Module, seed: int = 0) -> nn.Module:
    """Non-zero values everywhere (the zero-initialised D / W_dec / W_skip / biases would make
    most gradients trivially 0)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    return layer


def _grads(out, params, g):
    return torch.autograd.grad((out * g).sum(), params, allow_unused=False)


def _mxd(**kw):
    kw = {"d_in": 6, "d_out": 5, "num_experts": 17, "top_k": 4, "d_hidden": 7, **kw}
    return _randomise(MixtureOfDecoders(**kw))


def _check_against_reference(layer, x, tol, forms=("forward",)):
    params = [x, *layer.parameters()]
    y_ref, v_ref, i_ref = reference_decomposition_forward(layer, x)
    g = torch.randn(y_ref.shape, generator=torch.Generator().manual_seed(3))
    grads_ref = _grads(y_ref, params, g)
    for form in forms:
        out = getattr(layer, form)(x)
        assert isinstance(out, DecompositionOutput)
        assert out.y.dtype == x.dtype
        torch.testing.assert_close(out.y, y_ref, atol=tol, rtol=tol)
        torch.testing.assert_close(out.values, v_ref, atol=tol, rtol=tol)
        pos = v_ref > 0  # ties at 0 may be ordered differently
        assert torch.equal(out.indices[pos], i_ref[pos])
        for a, b in zip(_grads(out.y, params, g), grads_ref, strict=True):
            torch.testing.assert_close(a, b, atol=tol, rtol=tol)


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_mxd_efficient_form_equals_moe_form_equals_naive_loop(float_dtype, activation):
    layer = _mxd(activation=activation)
    x = torch.randn(9, 6, requires_grad=True)
    _check_against_reference(
        layer, x, FLOAT_TOLERANCE[float_dtype] * 10, forms=("forward", "moe_form")
    )


def test_mxd_k_equals_n_and_sparse_gate(float_dtype):
    # k = N (every expert, zeros included) and a batch where many gates are exactly 0
    layer = _mxd(num_experts=5, top_k=5)
    with torch.no_grad():
        layer.gate.bias.fill_(-1.0)
    x = torch.randn(8, 6, requires_grad=True)
    _check_against_reference(
        layer, x, FLOAT_TOLERANCE[float_dtype] * 10, forms=("forward", "moe_form")
    )


@pytest.mark.parametrize("cls", [Transcoder, SkipTranscoder])
def test_transcoders_match_naive_loop(float_dtype, cls):
    layer = _randomise(cls(d_in=6, d_out=5, d_latent=23, top_k=3))
    x = torch.randn(9, 6, requires_grad=True)
    _check_against_reference(layer, x, FLOAT_TOLERANCE[float_dtype] * 10)


def test_leading_dims_dense_code_and_routing():
    layer = _mxd()
    x = torch.randn(2, 3, 6)
    out = layer(x)
    assert out.y.shape == (2, 3, 5) and out.indices.shape == (2, 3, 4)
    flat = layer(x.reshape(6, 6))
    torch.testing.assert_close(out.y.reshape(6, 5), flat.y)
    dense = out.dense_code()
    assert dense.shape == (2, 3, 17)
    assert int((dense != 0).sum(-1).max()) <= 4
    torch.testing.assert_close(dense.sum(-1), out.values.sum(-1))
    r = out.routing()
    assert r.num_experts == 17 and r.indices.shape == (6, 4)
    assert float(r.load.sum()) == 24.0
    # an empty batch is fine
    assert layer(torch.randn(0, 6)).y.shape == (0, 5)


def test_glu_is_an_moe_of_rank_one_experts(float_dtype):
    """A GLU ``relu(G^T x + b_g) * (D^T z)`` is MxD with C = I and k = N = d_out: an MoE whose
    experts ``D diag(e_n)`` have rank 1 (the public code's glus-to-moes.ipynb)."""
    tol = FLOAT_TOLERANCE[float_dtype] * 10
    O = 5
    layer = _mxd(num_experts=O, top_k=O, normalize_experts=False)
    with torch.no_grad():
        layer.C.copy_(torch.eye(O))
        layer.bias.zero_()
    x = torch.randn(7, 6)
    z = layer.activation(layer.encoder(x))
    glu = torch.relu(layer.gate(x)) * (z @ layer.D)
    torch.testing.assert_close(layer(x).y, glu, atol=tol, rtol=tol)
    torch.testing.assert_close(layer.moe_form(x).y, glu, atol=tol, rtol=tol)
    for n in range(O):
        assert int(torch.linalg.matrix_rank(layer.expert_weight(n))) == 1
    # a generic MxD expert has the rank of D (full rank min(H, O) here)
    generic = _mxd()
    for n in range(3):
        assert int(torch.linalg.matrix_rank(generic.expert_weight(n))) == min(7, 5)


def test_initialisation_follows_the_public_code():
    layer = MixtureOfDecoders(d_in=6, d_out=5, num_experts=40, top_k=3)
    assert layer.d_hidden == 24  # H = 4 d_in
    assert float(layer.D.detach().abs().max()) == 0.0
    assert float(layer.gate.bias.detach().abs().max()) == 0.0
    torch.testing.assert_close(layer.C.norm(dim=1), torch.ones(40))
    out = layer(torch.randn(4, 6))
    assert float(out.y.detach().abs().max()) == 0.0  # D = 0, bias = 0
    skip = SkipTranscoder(d_in=6, d_out=5, d_latent=10, top_k=2)
    assert (
        float(skip.W_dec.detach().abs().max()) == 0.0
        and float(skip.W_skip.detach().abs().max()) == 0.0
    )
    tc = Transcoder(d_in=6, d_out=5, d_latent=10, top_k=2, normalize_decoder=True)
    assert all(p.is_contiguous() for p in [*tc.parameters(), *skip.parameters()])
    torch.testing.assert_close(tc.W_dec.norm(dim=1), torch.ones(10))


def test_unit_norm_projection_helpers():
    layer = _mxd()
    layer(torch.randn(5, 6)).y.sum().backward()
    layer.renormalize_()
    torch.testing.assert_close(layer.C.norm(dim=1), torch.ones(17))
    layer.remove_parallel_grad_()
    parallel = (layer.C.grad * layer.C).sum(-1)
    torch.testing.assert_close(parallel, torch.zeros(17), atol=1e-5, rtol=0)
    tc = _randomise(Transcoder(6, 5, d_latent=11, top_k=3, normalize_decoder=True))
    tc.renormalize_()
    tc(torch.randn(5, 6)).y.sum().backward()
    tc.remove_parallel_grad_()
    parallel = (tc.W_dec.grad * tc.W_dec).sum(-1)
    torch.testing.assert_close(parallel, torch.zeros(11), atol=1e-5, rtol=0)
    assert (layer.num_units, tc.num_units) == (17, 11)


@pytest.mark.parametrize("d_in,d_out", [(6, 5), (16, 16)])
def test_parameter_counts_are_exact(d_in, d_out):
    for h, n in ((7, 17), (None, 30)):
        layer = MixtureOfDecoders(d_in, d_out, num_experts=n, top_k=2, d_hidden=h)
        sizes = {"num_experts": n} if h is None else {"num_experts": n, "d_hidden": h}
        count = decomposition_parameters("mxd", d_in, d_out, **sizes)
        assert count == sum(p.numel() for p in layer.parameters()) == layer.num_parameters()
    for kind, cls in (("transcoder", Transcoder), ("skip_transcoder", SkipTranscoder)):
        layer = cls(d_in, d_out, d_latent=19, top_k=2)
        count = decomposition_parameters(kind, d_in, d_out, d_latent=19)
        assert count == sum(p.numel() for p in layer.parameters())


def test_matched_sizes():
    s = match_decomposition_sizes(768, 768)
    assert (s.budget, s.d_hidden, s.num_experts, s.d_latent) == (37774080, 3072, 21504, 24576)
    assert s.parameters["mxd"] == s.parameters["transcoder"] == s.budget
    assert s.budget - 1537 < s.parameters["skip_transcoder"] <= s.budget
    small = match_decomposition_sizes(6, 5, latent_multiplier=8)
    for kind in DECOMPOSITION_KINDS:
        layer = small.build(kind, top_k=2)
        assert sum(p.numel() for p in layer.parameters()) == small.parameters[kind]
        assert small.parameters[kind] <= small.budget
    assert small.parameters["mxd"] == small.budget
    custom = match_decomposition_sizes(6, 5, budget=1000, d_hidden=3)
    assert custom.parameters["mxd"] <= 1000 < custom.parameters["mxd"] + 12
    assert custom.d_hidden == 3


def test_normalized_mse_is_per_token_sum_over_the_norm(float_dtype):
    g = torch.Generator().manual_seed(0)
    y = torch.randn(4, 3, 5, generator=g, requires_grad=True)
    t = torch.randn(4, 3, 5, generator=g)
    naive = torch.stack(
        [
            sum((y[i, j, o] - t[i, j, o]) ** 2 for o in range(5)) / torch.sqrt((t[i, j] ** 2).sum())
            for i in range(4)
            for j in range(3)
        ]
    )
    tol = FLOAT_TOLERANCE[float_dtype]
    torch.testing.assert_close(normalized_mse(y, t, "none").reshape(-1), naive, atol=tol, rtol=tol)
    torch.testing.assert_close(normalized_mse(y, t), naive.mean(), atol=tol, rtol=tol)
    torch.testing.assert_close(normalized_mse(y, t, "sum"), naive.sum(), atol=tol, rtol=tol)
    public = ((y - t) ** 2 / (t**2).sum(-1, keepdim=True).sqrt()).mean()
    got = normalized_mse(y, t, "elementwise_mean")
    torch.testing.assert_close(got, public, atol=tol, rtol=tol)
    g1 = torch.autograd.grad(normalized_mse(y, t), y)[0]
    g2 = torch.autograd.grad(naive.mean(), y)[0]
    torch.testing.assert_close(g1, g2, atol=tol, rtol=tol)
    assert torch.isfinite(normalized_mse(y, torch.zeros_like(t)))


def test_bad_input_raises_clear_errors():
    with pytest.raises(ValueError, match="top_k=8 must be between 1 and the number of experts"):
        MixtureOfDecoders(6, 5, num_experts=7, top_k=8)
    with pytest.raises(ValueError, match="latents"):
        Transcoder(6, 5, d_latent=3, top_k=4)
    with pytest.raises(ValueError, match="num_experts must be >= 1"):
        MixtureOfDecoders(6, 5, num_experts=0, top_k=1)
    with pytest.raises(ValueError, match="integer"):
        MixtureOfDecoders(6, 5, num_experts=10.5, top_k=1)
    with pytest.raises(ValueError, match="unknown activation"):
        MixtureOfDecoders(6, 5, num_experts=10, top_k=1, activation="relu6")
    layer = _mxd()
    with pytest.raises(ValueError, match=r"shape \(\.\.\., 6\)"):
        layer(torch.randn(3, 5))
    with pytest.raises(ValueError, match="dtype"):
        layer(torch.randn(3, 6, dtype=torch.float64))
    with pytest.raises(TypeError, match="floating"):
        layer(torch.ones(3, 6, dtype=torch.long))
    with pytest.raises(TypeError, match=r"torch\.Tensor"):
        layer([[0.0] * 6])
    with pytest.raises(ValueError, match="pass fewer tokens"):
        layer.moe_form(torch.randn(3, 6), max_weight_elements=100)
    with pytest.raises(ValueError, match="out of range"):
        layer.expert_weight(17)
    with pytest.raises(ValueError, match="kind"):
        decomposition_parameters("sae", 6, 5, d_latent=3)
    with pytest.raises(ValueError, match="takes the sizes"):
        decomposition_parameters("transcoder", 6, 5, num_experts=3)
    with pytest.raises(ValueError, match="needs num_experts"):
        decomposition_parameters("mxd", 6, 5)
    with pytest.raises(ValueError, match="raise the budget"):
        match_decomposition_sizes(6, 5, budget=50)
    with pytest.raises(ValueError, match="same shape"):
        normalized_mse(torch.zeros(2, 3), torch.zeros(2, 4))
    with pytest.raises(ValueError, match="reduction"):
        normalized_mse(torch.zeros(2, 3), torch.zeros(2, 3), "max")
    with pytest.raises(TypeError, match="MixtureOfDecoders"):
        reference_decomposition_forward(nn.Linear(6, 5), torch.zeros(2, 6))
