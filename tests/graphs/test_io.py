"""Multi-view graph container and loader: round trips and clear errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sci_moe.graphs import MultiViewGraph, load_multiview_graph, save_multiview_graph


def _graph():
    x = torch.randn(5, 3)
    e0 = torch.tensor([[0, 1], [1, 0]])
    e1 = torch.tensor([[2, 3, 3, 4], [3, 2, 4, 3]])
    return MultiViewGraph(
        x,
        [e0, e1],
        y=torch.tensor([0, 1, 0, 1, 2]),
        train_mask=torch.tensor([1, 1, 0, 0, 0]),
        view_names=["a", "b"],
    )


def test_npz_round_trip(tmp_path):
    g = _graph()
    save_multiview_graph(g, tmp_path / "g.npz")
    h = load_multiview_graph(tmp_path / "g.npz")
    assert torch.allclose(h.x, g.x) and torch.equal(h.y, g.y)
    assert torch.equal(h.train_mask, g.train_mask) and h.view_names == ["a", "b"]
    for a, b in zip(h.edge_indices, g.edge_indices, strict=True):
        assert {tuple(p) for p in a.t().tolist()} == {tuple(p) for p in b.t().tolist()}
    assert h.num_views == 2 and h.num_nodes == 5 and h.num_classes == 3


def test_folder_layout_symmetrises(tmp_path):
    np.savetxt(
        tmp_path / "features.csv", np.random.default_rng(0).normal(size=(4, 2)), delimiter=","
    )
    np.savetxt(tmp_path / "edges_coauthor.txt", np.array([[0, 1], [1, 2]]), fmt="%d")
    np.save(tmp_path / "edges_cite.npy", np.array([[2, 3]]))
    np.savetxt(tmp_path / "labels.txt", np.array([0, 1, 1, 0]), fmt="%d")
    g = load_multiview_graph(tmp_path)
    assert g.view_names == ["cite", "coauthor"]
    assert g.edge_indices[0].shape[1] == 2 and g.edge_indices[1].shape[1] == 4
    assert g.y.tolist() == [0, 1, 1, 0] and g.num_features == 2


def test_errors(tmp_path):
    x = torch.randn(4, 2)
    with pytest.raises(ValueError, match="different node counts"):
        MultiViewGraph([x, torch.randn(5, 2)], [torch.tensor([[0], [1]])] * 2)
    with pytest.raises(ValueError, match="N = 4"):
        MultiViewGraph(x, [torch.tensor([[0], [7]])])
    with pytest.raises(ValueError, match="no edges"):
        MultiViewGraph(x, [torch.zeros(2, 0, dtype=torch.long)])
    g = MultiViewGraph(x, [torch.zeros(2, 0, dtype=torch.long)], allow_empty_views=True)
    assert g.num_views == 1
    with pytest.raises(ValueError, match=r"shape \(2, n_edges\)"):
        MultiViewGraph(x, [torch.zeros(3, 3, dtype=torch.long)])
    with pytest.raises(FileNotFoundError):
        load_multiview_graph(tmp_path / "missing.npz")
    with pytest.raises(FileNotFoundError, match="edges_"):
        load_multiview_graph(tmp_path)
