import pytest
import torch

from sci_moe.vision.cogamid import SceneConfig, SceneGenerator


def test_scenes_shapes_modes_and_determinism():
    gen = SceneGenerator(SceneConfig(image_size=32))
    assert len(gen.modes) == 6 and all(len(m) in (2, 3) for m in gen.modes)
    x, m = gen.generate(10, classes=[2, 5], generator=torch.Generator().manual_seed(0))
    assert x.shape == (10, 3, 32, 32) and m.shape == (10, 32, 32)
    assert 0 <= float(x.min()) and float(x.max()) <= 1
    assert set(m.unique().tolist()) <= {0, 2, 5}
    assert all(bool((mi > 0).any()) for mi in m)
    x2, m2 = gen.generate(10, classes=[2, 5], generator=torch.Generator().manual_seed(0))
    assert torch.equal(x, x2) and torch.equal(m, m2)


def test_masks_are_exact():
    # Without noise and with plain backgrounds the object pixels are exactly where the
    # image differs from what the background would be; check colour constancy inside.
    cfg = SceneConfig(image_size=32, max_objects=1, noise=0.0)
    gen = SceneGenerator(cfg)
    for mode_list in gen.modes:
        for md in mode_list:
            md["texture"] = "plain"
    x, m = gen.generate(6, generator=torch.Generator().manual_seed(1))
    for xi, mi in zip(x, m, strict=True):
        inside = mi > 0
        obj = xi[:, inside]
        # one plain object: a single constant colour over the whole mask
        assert float((obj - obj[:, :1]).abs().max()) < 1e-6
        # and no background pixel has exactly that colour
        bg = xi[:, ~inside]
        assert float((bg - obj[:, :1]).abs().sum(0).min()) > 1e-6


def test_drift_moves_colours():
    cfg = SceneConfig(image_size=16, max_objects=1, noise=0.0, drift=0.2)
    g0, g1 = torch.Generator().manual_seed(2), torch.Generator().manual_seed(2)
    x0, m0 = SceneGenerator(cfg).generate(4, step=0, generator=g0)
    x1, m1 = SceneGenerator(cfg).generate(4, step=2, generator=g1)
    assert torch.equal(m0, m1)
    assert float((x0 - x1)[:, :, m0[0] > 0].abs().max()) > 0.05


def test_bad_config():
    with pytest.raises(ValueError):
        SceneConfig(modes_per_class=())
    with pytest.raises(ValueError, match="classes"):
        SceneGenerator(SceneConfig(image_size=16)).generate(2, classes=[7])


def test_unimodal_world_has_one_mode_per_class():
    gen = SceneGenerator(SceneConfig(image_size=16, modes_per_class=(1,)))
    assert [len(m) for m in gen.modes] == [1] * 6
    x, m = gen.generate(3, generator=torch.Generator().manual_seed(0))
    assert x.shape == (3, 3, 16, 16) and bool((m > 0).any())
