"""A small UNet-style segmentation network with an exposed penultimate feature map."""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["SmallUNet"]


def _block(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1),
        nn.GroupNorm(1, cout),
        nn.ReLU(),
        nn.Conv2d(cout, cout, 3, padding=1),
        nn.ReLU(),
    )


class SmallUNet(nn.Module):
    """Two-level UNet: encoder, bottleneck, decoder with skips, 1x1 classifier head.

    Parameters
    ----------
    n_classes : int
        Output channels = ``n_classes + 1`` (0 is background).
    width : int
        Channels of the first level (doubled per level).
    feature_dim : int
        Channels of the penultimate pixel features (what the memories model).
    """

    def __init__(self, n_classes: int, width: int = 16, feature_dim: int = 16) -> None:
        super().__init__()
        if n_classes < 1 or width < 1 or feature_dim < 1:
            raise ValueError("n_classes, width and feature_dim must be >= 1")
        w = width
        self.enc1 = _block(3, w)
        self.enc2 = _block(w, 2 * w)
        self.mid = _block(2 * w, 4 * w)
        self.up2 = nn.ConvTranspose2d(4 * w, 2 * w, 2, stride=2)
        self.dec2 = _block(4 * w, 2 * w)
        self.up1 = nn.ConvTranspose2d(2 * w, w, 2, stride=2)
        self.dec1 = _block(2 * w, feature_dim)
        self.head = nn.Conv2d(feature_dim, n_classes + 1, 1)

    def features(self, x: Tensor) -> Tensor:
        """Penultimate pixel features, shape (B, feature_dim, H, W); H, W divisible by 4."""
        if x.dim() != 4 or x.shape[1] != 3 or x.shape[-1] % 4 or x.shape[-2] % 4:
            raise ValueError(f"x must be (B, 3, H, W) with H, W divisible by 4, got {x.shape}")
        e1 = self.enc1(x)
        e2 = self.enc2(nn.functional.max_pool2d(e1, 2))
        m = self.mid(nn.functional.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([self.up2(m), e2], 1))
        return self.dec1(torch.cat([self.up1(d2), e1], 1))

    def classify(self, f: Tensor) -> Tensor:
        """Head on features: (B, D, H, W) -> (B, C+1, H, W), or (N, D) -> (N, C+1)."""
        if f.dim() == 2:
            return nn.functional.linear(f, self.head.weight.flatten(1), self.head.bias)
        return self.head(f)

    def forward(self, x: Tensor) -> Tensor:
        """Logits, shape (B, n_classes + 1, H, W)."""
        return self.classify(self.features(x))
