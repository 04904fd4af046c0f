"""PI / MoE / OE / classifier: equalities the method rests on, MAC and parameter counts."""

import pytest
import torch

from sci_moe.speech.omni import (
    FrameTensors,
    MaskNetConfig,
    OmniExpertMask,
    PhonemeClassifier,
    PhonemeIndependentMask,
    PhonemeMoEMask,
    TrainConfig,
    mask_loss,
    model_costs,
    oracle_probs,
    train_classifier,
    train_moe,
    train_oe,
    train_pi,
)
from sci_moe.testing import assert_routed_bank_matches_reference, default_tolerance

NET = MaskNetConfig(n_bins=65, context=3, hidden=16, classifier_hidden=8)


def _perturbed_pi(gen):
    pi = PhonemeIndependentMask(NET)
    with torch.no_grad():
        for p in pi.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    return pi


def test_oe_with_identity_transform_equals_pi(float_dtype):
    atol, rtol = default_tolerance(float_dtype)
    gen = torch.Generator().manual_seed(0)
    pi = _perturbed_pi(gen)
    oe = OmniExpertMask.from_pi(pi)
    x = torch.randn(11, 3, 65, generator=gen)
    p = torch.softmax(torch.randn(11, 40, generator=gen), -1)
    for mode in ("mixture", "folded"):
        torch.testing.assert_close(oe(x, p, mode), pi(x), atol=atol, rtol=rtol)
    # a_n = 1, b_n = 0 set by hand after training-like changes, too
    with torch.no_grad():
        oe.table.scale_mlp.weight.normal_()
    assert not torch.allclose(oe(x, p), pi(x))


def test_moe_path_equals_core_reference_and_upcycled_moe_equals_pi(float_dtype):
    atol, rtol = default_tolerance(float_dtype)
    gen = torch.Generator().manual_seed(1)
    pi = _perturbed_pi(gen)
    moe = PhonemeMoEMask.from_pi(pi)
    x = torch.randn(9, 3, 65, generator=gen)
    p = torch.softmax(torch.randn(9, 40, generator=gen), -1)
    torch.testing.assert_close(moe(x, p), pi(x), atol=atol, rtol=rtol)  # sum_n p_n = 1
    with torch.no_grad():
        moe.mixture.experts.up.add_(0.2 * torch.randn(moe.mixture.experts.up.shape, generator=gen))
    for probs in (p, oracle_probs(torch.randint(0, 40, (9,), generator=gen))):
        r = moe.routing(probs)
        assert r.top_k == (1 if probs.max() == 1 else 40)
        assert_routed_bank_matches_reference(None, moe.mixture.experts, x.reshape(9, -1), r)


def test_oracle_oe_uses_the_label_row_of_the_table():
    gen = torch.Generator().manual_seed(2)
    oe = OmniExpertMask.from_pi(_perturbed_pi(gen))
    with torch.no_grad():
        for m in (oe.table.scale_mlp, oe.table.shift_mlp):
            m.weight.normal_(generator=gen)
    x = torch.randn(4, 3, 65, generator=gen)
    lab = torch.tensor([0, 5, 5, 39])
    a, b = oe.table.tables()
    want = oe.expert(a[lab][:, None, :] * x + b[lab][:, None, :])
    torch.testing.assert_close(oe(x, oracle_probs(lab)), want)


def test_parameter_and_mac_counts_by_hand():
    net = MaskNetConfig(context=5, hidden=128, classifier_hidden=64)
    pi = PhonemeIndependentMask(net)
    moe, oe, clf = PhonemeMoEMask.from_pi(pi), OmniExpertMask.from_pi(pi), PhonemeClassifier(net)
    c = model_costs(pi, moe, oe, clf)
    d_in, H, F, N = 5 * 65, 128, 65, 40
    one = d_in * H + H * F  # 49,920 MACs
    p_pi = d_in * H + H + H * F + F
    assert c["PI"].macs == one == 49920 and c["PI"].parameters == p_pi == 50113
    assert c["MoE^k"].macs == one and c["MoE^p"].macs == N * one + N * F
    assert c["MoE^p"].parameters == N * p_pi
    assert c["OE^k"].macs == one + 5 * F  # transform a x + b of 5 frames
    assert c["OE^p"].macs == one + 5 * F + 2 * N * F  # + mixing the two tables
    assert c["OE^p-mixture"].macs == N * (one + 5 * F) + N * F
    assert c["OE^k"].parameters == p_pi + 2 * N * F  # expert + folded tables
    assert c["OE^k"].train_parameters == p_pi + 2 * (N * F + F)  # + the two 40 -> 65 MLPs
    assert c["classifier"].macs == d_in * 64 + 64 * N
    oe.table.fold()
    assert model_costs(pi, moe, oe, clf)["OE^k"] == c["OE^k"]


def test_shape_errors():
    pi = PhonemeIndependentMask(NET)
    with pytest.raises(ValueError, match="context=3"):
        pi(torch.randn(4, 5, 65))
    with pytest.raises(ValueError, match="hidden must be >= 1"):
        MaskNetConfig(hidden=0)


def test_training_lowers_the_loss_and_moe_experts_specialise():
    gen = torch.Generator().manual_seed(3)
    T = 256
    lab = torch.randint(0, 4, (T,), generator=gen)
    x = torch.randn(T, 3, 65, generator=gen) + lab[:, None, None].float()
    irm = torch.sigmoid(x[:, -1] * (1 + lab[:, None].float()))
    data = FrameTensors(x, torch.ones(T, 65), irm, lab)
    cfg = TrainConfig(epochs=3, batch_size=64)
    pi0 = PhonemeIndependentMask(NET)
    pi = train_pi(data, NET, cfg)
    assert mask_loss(pi(x), irm, data.magnitude) < mask_loss(pi0(x), irm, data.magnitude)
    moe, oe = train_moe(pi, data, cfg), train_oe(pi, data, cfg)
    k = oracle_probs(lab)
    for model in (moe, oe):
        assert mask_loss(model(x, k), irm, data.magnitude) < mask_loss(pi(x), irm, data.magnitude)
    # experts of classes never seen stay equal to the PI expert
    torch.testing.assert_close(moe.mixture.experts.up[39], pi.bank.up[0])
    clf = train_classifier(data, NET, TrainConfig(epochs=5, batch_size=64, lr=1e-2))
    assert float((clf.probs(x).argmax(1) == lab).float().mean()) > 0.5
