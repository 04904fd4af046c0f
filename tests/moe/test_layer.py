import pytest
import torch
from torch import nn

from sci_moe.moe import (
    GLUExperts,
    LinearExperts,
    LoRAExperts,
    MoE,
    MoEConfig,
    Router,
    dispatch,
)
from sci_moe.testing import assert_moe_matches_reference


def test_shape_preserved_any_leading_dims():
    moe = MoE(d_model=8, num_experts=4, top_k=2)
    for shape in [(8,), (3, 8), (2, 3, 8), (2, 1, 3, 8)]:
        assert moe(torch.randn(shape)).shape == shape


def test_return_routing_gives_losses_and_routing():
    moe = MoE(d_model=8, num_experts=4, top_k=2, z_loss_coef=1e-3)
    _y, info = moe(torch.randn(2, 5, 8), return_routing=True)
    assert info.routing.indices.shape == (10, 2)
    assert set(info.losses) == {"load_balance", "z_loss"}
    expected = 0.01 * info.losses["load_balance"] + 1e-3 * info.losses["z_loss"]
    torch.testing.assert_close(info.aux_loss, expected)
    info.aux_loss.backward()
    assert moe.router.weight.grad is not None


def test_routing_reused_by_two_banks():
    d, E = 16, 4
    router = Router(d_model=d, num_experts=E, top_k=2)
    scalar = GLUExperts(E, d, 8)
    vector = LinearExperts(E, d, 24)
    x = torch.randn(10, d)
    r = router(x)
    ys, yv = dispatch(x, r, scalar), dispatch(x, r, vector)
    assert ys.shape == (10, d) and yv.shape == (10, 24)
    # the second bank re-used the cached plan
    assert r._plan is not None
    ref = sum(
        r.weights[:, j : j + 1]
        * torch.stack(
            [vector.forward_expert(int(r.indices[t, j]), x[t : t + 1])[0] for t in range(10)]
        )
        for j in range(2)
    )
    torch.testing.assert_close(yv, ref)


def test_from_modules_lora(float_dtype):
    base = nn.Linear(16, 12)
    bank = LoRAExperts(base, num_experts=4, rank=4, alpha=8.0)
    nn.init.normal_(bank.lora_b)
    moe = MoE.from_modules(Router(d_model=16, num_experts=4, top_k=2), bank)
    assert not base.weight.requires_grad
    x = torch.randn(9, 16)
    assert moe(x).shape == (9, 12)
    assert_moe_matches_reference(moe, x=x)


def test_lora_starts_as_base_layer():
    base = nn.Linear(16, 16)
    moe = MoE.from_modules(
        Router(d_model=16, num_experts=4, top_k=2), LoRAExperts(base, num_experts=4, rank=2)
    )
    x = torch.randn(5, 16)
    torch.testing.assert_close(moe(x), base(x))


def test_adapter_starts_at_zero(float_dtype):
    moe = MoE(d_model=16, num_experts=4, top_k=2, expert="adapter", d_hidden=4)
    x = torch.randn(6, 16)
    assert moe(x).abs().max() == 0
    nn.init.normal_(moe.experts.down)
    assert_moe_matches_reference(moe, x=x)


def test_state_dict_round_trip_includes_bias():
    a = MoE(d_model=8, num_experts=4, top_k=2, selection_bias=True)
    a.router.expert_bias.normal_()
    b = MoE(d_model=8, num_experts=4, top_k=2, selection_bias=True)
    b.load_state_dict(a.state_dict())
    x = torch.randn(7, 8)
    torch.testing.assert_close(a(x), b(x))


def test_config_object_and_kwargs_agree():
    torch.manual_seed(1)
    a = MoE(MoEConfig(d_model=8, num_experts=4, top_k=1, router={"score": "sigmoid"}))
    torch.manual_seed(1)
    b = MoE(d_model=8, num_experts=4, top_k=1, score="sigmoid")
    assert a.router.config == b.router.config
    x = torch.randn(3, 8)
    torch.testing.assert_close(a(x), b(x))


@pytest.mark.parametrize(
    "x,exc,match",
    [
        (torch.randn(4, 7), ValueError, r"shape \(\.\.\., 8\)"),
        (torch.tensor([[float("nan")] * 8]), ValueError, "NaN"),
        (torch.ones(2, 8, dtype=torch.int64), TypeError, "floating dtype"),
        (torch.ones(2, 8, dtype=torch.complex64), TypeError, "floating dtype"),
    ],
)
def test_bad_input(x, exc, match):
    moe = MoE(d_model=8, num_experts=4, top_k=2)
    with pytest.raises(exc, match=match):
        moe(x)


def test_bad_options():
    with pytest.raises(ValueError, match="top_k=5"):
        MoE(d_model=8, num_experts=4, top_k=5)
    with pytest.raises(TypeError, match="unknown MoE option"):
        MoE(d_model=8, num_experts=4, topk=2)
    with pytest.raises(ValueError, match="expert must be"):
        MoE(d_model=8, num_experts=4, expert="conv")
    with pytest.raises(ValueError, match="bank has 3"):
        MoE.from_modules(Router(d_model=8, num_experts=4), GLUExperts(3, 8, 8))


def test_dispatch_rejects_mismatched_routing():
    router = Router(d_model=8, num_experts=4, top_k=2)
    r = router(torch.randn(5, 8))
    with pytest.raises(ValueError, match="5 tokens"):
        dispatch(torch.randn(6, 8), r, GLUExperts(4, 8, 8))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_check_finite_one_reduction_is_exact(dtype):
    """The finiteness test sums first: finite inputs whose sum overflows still pass (the
    elementwise fallback), any NaN/Inf (also +Inf and -Inf together) is named."""
    from sci_moe.moe.checks import check_layer_input

    big = torch.finfo(dtype).max
    x = torch.full((4, 8), big, dtype=dtype)
    assert not torch.isfinite(x.sum())
    check_layer_input(x, 8)  # finite: no error
    for bad in ([float("nan")], [float("inf")], [float("-inf")], [float("inf"), float("-inf")]):
        x = torch.randn(4, 8).to(dtype)
        x.view(-1)[5 : 5 + len(bad)] = torch.tensor(bad, dtype=dtype)
        with pytest.raises(ValueError, match=r"NaN or Inf \(first at index \[0, 5\]\)"):
            check_layer_input(x, 8)


def test_check_finite_can_be_switched_off():
    moe = MoE(d_model=8, num_experts=4, top_k=2, check_finite=False)
    x = torch.randn(3, 8)
    x[0, 0] = float("nan")
    assert torch.isnan(moe(x)[0]).any()


def test_empty_batch():
    moe = MoE(d_model=8, num_experts=4, top_k=2)
    x = torch.zeros(0, 8, requires_grad=True)
    y = moe(x)
    assert y.shape == (0, 8)
    y.sum().backward()
    assert x.grad.shape == (0, 8)


# -- issue 27: an empty batch, bad options, a dtype mismatch ----------------------------

# Every router mode (and the options with their own empty-batch code path).
_EMPTY_CASES = {
    "topk": dict(),
    "topk_capacity": dict(capacity_factor=1.0),
    "expert_choice": dict(mode="expert_choice", capacity_factor=1.0),
    "dense": dict(mode="dense"),
    "sigmoid_groups": dict(score="sigmoid", num_groups=2, topk_groups=1, selection_bias=True),
    "noise_jitter": dict(noise_std=0.1, jitter=0.1),
    "specialisation": dict(orthogonality_coef=0.1, variance_coef=0.1),
    "default_moe": dict(default_moe=True, num_shared_experts=1),
}


@pytest.mark.parametrize("case", sorted(_EMPTY_CASES))
@pytest.mark.parametrize("shape", [(0, 8), (3, 0, 8)], ids=["flat", "batched"])
@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
def test_empty_batch_every_mode_zero_losses(case, shape, training):
    kw = dict(_EMPTY_CASES[case], z_loss_coef=1e-3)
    moe = MoE(d_model=8, num_experts=4, top_k=2, **kw).train(training)
    before = moe.default.ema.clone() if moe.default is not None else None
    x = torch.zeros(shape, requires_grad=True)
    y, info = moe(x, return_routing=True)
    assert y.shape == shape
    assert info.routing.num_tokens == 0 and info.routing.load.sum() == 0
    assert set(info.losses) >= {"load_balance", "z_loss"}
    for name, value in info.losses.items():
        v = float(value.detach())
        assert v == 0.0, f"{case}: {name} = {v} for an empty batch"
    assert float(info.aux_loss.detach()) == 0.0
    (y.sum() + info.aux_loss).backward()
    assert x.grad.shape == shape
    for name, p in moe.named_parameters():
        assert p.grad is None or torch.all(p.grad == 0), name
    if before is not None:  # no NaN from a mean over zero tokens in the EMA
        assert torch.equal(moe.default.ema, before)


def test_bad_option_types_and_non_finite_coefficients():
    with pytest.raises(ValueError, match="top_k must be an integer"):
        MoE(d_model=8, num_experts=4, top_k=1.5)
    with pytest.raises(ValueError, match="top_k must be an integer"):
        MoE(d_model=8, num_experts=4, top_k=True)
    with pytest.raises(ValueError, match="num_experts must be an integer"):
        MoE(d_model=8, num_experts=4.0)
    with pytest.raises(ValueError, match="d_hidden must be an integer"):
        MoE(d_model=8, num_experts=4, d_hidden=7.5)
    for coef in ("load_balance_coef", "z_loss_coef", "orthogonality_coef", "variance_coef"):
        for bad in (float("nan"), float("inf")):
            with pytest.raises(ValueError, match=f"{coef} must be finite"):
                MoE(d_model=8, num_experts=4, **{coef: bad})
        with pytest.raises(ValueError, match=f"{coef} must be >= 0"):
            MoE(d_model=8, num_experts=4, **{coef: -1.0})
        with pytest.raises(ValueError, match=f"{coef} must be finite"):
            MoE.from_modules(
                Router(d_model=8, num_experts=4), GLUExperts(4, 8, 8), **{coef: float("nan")}
            )
    for opt in ("noise_std", "capacity_factor", "scaling"):
        with pytest.raises(ValueError, match=f"{opt} must be finite"):
            MoE(d_model=8, num_experts=4, **{opt: float("nan")})
    # numpy integers are integers
    np = pytest.importorskip("numpy")
    moe = MoE(d_model=np.int64(8), num_experts=np.int64(4), top_k=np.int64(2))
    assert type(moe.top_k) is int and moe(torch.randn(3, 8)).shape == (3, 8)


@pytest.mark.parametrize(
    "layer_dtype,x_dtype",
    [
        (torch.float32, torch.float16),
        (torch.float32, torch.float64),
        (torch.bfloat16, torch.float32),
    ],
)
def test_dtype_mismatch_names_both_dtypes(layer_dtype, x_dtype):
    moe = MoE(d_model=8, num_experts=4, top_k=2).to(layer_dtype)
    x = torch.randn(3, 8, generator=torch.Generator().manual_seed(0)).to(x_dtype)
    with pytest.raises(ValueError) as err:
        moe(x)
    msg = str(err.value)
    assert str(x_dtype) in msg and str(layer_dtype) in msg
    assert f"layer.to({x_dtype})" in msg and f"x.to({layer_dtype})" in msg
    assert moe(x.to(layer_dtype)).dtype == layer_dtype  # the advice works
    assert moe.to(x_dtype)(x).dtype == x_dtype


def test_dtype_mismatch_allowed_under_autocast():
    moe = MoE(d_model=8, num_experts=4, top_k=2)
    x = torch.randn(3, 8, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = moe(x)
    assert y.shape == (3, 8)
