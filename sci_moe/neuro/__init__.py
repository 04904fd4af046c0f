"""Brain decoding: voxel data and subject front ends shared by the field's papers.

Planted multi-subject voxel data with known regions: linear responses in a region
hierarchy (:func:`plant_voxels`) and nonlinear, region-specific responses in a two-level
network structure (:func:`plant_nonlinear_voxels`), both as :class:`PlantedFMRI` with
:func:`roi_labels`; a loader for user voxel matrices (:func:`load_voxel_matrix`) and the
subject-specific front end from voxels to voxel tokens (:class:`SubjectFrontEnd`,
:func:`check_voxels`).

Papers, one subpackage each:

* :mod:`sci_moe.neuro.more_brain`: MoRE-Brain stage 1 (Wei et al., NeurIPS 2025),
  hierarchical expert-choice decoding to a frozen embedding space.
"""

from .frontend import SubjectFrontEnd, check_voxels
from .io import load_voxel_matrix
from .planted import (
    RESPONSE_FAMILIES,
    PlantedFMRI,
    plant_nonlinear_voxels,
    plant_voxels,
    roi_labels,
)

__all__ = [
    "RESPONSE_FAMILIES",
    "PlantedFMRI",
    "SubjectFrontEnd",
    "check_voxels",
    "load_voxel_matrix",
    "plant_nonlinear_voxels",
    "plant_voxels",
    "roi_labels",
]
