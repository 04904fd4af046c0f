"""Brain decoding: voxel data and subject front ends shared by the field's papers.

Planted multi-subject voxel data with known hierarchical regions (:func:`plant_voxels`,
:class:`PlantedFMRI`, :func:`roi_labels`), a loader for user voxel matrices
(:func:`load_voxel_matrix`) and the subject-specific front end from voxels to voxel
tokens (:class:`SubjectFrontEnd`, :func:`check_voxels`).

Papers, one subpackage each:

* :mod:`sci_moe.neuro.more_brain`: MoRE-Brain stage 1 (Wei et al., NeurIPS 2025),
  hierarchical expert-choice decoding to a frozen embedding space.
"""

from .frontend import SubjectFrontEnd, check_voxels
from .io import load_voxel_matrix
from .planted import PlantedFMRI, plant_voxels, roi_labels

__all__ = [
    "PlantedFMRI",
    "SubjectFrontEnd",
    "check_voxels",
    "load_voxel_matrix",
    "plant_voxels",
    "roi_labels",
]
