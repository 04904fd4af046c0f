"""Task-affine expert (one expert + per-task FiLM table; Omni-Expert) and the output-activation
bank (MLPExperts(output_activation=...)), against naive references: outputs and all gradients,
float32 and float64."""

import pytest
import torch
from torch import nn

from sci_moe.moe import MLPExperts, Routing
from sci_moe.speech.omni import (
    TaskAffineTable,
    bank_macs_per_token,
    task_affine_forward,
    task_affine_macs,
)
from sci_moe.testing import assert_routed_bank_matches_reference, default_tolerance

T, S, D, N = 7, 3, 4, 5


def _expert():
    return nn.Sequential(nn.Flatten(1), nn.Linear(S * D, 6), nn.Tanh(), nn.Linear(6, 2))


def _perturb(table, gen):
    with torch.no_grad():
        for p in table.parameters():
            p.add_(0.5 * torch.randn(p.shape, generator=gen, dtype=p.dtype))


def _naive(expert, x, probs, table, mode):
    """Loop over tokens and tasks, tables built one task at a time from the one-hot."""
    rows = []
    for t in range(x.shape[0]):
        a_list, b_list = [], []
        for n in range(table.num_tasks):
            e = torch.zeros(table.num_tasks, dtype=x.dtype)
            e[n] = 1
            a = table._act_a(table.scale_mlp(e)) if table.scale_mlp is not None else 1 + 0 * e[0]
            b = table._act_b(table.shift_mlp(e)) if table.shift_mlp is not None else 0 * e[0]
            a_list.append(a * torch.ones(table.dim, dtype=x.dtype))
            b_list.append(b * torch.ones(table.dim, dtype=x.dtype))
        if mode == "mixture":
            y = sum(
                probs[t, n] * expert((a_list[n] * x[t] + b_list[n]).unsqueeze(0))[0]
                for n in range(table.num_tasks)
            )
        else:
            a_bar = sum(probs[t, n] * a_list[n] for n in range(table.num_tasks))
            b_bar = sum(probs[t, n] * b_list[n] for n in range(table.num_tasks))
            y = expert((a_bar * x[t] + b_bar).unsqueeze(0))[0]
        rows.append(y)
    return torch.stack(rows)


def _grads(out, inputs):
    g = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).reshape(out.shape)
    return torch.autograd.grad((out * g).sum(), inputs)


@pytest.mark.parametrize("mode", ["mixture", "folded"])
@pytest.mark.parametrize(("scale", "shift"), [(True, True), (True, False), (False, True)])
def test_task_affine_forward_matches_naive(float_dtype, mode, scale, shift):
    atol, rtol = default_tolerance(float_dtype)
    gen = torch.Generator().manual_seed(1)
    expert = _expert()
    table = TaskAffineTable(N, D, scale=scale, shift=shift)
    _perturb(table, gen)
    x = torch.randn(T, S, D, generator=gen, requires_grad=True)
    logits = torch.randn(T, N, generator=gen)
    logits[0, 2:] = -torch.inf  # a sparse row: only tasks 0, 1
    logits.requires_grad_(True)
    inputs = [x, logits, *table.parameters(), *expert.parameters()]
    fast = task_affine_forward(expert, x, torch.softmax(logits, -1), table, mode)
    ref = _naive(expert, x, torch.softmax(logits, -1), table, mode)
    torch.testing.assert_close(fast, ref, atol=atol, rtol=rtol)
    for gf, gr in zip(_grads(fast, inputs), _grads(ref, inputs), strict=True):
        torch.testing.assert_close(gf, gr, atol=atol, rtol=rtol)


def test_identity_table_is_the_plain_expert(float_dtype):
    """a_n = 1, b_n = 0 (the initialisation): every mode and every p gives E(x)."""
    atol, rtol = default_tolerance(float_dtype)
    expert, table = _expert(), TaskAffineTable(N, D)
    x = torch.randn(T, S, D)
    probs = torch.softmax(torch.randn(T, N), -1)
    for mode in ("mixture", "folded"):
        torch.testing.assert_close(
            task_affine_forward(expert, x, probs, table, mode), expert(x), atol=atol, rtol=rtol
        )


def test_fold_equals_mlp_path(float_dtype):
    atol, rtol = default_tolerance(float_dtype)
    gen = torch.Generator().manual_seed(2)
    expert, table = _expert(), TaskAffineTable(N, D)
    _perturb(table, gen)
    x = torch.randn(T, S, D, generator=gen)
    probs = torch.softmax(torch.randn(T, N, generator=gen), -1)
    before = {m: task_affine_forward(expert, x, probs, table, m) for m in ("mixture", "folded")}
    a, b = (t.detach().clone() for t in table.tables())
    assert (a >= 0).all()  # ReLU scale
    assert table.num_parameters() == 2 * (N * D + D)
    table.fold()
    assert table.num_parameters() == 0 and table.table_entries() == 2 * N * D
    torch.testing.assert_close(table.tables()[0], a)
    torch.testing.assert_close(table.tables()[1], b)
    for m, y in before.items():
        torch.testing.assert_close(task_affine_forward(expert, x, probs, table, m), y,
                                   atol=atol, rtol=rtol)  # fmt: skip
    assert "folded=True" in repr(table)


def test_one_hot_forms_agree_and_errors():
    gen = torch.Generator().manual_seed(3)
    expert, table = _expert(), TaskAffineTable(N, D)
    _perturb(table, gen)
    x = torch.randn(T, S, D, generator=gen)
    onehot = nn.functional.one_hot(torch.randint(0, N, (T,), generator=gen), N).float()
    torch.testing.assert_close(
        task_affine_forward(expert, x, onehot, table, "mixture"),
        task_affine_forward(expert, x, onehot, table, "folded"),
    )
    with pytest.raises(ValueError, match="mode"):
        task_affine_forward(expert, x, onehot, table, "sum")
    with pytest.raises(ValueError, match="probs must have shape"):
        task_affine_forward(expert, x, onehot[:, :2], table)
    with pytest.raises(ValueError, match="last axis"):
        task_affine_forward(expert, x[..., :2], onehot, table)


@pytest.mark.parametrize("dense", [False, True])
def test_output_bank_dispatch_matches_core_reference(float_dtype, dense):
    bank = MLPExperts(N, 6, 8, "relu", True, d_out=3, output_activation="sigmoid")
    if dense:
        probs = torch.softmax(torch.randn(T, N), -1)
        routing = Routing.from_assignments(torch.arange(N).expand(T, N), probs, N)
    else:
        routing = Routing.from_assignments(torch.randint(0, N, (T, 1)), torch.ones(T, 1), N)
    assert_routed_bank_matches_reference(None, bank, torch.randn(T, 6), routing)
    plain = MLPExperts(N, 6, 8, "relu", True, 3)
    plain.load_state_dict(bank.state_dict())
    one = torch.ones(1, 6)
    torch.testing.assert_close(
        bank.forward_expert(2, one), torch.sigmoid(plain.forward_expert(2, one))
    )


def test_mac_counts_by_hand():
    bank = MLPExperts(40, 325, 128, d_out=65, output_activation="sigmoid")
    assert bank_macs_per_token(bank) == 325 * 128 + 128 * 65
    assert bank_macs_per_token(_expert()) == S * D * 6 + 6 * 2
    e = 1000
    # one-hot OE: transform of 3 positions x 4 dims + one pass
    assert task_affine_macs(e, 4, 3, num_tasks=10) == 12 + 1000
    # dense OE folded: table mixing 2 * 10 * 4, transform, one pass
    assert task_affine_macs(e, 4, 3, num_tasks=10, active_tasks=10) == 80 + 12 + 1000
    # dense OE mixture: 10 transformed passes + weighted sum of 10 outputs of size 2
    assert task_affine_macs(e, 4, 3, num_tasks=10, active_tasks=10, mode="mixture", d_out=2) == (
        10 * (12 + 1000) + 20
    )
    # MoE: dim 0
    assert task_affine_macs(e, 0, num_tasks=10, mode="mixture") == 1000
    with pytest.raises(ValueError, match="active_tasks"):
        task_affine_macs(e, 4, num_tasks=10, active_tasks=11)


def test_leaky_relu_activation_and_table_activations():
    from sci_moe._util import get_activation

    x = torch.tensor([-2.0, 3.0])
    assert get_activation("leaky_relu")(x).tolist() == pytest.approx([-0.02, 3.0])
    table = TaskAffineTable(3, 2, scale_activation="identity", shift_activation="leaky_relu")
    with pytest.raises(ValueError, match="unknown activation"):
        TaskAffineTable(3, 2, scale_activation="swishy")
    assert table.tables()[0].shape == (3, 2)
