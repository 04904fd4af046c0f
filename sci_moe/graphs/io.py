"""Multi-view graphs: one node set, several edge sets (views), features and labels.

:class:`MultiViewGraph` is the container every ``sci_moe.graphs`` model takes;
:func:`load_multiview_graph` / :func:`save_multiview_graph` read and write it from the
user's files (an ``.npz`` archive, or a folder of edge lists and feature / label files).
Nothing is downloaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from sci_moe._util import atomic_save_npz

__all__ = ["MultiViewGraph", "load_multiview_graph", "save_multiview_graph"]

_MASKS = ("train_mask", "val_mask", "test_mask")


def _as_edge_index(e, v: int) -> torch.Tensor:
    e = torch.as_tensor(e)
    if e.dim() != 2 or e.shape[0] != 2:
        if e.dim() == 2 and e.shape[1] == 2:
            e = e.t()
        else:
            raise ValueError(
                f"view {v}: an edge index must have shape (2, n_edges) (or (n_edges, 2)), "
                f"got {tuple(e.shape)}"
            )
    if e.dtype.is_floating_point or e.dtype == torch.bool:
        if e.numel() and not bool((e == e.round()).all()):
            raise ValueError(f"view {v}: edge indices must be integers")
    return e.to(torch.long).contiguous()


@dataclass
class MultiViewGraph:
    """A graph with ``V`` views over the same ``N`` nodes.

    Parameters
    ----------
    x : Tensor, shape (N, d), or sequence of V Tensors of shape (N, d)
        Node features shared by all views, or one feature matrix per view (same ``d``).
    edge_indices : sequence of Tensor, shape (2, n_edges_v), int64
        The edges of each view as ``source -> target`` pairs (both directions for an
        undirected view; :func:`load_multiview_graph` symmetrises by default).
    y : Tensor, shape (N,), int64, optional
        Class labels in ``[0, C)``.
    train_mask, val_mask, test_mask : Tensor, shape (N,), bool, optional
    view_names : sequence of str, optional
    allow_empty_views : bool
        A view without edges is an error by default (it is usually a loading mistake);
        with ``True`` it is kept and the GCN propagation reduces to self loops there.

    Notes
    -----
    Disconnected views are allowed: GCN normalisation adds a self loop to every node, so
    an isolated node keeps its own features. Views must index the same node set: an
    edge that names node ``>= N`` raises ``ValueError``.
    """

    x: torch.Tensor | Sequence[torch.Tensor]
    edge_indices: Sequence[torch.Tensor]
    y: torch.Tensor | None = None
    train_mask: torch.Tensor | None = None
    val_mask: torch.Tensor | None = None
    test_mask: torch.Tensor | None = None
    view_names: Sequence[str] | None = None
    allow_empty_views: bool = False
    meta: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        xs = [self.x] if isinstance(self.x, torch.Tensor | np.ndarray) else list(self.x)
        xs = [torch.as_tensor(x) for x in xs]
        if not xs:
            raise ValueError("x is empty: give one (N, d) feature matrix or one per view")
        for i, x in enumerate(xs):
            if x.dim() != 2:
                raise ValueError(f"features {i} must have shape (N, d), got {tuple(x.shape)}")
            if not x.dtype.is_floating_point:
                xs[i] = x.to(torch.get_default_dtype())
        N, d = xs[0].shape
        for i, x in enumerate(xs):
            if x.shape != (N, d):
                raise ValueError(
                    f"views have different node counts or feature sizes: features 0 are "
                    f"{(N, d)}, features {i} are {tuple(x.shape)}; every view must describe "
                    "the same N nodes with the same d features"
                )
        edges = [_as_edge_index(e, v) for v, e in enumerate(self.edge_indices)]
        if not edges:
            raise ValueError("a multi-view graph needs at least one view (edge index)")
        if len(xs) not in (1, len(edges)):
            raise ValueError(
                f"{len(xs)} feature matrices for {len(edges)} views: give one shared "
                "matrix or exactly one per view"
            )
        for v, e in enumerate(edges):
            if e.shape[1] == 0 and not self.allow_empty_views:
                raise ValueError(
                    f"view {v} has no edges; check the file, drop the view, or pass "
                    "allow_empty_views=True to keep it (self loops only)"
                )
            if e.numel() and (int(e.min()) < 0 or int(e.max()) >= N):
                raise ValueError(
                    f"view {v} names nodes in [{int(e.min())}, {int(e.max())}] but there are "
                    f"N = {N} nodes (features rows); views with different node counts are not "
                    "supported: index every view over the same node set"
                )
        self.x = xs[0] if len(xs) == 1 else xs
        self.edge_indices = edges
        if self.y is not None:
            y = torch.as_tensor(self.y).to(torch.long).reshape(-1)
            if y.shape[0] != N:
                raise ValueError(f"y has {y.shape[0]} labels for N = {N} nodes")
            if y.numel() and int(y.min()) < 0:
                raise ValueError("labels must be >= 0 (use masks to hide unlabeled nodes)")
            self.y = y
        for name in _MASKS:
            m = getattr(self, name)
            if m is not None:
                m = torch.as_tensor(m).to(torch.bool).reshape(-1)
                if m.shape[0] != N:
                    raise ValueError(f"{name} has {m.shape[0]} entries for N = {N} nodes")
                setattr(self, name, m)
        if self.view_names is not None:
            self.view_names = [str(n) for n in self.view_names]
            if len(self.view_names) != len(edges):
                raise ValueError(f"{len(self.view_names)} view names for {len(edges)} views")

    @property
    def num_nodes(self) -> int:
        """``N``."""
        return self.features()[0].shape[0]

    @property
    def num_views(self) -> int:
        """``V``."""
        return len(self.edge_indices)

    @property
    def num_features(self) -> int:
        """``d``."""
        return self.features()[0].shape[1]

    @property
    def num_classes(self) -> int:
        """``max(y) + 1`` (0 without labels)."""
        return 0 if self.y is None or self.y.numel() == 0 else int(self.y.max()) + 1

    def features(self) -> list[torch.Tensor]:
        """Features of every view, a list of ``V`` Tensors of shape ``(N, d)``."""
        if isinstance(self.x, torch.Tensor):
            return [self.x] * len(self.edge_indices)
        return list(self.x)

    def select_views(self, views: Sequence[int]) -> MultiViewGraph:
        """A graph with only the views ``views`` (in that order), same nodes and labels."""
        views = list(views)
        feats = self.x if isinstance(self.x, torch.Tensor) else [self.x[v] for v in views]
        names = None if self.view_names is None else [self.view_names[v] for v in views]
        return MultiViewGraph(
            feats,
            [self.edge_indices[v] for v in views],
            self.y,
            self.train_mask,
            self.val_mask,
            self.test_mask,
            names,
            self.allow_empty_views,
            dict(self.meta),
        )


def save_multiview_graph(graph: MultiViewGraph, path: str | Path) -> Path:
    """Write ``graph`` as an ``.npz`` archive (atomically) that :func:`load_multiview_graph` reads.

    Keys: ``x`` (shared features) or ``x_0 ... x_{V-1}``, ``edge_index_0 ...``
    (shape ``(2, n_edges)``), and when present ``y``, ``train_mask``, ``val_mask``,
    ``test_mask``, ``view_names``.

    Returns
    -------
    Path
    """
    path = Path(path)
    arrays: dict[str, np.ndarray] = {}
    if isinstance(graph.x, torch.Tensor):
        arrays["x"] = graph.x.detach().cpu().numpy()
    else:
        for v, x in enumerate(graph.x):
            arrays[f"x_{v}"] = x.detach().cpu().numpy()
    for v, e in enumerate(graph.edge_indices):
        arrays[f"edge_index_{v}"] = e.cpu().numpy()
    for name in ("y", *_MASKS):
        t = getattr(graph, name)
        if t is not None:
            arrays[name] = t.cpu().numpy()
    if graph.view_names is not None:
        arrays["view_names"] = np.asarray(graph.view_names, dtype=str)
    atomic_save_npz(path, arrays)
    return path


def _read_table(path: Path) -> np.ndarray:
    if path.suffix == ".npy":
        return np.load(path, allow_pickle=False)
    delim = "," if path.suffix == ".csv" else None
    ndmin = 1 if path.stem in ("labels", *_MASKS) else 2
    return np.loadtxt(path, delimiter=delim, ndmin=ndmin)


def _find(folder: Path, stem: str) -> Path | None:
    for ext in (".npy", ".csv", ".txt"):
        if (folder / f"{stem}{ext}").is_file():
            return folder / f"{stem}{ext}"
    return None


def load_multiview_graph(
    path: str | Path, undirected: bool = True, allow_empty_views: bool = False
) -> MultiViewGraph:
    """Read a multi-view graph from the user's files.

    Two layouts:

    * an ``.npz`` archive as written by :func:`save_multiview_graph`;
    * a folder holding ``features.{npy,csv,txt}`` (``(N, d)``; or ``features_<k>.*`` per
      view), one ``edges_<name>.{npy,csv,txt}`` per view (``(n_edges, 2)`` integer pairs,
      views ordered by file name), and optionally ``labels.*`` (``(N,)``) and
      ``train_mask.*`` / ``val_mask.*`` / ``test_mask.*`` (0/1).

    Parameters
    ----------
    path : str or Path
    undirected : bool
        Add the reverse of every edge and remove duplicates
        (``torch_geometric.utils.to_undirected``).
    allow_empty_views : bool
        See :class:`MultiViewGraph`.

    Returns
    -------
    MultiViewGraph

    Raises
    ------
    FileNotFoundError
        When ``path`` or a required file is missing.
    ValueError
        For inconsistent views (see :class:`MultiViewGraph`).
    """
    from torch_geometric.utils import to_undirected

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no multi-view graph at {path}")
    names = None
    if path.is_file():
        with np.load(path, allow_pickle=False) as z:
            keys = set(z.files)
            V = sum(1 for k in keys if k.startswith("edge_index_"))
            if V == 0:
                raise ValueError(f"{path} holds no edge_index_<v> arrays; see save_multiview_graph")
            edges = [z[f"edge_index_{v}"] for v in range(V)]
            x = z["x"] if "x" in keys else [z[f"x_{v}"] for v in range(V)]
            extra = {k: z[k] for k in ("y", *_MASKS) if k in keys}
            if "view_names" in keys:
                names = [str(n) for n in z["view_names"]]
    else:
        files = sorted(p for p in path.iterdir() if p.stem.startswith("edges_"))
        if not files:
            raise FileNotFoundError(f"{path} holds no edges_<view>.(npy|csv|txt) files")
        names = [p.stem[len("edges_") :] for p in files]
        edges = [_read_table(p).reshape(-1, 2).T for p in files]
        feat = _find(path, "features")
        if feat is not None:
            x = _read_table(feat)
        else:
            per_view = [_find(path, f"features_{k}") for k in range(len(files))]
            if any(p is None for p in per_view):
                raise FileNotFoundError(
                    f"{path} needs features.(npy|csv|txt) or one features_<k> file per view"
                )
            x = [_read_table(p) for p in per_view]
        extra = {}
        for key, stem in (("y", "labels"), *((m, m) for m in _MASKS)):
            p = _find(path, stem)
            if p is not None:
                extra[key] = _read_table(p).reshape(-1)
    dtype = torch.get_default_dtype()
    if isinstance(x, list):
        x = [torch.as_tensor(np.asarray(a), dtype=dtype) for a in x]
        n = x[0].shape[0]
    else:
        x = torch.as_tensor(np.asarray(x), dtype=dtype)
        x = x.unsqueeze(1) if x.dim() == 1 else x
        n = x.shape[0]
    e_t = []
    for v, e in enumerate(edges):
        e = _as_edge_index(np.asarray(e), v)
        # out-of-range ids are left for MultiViewGraph's explanatory error
        if undirected and e.numel() and int(e.min()) >= 0 and int(e.max()) < n:
            e = to_undirected(e, num_nodes=n)
        e_t.append(e)
    return MultiViewGraph(x, e_t, view_names=names, allow_empty_views=allow_empty_views, **extra)
