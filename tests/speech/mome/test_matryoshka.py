"""Matryoshka compression: identity at rate 1, shapes per rate, masks, errors."""

import pytest
import torch

from sci_moe.speech.mome import MatryoshkaRates, compress, compress_mask


@pytest.mark.parametrize("mode", ["avg", "stack"])
def test_rate_one_is_identity(mode):
    x = torch.randn(2, 6, 3)
    mask = torch.ones(2, 6, dtype=torch.bool)
    z, m = compress(x, 1, mode, mask)
    assert torch.equal(z, x) and torch.equal(m, mask)


@pytest.mark.parametrize("rate", [1, 2, 3, 6])
def test_shapes_per_rate(rate):
    x = torch.randn(2, 12, 4)
    assert compress(x, rate, "avg")[0].shape == (2, 12 // rate, 4)
    assert compress(x, rate, "stack")[0].shape == (2, 12 // rate, 4 * rate)


def test_average_pooling_and_stacking_values():
    x = torch.randn(3, 8, 5)
    torch.testing.assert_close(compress(x, 4)[0], x.reshape(3, 2, 4, 5).mean(2))
    z = compress(x, 2, "stack")[0]
    assert torch.equal(z[:, 1], torch.cat([x[:, 2], x[:, 3]], -1))


def test_masked_average_ignores_padding():
    x = torch.randn(1, 4, 2)
    mask = torch.tensor([[True, True, True, False]])
    z, m = compress(x, 2, "avg", mask)
    torch.testing.assert_close(z[0, 1], x[0, 2])
    assert m.tolist() == [[True, True]]
    assert compress_mask(torch.tensor([[True, False, False, False]]), 2).tolist() == [[True, False]]


def test_rate_that_does_not_divide_is_rejected():
    with pytest.raises(ValueError, match="does not divide"):
        compress(torch.randn(1, 10, 2), 4)
    with pytest.raises(ValueError, match="integer >= 1"):
        compress(torch.randn(1, 10, 2), 0)


def test_rate_combinations():
    r = MatryoshkaRates({"audio": (4, 16), "video": (1, 2)})
    assert len(r.combinations()) == 4 and r.multiple("audio") == 16
    with pytest.raises(ValueError, match="distinct"):
        MatryoshkaRates({"audio": (4, 4)})
