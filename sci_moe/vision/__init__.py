"""Vision: class-incremental semantic segmentation.

The field's shared pieces: the class-incremental protocol (task splits, background
shift, mIoU), a small UNet with an exposed penultimate feature map and a loader for PNG
image/mask folders. One paper, one subpackage:

* :mod:`sci_moe.vision.cogamid`: CoGaMiD (Zhu et al., NeurIPS 2025), Gaussian-mixture
  feature replay.
"""

from .folders import load_segmentation_folder
from .protocol import background_shift_labels, incremental_tasks, mean_iou, per_class_iou
from .unet import SmallUNet

__all__ = [
    "SmallUNet",
    "background_shift_labels",
    "incremental_tasks",
    "load_segmentation_folder",
    "mean_iou",
    "per_class_iou",
]
