"""The ridge baseline decodes planted voxels, and less so at low SNR."""

from __future__ import annotations

import numpy as np
import pytest

from sci_moe.neuro import plant_voxels
from sci_moe.neuro.more_brain import RidgeDecoder, retrieval_accuracy


def test_ridge_decodes_and_falls_with_snr():
    rng = np.random.default_rng(0)
    y = rng.standard_normal((300, 90))
    accs = []
    for snr in (4.0, 0.05):
        d = plant_voxels(y, num_voxels=128, num_subjects=1, snr=snr, branching=(2, 4), seed=0)
        x = d.voxels["subj01"]
        r = RidgeDecoder().fit(x[:240], y[:240])
        accs.append(retrieval_accuracy(r.predict(x[240:]), y[240:])[1])
    assert accs[0] > 0.5 > accs[1]
    with pytest.raises(ValueError, match="columns"):
        r.predict(np.zeros((2, 3)))
