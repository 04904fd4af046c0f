"""Checks of observed functions: clear errors, missing values dropped."""

import numpy as np
import pytest

from sci_moe.functional import check_inputs


def test_bad_inputs_have_clear_errors():
    t, v = np.array([0.0, 1.0, 2.0]), np.array([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"not increasing.*sort"):
        check_inputs([[(t[::-1], v)]])
    with pytest.raises(ValueError, match="duplicate time"):
        check_inputs([[(np.array([0.0, 1.0, 1.0]), v)]])
    with pytest.raises(ValueError, match="all 3 values are missing"):
        check_inputs([[(t, np.full(3, np.nan))]])
    with pytest.raises(ValueError, match="sample 1 has 1 input functions, expected 2"):
        check_inputs([[(t, v), (t, v)], [(t, v)]])
    with pytest.raises(ValueError, match="same length"):
        check_inputs([[(t, v[:2])]])
    with pytest.raises(ValueError, match="outside the domain"):
        check_inputs([[(t, v)]], domain=(0.0, 1.5))
    out = check_inputs([[(t, np.array([1.0, np.nan, 3.0]))]])
    assert out[0][0][0].tolist() == [0.0, 2.0]
