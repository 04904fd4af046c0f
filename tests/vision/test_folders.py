import numpy as np
import pytest
import torch

from sci_moe.vision import load_segmentation_folder

Image = pytest.importorskip("PIL.Image")


def test_round_trip(tmp_path):
    (tmp_path / "img").mkdir()
    (tmp_path / "mask").mkdir()
    rng = np.random.default_rng(0)
    ref_img, ref_mask = [], []
    for i in range(3):
        img = rng.integers(0, 256, (8, 12, 3), dtype=np.uint8)
        mask = rng.integers(0, 7, (8, 12), dtype=np.uint8)
        Image.fromarray(img).save(tmp_path / "img" / f"{i}.png")
        Image.fromarray(mask, mode="L").save(tmp_path / "mask" / f"{i}.png")
        ref_img.append(img)
        ref_mask.append(mask)
    x, m = load_segmentation_folder(tmp_path / "img", tmp_path / "mask")
    assert x.shape == (3, 3, 8, 12) and m.shape == (3, 8, 12) and m.dtype == torch.long
    assert torch.equal(m, torch.from_numpy(np.stack(ref_mask)).long())
    torch.testing.assert_close(
        x, torch.from_numpy(np.stack(ref_img)).permute(0, 3, 1, 2).float() / 255.0
    )
    x2, m2 = load_segmentation_folder(tmp_path / "img", tmp_path / "mask", size=4)
    assert x2.shape == (3, 3, 4, 4) and set(m2.unique().tolist()) <= set(range(7))


def test_missing_mask_and_rgb_mask(tmp_path):
    (tmp_path / "img").mkdir()
    (tmp_path / "mask").mkdir()
    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(tmp_path / "img" / "a.png")
    with pytest.raises(ValueError, match="no mask"):
        load_segmentation_folder(tmp_path / "img", tmp_path / "mask")
    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(tmp_path / "mask" / "a.png")
    with pytest.raises(ValueError, match="single-channel"):
        load_segmentation_folder(tmp_path / "img", tmp_path / "mask")
