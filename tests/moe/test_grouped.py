import pytest
import torch

from sci_moe.moe.grouped import grouped_linear, grouped_mm_supported


def _loop(x, w, counts, bias=None):
    out, start = [], 0
    for e, c in enumerate(counts.tolist()):
        y = x[start : start + c] @ w[e].T
        if bias is not None:
            y = y + bias[e]
        out.append(y)
        start += c
    return torch.cat(out)


@pytest.mark.parametrize("d_in,d_out", [(16, 32), (15, 7)])
@pytest.mark.parametrize("counts", [[3, 0, 5, 1], [0, 0, 0, 9], [1, 1, 1, 1], [6, 7, 0, 0]])
@pytest.mark.parametrize("bias", [False, True])
def test_grouped_linear_matches_loop(d_in, d_out, counts, bias, float_dtype):
    counts = torch.tensor(counts)
    offsets = torch.cumsum(counts, 0).to(torch.int32)
    x = torch.randn(int(counts.sum()), d_in, requires_grad=True)
    w = torch.randn(4, d_out, d_in, requires_grad=True)
    b = torch.randn(4, d_out, requires_grad=True) if bias else None
    g = torch.randn(x.shape[0], d_out)
    y = grouped_linear(x, w, counts, offsets, bias=b)
    y_ref = _loop(x, w, counts, b)
    torch.testing.assert_close(y, y_ref)
    params = [x, w] + ([b] if bias else [])
    ga = torch.autograd.grad((y * g).sum(), params)
    gb = torch.autograd.grad((y_ref * g).sum(), params)
    for a, r in zip(ga, gb, strict=True):
        torch.testing.assert_close(a, r)


def test_support_rules():
    x32 = torch.zeros(3, 16)
    assert grouped_mm_supported(x32, torch.zeros(2, 8, 16))
    assert not grouped_mm_supported(x32.double(), torch.zeros(2, 8, 16).double())
    assert not grouped_mm_supported(torch.zeros(3, 15), torch.zeros(2, 8, 15))
    assert not grouped_mm_supported(x32, torch.zeros(2, 8, 16).double())


def test_empty_input():
    y = grouped_linear(
        torch.zeros(0, 8),
        torch.randn(3, 4, 8),
        torch.zeros(3, dtype=torch.long),
        torch.zeros(3, dtype=torch.int32),
    )
    assert y.shape == (0, 4)
