import pytest
import torch

from sci_moe.language.mxd import (
    MeanAblation,
    RescaledDecomposition,
    SpliceReport,
    Transcoder,
    activation_rms,
    code_columns,
    mlp_site,
    next_token_ce,
    rank_units,
    sparse_codes,
    sparse_probe,
    splice_report,
    top_activations,
)


def test_splice_report(tiny_llama, windows):
    site = mlp_site(tiny_llama, 1)
    rep = splice_report(
        tiny_llama,
        site,
        {
            "original": site.mlp,
            "zero": lambda x: torch.zeros_like(x),
            "tc": Transcoder(16, 16, 32, 4),
        },
        windows.ids,
        mean_output=torch.zeros(16),
    )
    assert rep.spliced["original"] == rep.original
    assert rep.increase("original") == 0.0 and rep.recovered("original") == 1.0
    # a zero-init transcoder outputs 0 = the mean ablation with mean 0 here
    assert rep.spliced["zero"] == pytest.approx(rep.mean_ablation, abs=1e-6)
    assert rep.original == next_token_ce(tiny_llama, windows.ids)
    assert SpliceReport(2.0, 4.0, {"a": 3.0}).recovered("a") == 0.5
    with pytest.raises(ValueError, match="shape"):
        MeanAblation(torch.zeros(2, 2))


def test_probing_finds_a_planted_unit():
    g = torch.Generator().manual_seed(0)
    T, k, n = 400, 3, 20
    labels = torch.arange(T) % 2
    indices = torch.stack([torch.randperm(n, generator=g)[:k] for _ in range(T)])
    values = torch.rand(T, k, generator=g)
    indices[labels == 1, 0] = 7  # unit 7 fires strongly on class 1 only
    values[labels == 1, 0] = 5.0
    values[labels == 0] = torch.where(indices[labels == 0] == 7, 0.0, values[labels == 0])
    order = rank_units(values, indices, n, labels)
    assert int(order[0]) == 7
    cols = code_columns(values, indices, order[:1])
    assert torch.equal(cols[:, 0], (values * (indices == 7)).sum(-1))
    assert sparse_probe(cols[:200], labels[:200], cols[200:], labels[200:]) == 1.0
    values[5, 0] = 9.0
    top = top_activations(values, indices, 7, n=3)
    assert top.numel() == 3 and int(top[0]) == 5 and bool((labels[top] == 1).all())
    with pytest.raises(ValueError, match="both classes"):
        rank_units(values, indices, n, torch.zeros(T, dtype=torch.long))


def test_sparse_codes_equal_the_forward():
    tc = Transcoder(4, 4, 16, 2)
    x = torch.randn(10, 4)
    v, i, n = sparse_codes(tc, x, batch_size=3)
    out = tc(x)
    assert n == 16 and torch.equal(i, out.indices)
    torch.testing.assert_close(v, out.values.detach())


def test_activation_rms_is_the_root_mean_square_in_chunks():
    g = torch.Generator().manual_seed(0)
    t = (torch.randn(37, 5, generator=g) * 300).half()
    expected = float(t.double().pow(2).mean().sqrt())
    for rows in (1, 4, 37, 100):
        assert activation_rms(t, rows=rows) == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError, match="non-empty"):
        activation_rms(torch.zeros(0, 3))
    with pytest.raises(ValueError, match="rows must be"):
        activation_rms(t, rows=0)


def test_rescaled_decomposition_maps_raw_activations():
    torch.manual_seed(0)
    inner = Transcoder(d_in=6, d_out=4, d_latent=12, top_k=3)
    s_x, s_y = 50.0, 7.0
    x = torch.randn(9, 6) * s_x
    wrapped = RescaledDecomposition(inner, s_x, s_y)
    torch.testing.assert_close(wrapped(x), inner(x / s_x).y * s_y)
    assert list(wrapped.parameters()) == list(inner.parameters())
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="finite positive scale"):
            RescaledDecomposition(inner, bad, 1.0)
