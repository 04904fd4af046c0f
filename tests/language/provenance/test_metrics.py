import numpy as np
import pytest
from scipy import stats

from sci_moe.language.provenance import (
    accuracy_interval,
    confusion_matrix,
    estimate_mixture,
    wilson_interval,
)


@pytest.mark.parametrize(("k", "n"), [(0, 10), (7, 10), (50, 100), (100, 100)])
def test_wilson_matches_scipy(k, n):
    ref = stats.binomtest(k, n).proportion_ci(0.95, method="wilson")
    assert np.allclose(wilson_interval(k, n), (ref.low, ref.high), atol=1e-12)


def test_accuracy_and_confusion():
    y, p = np.array([0, 0, 1, 2]), np.array([0, 1, 1, 2])
    acc, lo, hi = accuracy_interval(y, p)
    assert acc == 0.75 and lo < 0.75 < hi
    assert confusion_matrix(y, p, 3).tolist() == [[1, 1, 0], [0, 1, 0], [0, 0, 1]]
    with pytest.raises(ValueError):
        accuracy_interval(y, p[:2])


def test_adjusted_count_recovers_mixture():
    r = np.array([[0.8, 0.1, 0.1], [0.2, 0.7, 0.1], [0.1, 0.2, 0.7]])
    truth = np.array([0.5, 0.3, 0.2])
    q = r.T @ truth
    assert np.allclose(estimate_mixture(q, r * 50), truth, atol=1e-5)
    assert np.allclose(estimate_mixture(q), q)
    with pytest.raises(ValueError, match="sums to 1"):
        estimate_mixture(np.array([0.5, 0.1]))


def test_cluster_bootstrap_is_wider_for_clustered_errors():
    # 10 documents of 20 sequences each; a document is all right or all wrong
    y = np.zeros(200, dtype=int)
    p = np.repeat([0, 0, 0, 0, 0, 0, 1, 1, 1, 1], 20)
    groups = np.repeat(np.arange(10), 20)
    acc, lo_w, hi_w = accuracy_interval(y, p)
    acc2, lo_b, hi_b = accuracy_interval(y, p, groups=groups)
    assert acc == acc2 == 0.6
    assert lo_b < lo_w and hi_b > hi_w
    assert lo_b <= 0.6 <= hi_b
