"""Load user image/mask folders (PNG) for real class-incremental segmentation data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import Tensor

__all__ = ["load_segmentation_folder"]


def _pil():
    try:
        from PIL import Image
    except ImportError as err:  # Pillow comes with matplotlib, a core dependency
        raise ImportError(
            "reading PNG folders needs Pillow; install it with `pip install pillow` "
            "(it normally comes with matplotlib, a dependency of sci-moe)"
        ) from err
    return Image


def load_segmentation_folder(
    images_dir: str | Path, masks_dir: str | Path, size: int | None = None
) -> tuple[Tensor, Tensor]:
    """Read ``images_dir/*.png`` and the masks of the same file stem in ``masks_dir``.

    Masks are single-channel PNGs (mode ``L``, ``P`` or ``I``) whose pixel values are the
    class ids (0 background; any other value, e.g. 255 "ignore", is kept as is).

    Parameters
    ----------
    images_dir, masks_dir : path
    size : int, optional
        Resize every pair to ``size x size`` (bilinear for images, nearest for masks);
        needed when the images differ in size.

    Returns
    -------
    images : Tensor, shape (N, 3, H, W), float in [0, 1]
    masks : Tensor, shape (N, H, W), long
    """
    Image = _pil()
    images_dir, masks_dir = Path(images_dir), Path(masks_dir)
    if not images_dir.is_dir() or not masks_dir.is_dir():
        raise ValueError(f"both {images_dir} and {masks_dir} must be existing folders")
    files = sorted(images_dir.glob("*.png"))
    if not files:
        raise ValueError(f"no *.png images in {images_dir}")
    imgs, masks = [], []
    for f in files:
        mpath = masks_dir / f.name
        if not mpath.exists():
            raise ValueError(f"no mask {mpath} for image {f}; give every image a mask")
        img = Image.open(f).convert("RGB")
        mask = Image.open(mpath)
        if mask.mode not in ("L", "P", "I", "I;16"):
            raise ValueError(
                f"mask {mpath} has mode {mask.mode}; save masks as single-channel PNGs "
                "whose values are class ids"
            )
        if img.size != mask.size:
            raise ValueError(f"image {f} and mask {mpath} differ in size")
        if size is not None:
            img = img.resize((size, size), Image.BILINEAR)
            mask = mask.resize((size, size), Image.NEAREST)
        imgs.append(torch.from_numpy(np.asarray(img, dtype=np.float32) / 255.0).permute(2, 0, 1))
        masks.append(torch.from_numpy(np.asarray(mask).astype(np.int64)))
    if len({tuple(m.shape) for m in masks}) > 1:
        raise ValueError("images differ in size; pass size= to resize them")
    return torch.stack(imgs), torch.stack(masks)
