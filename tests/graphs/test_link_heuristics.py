"""Common neighbours and Adamic-Adar: exact values on a hand-made graph, the scorer form
that evaluate_scores takes, and the SBM homophily range of the generators."""

from __future__ import annotations

import math

import pytest
import torch
from torch_geometric.data import Data

from sci_moe.graphs import (
    HEURISTICS,
    adamic_adar,
    common_neighbours,
    evaluate_scores,
    heuristic_scorer,
    link_split,
    make_graph_collection,
    make_link_graph,
)


def _graph():
    # 0-1, 0-2, 1-2, 1-3, 2-3, 3-4 (both directions, a duplicate and a self-loop)
    e = [(0, 1), (0, 2), (1, 2), (1, 3), (2, 3), (3, 4), (1, 0), (4, 4)]
    ei = torch.tensor(e).T
    return Data(edge_index=torch.cat([ei, ei.flip(0)], 1), num_nodes=5)


def test_common_neighbours_counts():
    score = common_neighbours(_graph())
    m = score(None)
    assert m.shape == (5, 5)
    assert m[0, 3] == 2  # via 1 and 2
    assert m[1, 2] == 2  # via 0 and 3
    assert m[0, 4] == 0
    assert m[2, 4] == 1  # via 3
    pairs = torch.tensor([[0, 2], [3, 4]])
    assert score(pairs).tolist() == [2.0, 1.0]
    assert torch.equal(m, m.T)


def test_adamic_adar_weights():
    m = adamic_adar(_graph())(None)
    # degrees: 0:2, 1:3, 2:3, 3:3, 4:1
    assert m[0, 3] == pytest.approx(2 / math.log(3))
    assert m[1, 2] == pytest.approx(1 / math.log(2) + 1 / math.log(3))
    assert m[2, 4] == pytest.approx(1 / math.log(3))
    assert torch.isfinite(m).all()  # the degree-1 node's weight is 0, not inf


def test_scorers_plug_into_evaluate_scores():
    g = make_link_graph("geometric", 80, 4, seed=1)
    for name in HEURISTICS:
        m = evaluate_scores(heuristic_scorer(name, g), g)
        assert 0.5 < m["auc"] <= 1.0  # local graphs: shared neighbours predict links
        assert 0.0 <= m["recall"] <= 1.0
    with pytest.raises(ValueError, match="heuristic"):
        heuristic_scorer("katz", g)


def test_scorers_ignore_held_out_edges():
    g = link_split(_graph(), held_out=0.3, seed=0)
    a = common_neighbours(g)(None)
    full = common_neighbours(_graph())(None)
    assert (a <= full).all() and not torch.equal(a, full)


def test_sbm_homophily_range():
    g = make_link_graph("sbm", 60, 4, seed=3, homophily=(0.9, 0.9))
    assert "homophily=0.90" in g.description
    # the default range draws as before: explicit default == no argument
    a = make_link_graph("sbm", 60, 4, seed=3)
    b = make_link_graph("sbm", 60, 4, seed=3, homophily=(0.3, 0.95))
    assert torch.equal(a.edge_index, b.edge_index) and a.description == b.description
    # other families ignore it
    c = make_link_graph("ws", 60, 4, seed=3, homophily=(0.9, 0.9))
    assert torch.equal(c.edge_index, make_link_graph("ws", 60, 4, seed=3).edge_index)
    with pytest.raises(ValueError, match="homophily"):
        make_link_graph("sbm", 60, 4, homophily=(0.9, 0.5))
    col = make_graph_collection(2, 0, ("sbm",), num_nodes=(40, 50), homophily=(0.8, 0.8))
    assert all("homophily=0.80" in g.description for g in col.train)
