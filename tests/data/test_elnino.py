"""El Nino loader: shape, years, pairing and subsets."""

import numpy as np
import pytest

pytest.importorskip("statsmodels")

from sci_moe.data.elnino import ELNINO_MONTHS, elnino_next_year, load_elnino


def test_load_and_pairs():
    years, sst = load_elnino()
    assert sst.shape == (61, 12) and years[0] == 1950 and years[-1] == 2010
    assert 15 < sst.min() and sst.max() < 32  # Nino 1+2 SST, deg C
    X, Y, yrs, targets = elnino_next_year()
    assert len(X) == len(Y) == 60 and yrs[0] == 1950
    np.testing.assert_array_equal(X[1][0][1], Y[0][1])  # 1951 is output of 1950, input of 1951
    np.testing.assert_array_equal(targets[0], sst[1])
    Xs, *_ = elnino_next_year(observed=0.5, seed=1)
    assert all(len(s[0][0]) == 6 and set(s[0][0]) <= set(ELNINO_MONTHS) for s in Xs)
    with pytest.raises(ValueError, match="observed"):
        elnino_next_year(observed=0.0)
