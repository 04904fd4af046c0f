import pytest
import torch

from sci_moe.vision.cogamid import GaussianMixtureMemory, PrototypeMemory


def _two_class_data(dt):
    g = torch.Generator().manual_seed(0)
    a = torch.cat([torch.randn(800, 3, generator=g) - 3, torch.randn(800, 3, generator=g) + 3])
    b = torch.randn(1000, 3, generator=g) * 0.5
    f = torch.cat([a, b]).to(dt)
    y = torch.cat([torch.full((1600,), 1), torch.full((1000,), 2)])
    return f, y


@pytest.mark.parametrize("cov_type", ["full", "diag"])
def test_sampling_matches_fitted_moments(float_dtype, cov_type):
    f, y = _two_class_data(float_dtype)
    mem = GaussianMixtureMemory(2, cov_type).fit(f, y, [1, 2], torch.Generator().manual_seed(0))
    s, ys = mem.sample(20000, generator=torch.Generator().manual_seed(3))
    assert s.shape == (40000, 3) and s.dtype == float_dtype
    for c in (1, 2):
        m = mem.mixtures[c]
        torch.testing.assert_close(s[ys == c].mean(0), m.mean(), atol=0.06, rtol=0)
        torch.testing.assert_close(
            torch.cov(s[ys == c].t(), correction=0), m.covariance(), atol=0.15, rtol=0.05
        )
        # and the fitted moments are the data's moments
        torch.testing.assert_close(m.mean(), f[y == c].mean(0), atol=0.05, rtol=0)


def test_gmm_beats_prototype_on_a_bimodal_class_and_round_trips():
    f, y = _two_class_data(torch.float64)
    gmm = GaussianMixtureMemory(2).fit(f, y, [1, 2], torch.Generator().manual_seed(0))
    proto = PrototypeMemory().fit(f, y, [1, 2])
    held = torch.cat([torch.randn(300, 3) - 3, torch.randn(300, 3) + 3]).double()
    assert gmm.log_prob(held, 1).mean() > proto.log_prob(held, 1).mean() + 1.0
    ps, pl = proto.sample(4)
    assert ps.shape == (8, 3) and torch.equal(ps[0], proto.prototypes[1])
    assert pl.tolist() == [1] * 4 + [2] * 4
    gmm2 = GaussianMixtureMemory(2)
    gmm2.load_state_dict(gmm.state_dict())
    torch.testing.assert_close(gmm2.log_prob(held, 1), gmm.log_prob(held, 1), rtol=0, atol=0)
    proto2 = PrototypeMemory()
    proto2.load_state_dict(proto.state_dict())
    torch.testing.assert_close(proto2.log_prob(held, 2), proto.log_prob(held, 2), rtol=0, atol=0)


def test_state_round_trip_is_exact_even_when_renormalising_would_move_the_weights():
    # These weights sum to 1 only up to an ulp in float32: dividing them by their sum again
    # changes them, so a load that renormalised would make resumed runs drift.
    w = torch.tensor([0.3667943775653839, 0.5678099393844604, 0.06539565324783325])
    assert not torch.equal(w, w / w.sum())
    f, y = _two_class_data(torch.float32)
    mem = GaussianMixtureMemory(3).fit(f, y, [1], torch.Generator().manual_seed(0))
    mem.mixtures[1].weights = w
    again = GaussianMixtureMemory(3)
    again.load_state_dict(mem.state_dict())
    for k, v in mem.state_dict().items():
        assert torch.equal(again.state_dict()[k], v), k


def test_empty_class_raises():
    f, y = _two_class_data(torch.float32)
    with pytest.raises(ValueError, match="no features"):
        GaussianMixtureMemory(2).fit(f, y, [5])


def test_adjust_moves_mixture_towards_new_features():
    f, y = _two_class_data(torch.float64)
    mem = GaussianMixtureMemory(2).fit(f, y, [1, 2], torch.Generator().manual_seed(0))
    before = mem.mixtures[2].mean().clone()
    new = torch.randn(2000, 3, dtype=torch.float64) * 0.5 + 2.0
    done = mem.adjust(new, torch.full((2000,), 2), n_replay=2000)
    assert done == [2]
    after = mem.mixtures[2].mean()
    torch.testing.assert_close(after, before + 1.0, atol=0.1, rtol=0)
    assert mem.component_means().shape == (4, 3)
