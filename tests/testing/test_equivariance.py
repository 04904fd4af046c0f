"""sci_moe.testing.assert_equivariant passes on equivariant maps and fails on others."""

from __future__ import annotations

import pytest
import torch

from sci_moe.testing import assert_equivariant, cartesian_action, equivariance_error
from sci_moe.testing.equivariance import random_rotation


def _centroid_distances(pos):
    """Invariant: distance of each point to the centroid."""
    return (pos - pos.mean(0)).norm(dim=-1)


def _vectors_to_centroid(pos):
    """Equivariant vectors, translation invariant."""
    return pos - pos.mean(0)


def test_random_rotation_is_orthogonal(float_dtype):
    gen = torch.Generator().manual_seed(1)
    for reflect in (False, True):
        r = random_rotation(gen, reflect=reflect)
        assert r.dtype == float_dtype
        torch.testing.assert_close(r @ r.T, torch.eye(3, dtype=float_dtype))
        assert float(torch.det(r)) == pytest.approx(-1.0 if reflect else 1.0, abs=1e-5)


def test_passes_on_cartesian_maps(float_dtype):
    pos = torch.randn(6, 3)
    err = assert_equivariant(
        _centroid_distances, pos, "cartesian_points", None, translation=True, reflection=True
    )
    assert err < 1e-4
    assert_equivariant(
        _vectors_to_centroid,
        pos,
        "cartesian_points",
        "cartesian_vectors",
        translation=True,
        reflection=True,
    )
    # vectors on another axis: (P, 3, F)
    v = torch.randn(5, 3, 4)
    assert_equivariant(
        lambda v: v * v.norm(dim=1, keepdim=True),
        v,
        cartesian_action(axis=-2),
        cartesian_action(axis=-2),
        reflection=True,
    )


def test_fails_on_non_equivariant_maps(float_dtype):
    pos = torch.randn(6, 3)
    # a fixed direction breaks rotation equivariance
    with pytest.raises(AssertionError, match=r"(?s)not equivariant.*output 0 under rotation 0"):
        assert_equivariant(
            lambda x: x + torch.tensor([1.0, 0.0, 0.0]),
            pos,
            "cartesian_vectors",
            "cartesian_vectors",
        )
    # positions are not translation invariant
    with pytest.raises(AssertionError, match="translation"):
        assert_equivariant(
            lambda x: x.norm(dim=-1), pos, "cartesian_points", None, translation=True
        )
    # the cross product is a pseudovector: equivariant under SO(3), not under reflections
    b = torch.randn(6, 3)
    args = (pos, b)
    specs = ["cartesian_vectors"] * 2
    assert_equivariant(torch.linalg.cross, args, specs, "cartesian_vectors")
    with pytest.raises(AssertionError, match="rotation-reflection"):
        assert_equivariant(torch.linalg.cross, args, specs, "cartesian_vectors", reflection=True)


def test_irreps_specs_use_e3nn(float_dtype):
    pytest.importorskip("e3nn")
    from e3nn import o3

    irreps = o3.Irreps("2x0e + 1x1o + 1x2e")
    x = irreps.randn(4, -1)
    lin = o3.Linear(irreps, irreps).to(float_dtype)
    assert_equivariant(lin, x, "2x0e + 1x1o + 1x2e", irreps, reflection=True)
    # a plain linear map on the same features is not equivariant
    w = torch.randn(irreps.dim, irreps.dim)
    with pytest.raises(AssertionError, match="output 0"):
        assert_equivariant(lambda x: x @ w, x, irreps, irreps)
    with pytest.raises(ValueError, match="dimension"):
        assert_equivariant(lin, x, "1x0e", irreps)


def test_permutations_with_index_inputs(float_dtype):
    # sum of neighbour features along edges: equivariant to relabelling the nodes
    h = torch.randn(5, 2)
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 0], [1, 2, 3, 4, 0, 2]])

    def conv(h, edge_index):
        return torch.zeros_like(h).index_add_(0, edge_index[1], h[edge_index[0]])

    assert_equivariant(conv, (h, edge_index), permute_in=[0, "index"], permute_out=[0])

    def not_permutation_equivariant(h, edge_index):
        return conv(h, edge_index) + torch.arange(5.0)[:, None]

    with pytest.raises(AssertionError, match="permutation"):
        assert_equivariant(
            not_permutation_equivariant, (h, edge_index), permute_in=[0, "index"], permute_out=[0]
        )


def test_bad_arguments():
    x = torch.randn(3, 3)
    with pytest.raises(ValueError, match="unknown equivariance spec"):
        assert_equivariant(lambda x: x, x, 3, None)
    with pytest.raises(ValueError, match="one each"):
        assert_equivariant(lambda x, y: x, (x, x), ["cartesian_vectors"], None)
    with pytest.raises(ValueError, match="both permute_in and permute_out"):
        assert_equivariant(lambda x: x, x, permute_in=[0])
    rows = equivariance_error(lambda x: x, x, "cartesian_vectors", "cartesian_vectors")
    assert {r["transformation"] for r in rows} == {"rotation 0", "rotation 1", "rotation 2"}
