"""SPiCE: symmetry-preserving conformer-ensemble network with a geometric MoE.

Zhu, Shi, Chen, Sun, Sun, Wang, "Symmetry-Preserving Conformer Ensemble Networks for
Molecular Representation Learning", NeurIPS 2025 (public code DannieSYD/SPiCE,
``models/spice.py::DSSNetV2``). The model maps a batch of conformer ensembles
(:class:`~sci_moe.molecules.graph.EnsembleBatch`, positions in nm) to molecular
properties:

1. embed every 2D atom, ``t_i = Emb(z_i) + W a_i``, and start every conformer-atom from
   it, ``h_{c,i} = t_i``, ``V_{c,i} = 0``;
2. a radius graph inside each conformer and an
   :class:`~sci_moe.molecules.spice.ensemble.EnsembleEncoder` (PaiNN block + geometric MoE +
   cross-conformer integration per layer);
3. readout: ``g_c = sum_i phi([h_{c,i}, |V_{c,i}|])`` per conformer (channel norms of
   the vectors are invariant), an ensemble embedding
   ``g = sum_c w_c g_c`` with ``w`` uniform (``"mean"``, SPiCE), the Boltzmann weights
   (``"boltzmann"``) or learned (``"learned"``: ``w = softmax_c(a(g_c))``), then an MLP
   to the (z-scored) targets.

The prediction is invariant to an independent rotation, reflection and translation of
every conformer, to the order of the conformers and to the order of the atoms (checked
in ``tests/molecules/spice/test_spice_model.py``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch
from torch import nn

from ...moe import copy_expert
from ..backbone import scatter_sum
from ..features import ATOM_FEATURE_DIM, BOND_FEATURE_DIM
from ..graph import EnsembleBatch, radius_graph_per_conformer
from .ensemble import EnsembleEncoder, EnsembleEncoderConfig, scatter_mean
from .geometric_moe import GeometricMoE, GeometricMoEConfig, GeometricMoEInfo

__all__ = [
    "EnsembleRegressor",
    "ModelOutput",
    "SPiCE",
    "SPiCEConfig",
    "moe_load",
    "segment_softmax",
]

_READOUTS = ("mean", "boltzmann", "learned")
_POOLS = ("sum", "mean")


def segment_softmax(scores: torch.Tensor, segment: torch.Tensor, num_segments: int) -> torch.Tensor:
    """Softmax of ``scores`` within each segment.

    Parameters
    ----------
    scores : Tensor, shape (R,)
    segment : Tensor, shape (R,), int64
    num_segments : int

    Returns
    -------
    Tensor, shape (R,)
        Non-negative, summing to one over the rows of each segment.
    """
    smax = scores.new_full((num_segments,), float("-inf"))
    smax = smax.scatter_reduce(0, segment, scores.detach(), reduce="amax")
    e = torch.exp(scores - smax[segment])
    return e / scatter_sum(e, segment, num_segments)[segment]


@dataclass
class ModelOutput:
    """What a model returns for a batch.

    Attributes
    ----------
    pred : Tensor, shape (M, T)
        Predictions in the units of the targets.
    pred_norm : Tensor, shape (M, T)
        Predictions in z-scored units (what the loss compares).
    aux_loss : Tensor, scalar
        Weighted auxiliary losses (MoE balance and z-loss; 0 without MoE).
    moe : list of GeometricMoEInfo
        Routing of every geometric MoE layer (empty without MoE).
    conf_weight : Tensor, shape (C,), optional
        Conformer weights used by the ensemble readout.
    """

    pred: torch.Tensor
    pred_norm: torch.Tensor
    aux_loss: torch.Tensor
    moe: list = field(default_factory=list)
    conf_weight: torch.Tensor | None = None


class EnsembleRegressor(nn.Module):
    """Base class of the property models: target normalisation and the loss.

    Subclasses implement :meth:`forward_norm` returning ``(pred_norm, aux, moe_infos,
    conf_weight)``. Targets are z-scored with ``target_mean`` / ``target_std`` buffers
    (set from the training split with :meth:`set_target_stats`).
    """

    def __init__(self, n_targets: int) -> None:
        super().__init__()
        if n_targets < 1:
            raise ValueError(f"n_targets must be >= 1, got {n_targets}")
        self.n_targets = n_targets
        self.register_buffer("target_mean", torch.zeros(n_targets))
        self.register_buffer("target_std", torch.ones(n_targets))

    @torch.no_grad()
    def set_target_stats(self, y: torch.Tensor) -> None:
        """Fit the target normalisation on ``y`` of shape ``(M, T)`` (NaN ignored)."""
        y = torch.as_tensor(y, dtype=self.target_mean.dtype).reshape(-1, self.n_targets)
        ok = torch.isfinite(y)
        if (ok.sum(0) < 2).any():
            raise ValueError("every target needs at least two finite training values")
        y0 = torch.where(ok, y, torch.zeros_like(y))
        mean = y0.sum(0) / ok.sum(0)
        var = torch.where(ok, (y0 - mean) ** 2, torch.zeros_like(y)).sum(0) / (ok.sum(0) - 1)
        self.target_mean.copy_(mean)
        self.target_std.copy_(var.sqrt().clamp_min(1e-8))

    def forward_norm(self, batch: EnsembleBatch):
        raise NotImplementedError

    def forward(self, batch: EnsembleBatch) -> ModelOutput:
        """Predict the targets of every molecule of ``batch``."""
        if not isinstance(batch, EnsembleBatch):
            raise TypeError(
                f"expected an EnsembleBatch (sci_moe.molecules.collate_ensembles), "
                f"got {type(batch).__name__}"
            )
        batch.check_finite()  # NaN/Inf coordinates would give finite garbage
        pred_norm, aux, infos, w = self.forward_norm(batch)
        pred = pred_norm * self.target_std + self.target_mean
        return ModelOutput(pred, pred_norm, aux, infos, w)

    def loss(self, batch: EnsembleBatch) -> tuple[torch.Tensor, ModelOutput]:
        """Masked MSE on z-scored targets plus the auxiliary losses.

        .. math:: L = \\frac{1}{|\\Omega|}\\sum_{(m,t)\\in\\Omega}
           \\Big(\\hat y_{mt} - \\frac{y_{mt} - \\mu_t}{\\sigma_t}\\Big)^2 + L_{aux}

        with ``Omega`` the finite entries of ``batch.y``.
        """
        out = self(batch)
        y = batch.y.to(out.pred_norm.dtype)
        if y.shape != out.pred_norm.shape:
            raise ValueError(
                f"batch.y has shape {tuple(y.shape)} but the model predicts "
                f"{tuple(out.pred_norm.shape)}; set n_targets to the number of targets"
            )
        ok = torch.isfinite(y)
        yn = (torch.where(ok, y, torch.zeros_like(y)) - self.target_mean) / self.target_std
        err = torch.where(ok, out.pred_norm - yn, torch.zeros_like(yn))
        mse = err.square().sum() / ok.sum().clamp_min(1)
        return mse + out.aux_loss, out

    def num_parameters(self) -> int:
        """Trainable parameters."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)


@dataclass
class _EncoderSizes:
    """The sizes that SPiCE and its baselines share (documented in :class:`SPiCEConfig`)."""

    n_targets: int = 1
    atom_dim: int = ATOM_FEATURE_DIM
    bond_dim: int = BOND_FEATURE_DIM
    hidden: int = 64
    num_layers: int = 3
    num_rbf: int = 20
    cutoff_nm: float = 0.5
    max_neighbors: int | None = None
    num_atom_types: int = 100


@dataclass
class SPiCEConfig(_EncoderSizes):
    """Options of :class:`SPiCE` (defaults from the public code where sensible on a CPU).

    Parameters
    ----------
    n_targets : int
        Molecular targets ``T``.
    atom_dim, bond_dim : int
        Widths ``Fa``, ``Fb`` of ``batch.atom_attr`` and ``batch.bond_attr``; the defaults
        are those of the shipped featuriser
        (:data:`~sci_moe.molecules.features.ATOM_FEATURE_DIM`,
        :data:`~sci_moe.molecules.features.BOND_FEATURE_DIM`). 0 ignores them, and then
        the model cannot tell the two enantiomers of a molecule apart: its geometry is
        invariant to reflections, so chirality reaches it only through the atom features
        (the CIP label, ``chirality=R``/``S``).
    hidden : int
        Channels ``F`` (SPiCE: 128).
    num_layers : int
        SPiCE blocks (SPiCE with PaiNN: 3).
    num_rbf : int
        Radial basis functions.
    cutoff_nm : float
        Radius of the per-conformer graphs in nm (SPiCE/PaiNN: 1.2 nm; 0.5 nm is plenty
        for drug-like molecules and 3-5x cheaper).
    max_neighbors : int, optional
        Keep at most this many nearest neighbours per point.
    num_atom_types : int
        Size of the atomic-number embedding (``z`` must be smaller).
    use_moe : bool
        Geometric MoE layers (``False``: SPiCE without MoE — one dense scalar and one
        dense vector expert of the same form, the dense expert used for upcycling).
    num_experts, top_k, expert_hidden, gram_rank : int
        See :class:`~sci_moe.molecules.spice.geometric_moe.GeometricMoEConfig`.
    noise_std : float
        Router logit noise, training mode only.
    load_balance_coef, z_loss_coef : float
        Weights of the MoE auxiliary losses (SPiCE's ``z_beta`` = 1e-3).
    upcycle : bool
        Start the MoE layers in dense mode (expert 0 only); :meth:`SPiCE.upcycle_`
        then copies it into every expert (the trainer does this after
        ``TrainConfig.upcycle_epochs``).
    cross_conformer : bool
        Cross-conformer integration after every block.
    directions : bool
        ``False``: the blocks see distances only, the vectors stay zero (an invariant
        model; :class:`~sci_moe.molecules.spice.ensemble.EnsembleEncoderConfig`).
    heads : int
        Attention heads of the cross-conformer attention.
    readout : {"mean", "boltzmann", "learned"}
        Conformer weights of the ensemble readout.
    atom_pool : {"sum", "mean"}
        Pooling of the atoms of a conformer.
    attention : bool
        ``False``: the cross-conformer integration without its attention (conformer mean
        and GINE kept; needs ``cross_conformer``;
        :class:`~sci_moe.molecules.spice.ensemble.EnsembleEncoderConfig`).
    """

    use_moe: bool = True
    num_experts: int = 8
    top_k: int = 2
    expert_hidden: int | None = None
    gram_rank: int = 8
    noise_std: float = 0.1
    load_balance_coef: float = 0.01
    z_loss_coef: float = 1e-3
    upcycle: bool = False
    cross_conformer: bool = True
    directions: bool = True
    heads: int = 4
    readout: str = "mean"
    atom_pool: str = "sum"
    attention: bool = True

    def __post_init__(self) -> None:
        if self.n_targets < 1:
            raise ValueError(f"n_targets must be >= 1, got {self.n_targets}")
        if min(self.atom_dim, self.bond_dim) < 0:
            raise ValueError("atom_dim and bond_dim must be >= 0")
        if not self.cutoff_nm > 0:
            raise ValueError(f"cutoff_nm must be > 0 (nm), got {self.cutoff_nm}")
        if self.readout not in _READOUTS:
            raise ValueError(f"readout must be one of {_READOUTS}, got {self.readout!r}")
        if self.atom_pool not in _POOLS:
            raise ValueError(f"atom_pool must be one of {_POOLS}, got {self.atom_pool!r}")
        if self.upcycle and not self.use_moe:
            raise ValueError("upcycle=True needs use_moe=True (there is nothing to upcycle)")
        self.encoder_config()  # validate the rest

    def moe_config(self) -> GeometricMoEConfig | None:
        """The geometric-MoE options (``None`` is never returned: without MoE one expert)."""
        if not self.use_moe:
            return GeometricMoEConfig(
                hidden=self.hidden,
                num_experts=1,
                top_k=1,
                expert_hidden=self.expert_hidden,
                gram_rank=self.gram_rank,
                dense=True,
            )
        return GeometricMoEConfig(
            hidden=self.hidden,
            num_experts=self.num_experts,
            top_k=self.top_k,
            expert_hidden=self.expert_hidden,
            gram_rank=self.gram_rank,
            noise_std=self.noise_std,
            load_balance_coef=self.load_balance_coef,
            z_loss_coef=self.z_loss_coef,
            dense=self.upcycle,
        )

    def encoder_config(self) -> EnsembleEncoderConfig:
        """The :class:`~sci_moe.molecules.spice.ensemble.EnsembleEncoderConfig` of the model."""
        return EnsembleEncoderConfig(
            hidden=self.hidden,
            num_layers=self.num_layers,
            num_rbf=self.num_rbf,
            cutoff=self.cutoff_nm,
            bond_dim=self.bond_dim,
            heads=self.heads,
            moe=self.moe_config(),
            cross_conformer=self.cross_conformer,
            directions=self.directions,
            attention=self.attention,
        )

    def to_dict(self) -> dict:
        """Plain dict (JSON- and ``weights_only``-safe)."""
        return asdict(self)


class AtomEmbedding(nn.Module):
    """``t_i = Emb(z_i) + W a_i`` (the atom-feature term only when ``atom_dim > 0``)."""

    def __init__(self, hidden: int, num_atom_types: int, atom_dim: int) -> None:
        super().__init__()
        self.num_atom_types = num_atom_types
        self.emb = nn.Embedding(num_atom_types, hidden)
        self.lin = nn.Linear(atom_dim, hidden) if atom_dim > 0 else None

    def forward(self, batch: EnsembleBatch) -> torch.Tensor:
        z = batch.z
        if z.numel() and (int(z.min()) < 0 or int(z.max()) >= self.num_atom_types):
            raise ValueError(
                f"atomic numbers must be in [0, {self.num_atom_types}); got "
                f"{int(z.min())}..{int(z.max())}: raise num_atom_types"
            )
        t = self.emb(z)
        if self.lin is not None:
            if batch.atom_attr.shape[1] != self.lin.in_features:
                raise ValueError(
                    f"batch.atom_attr has {batch.atom_attr.shape[1]} columns but the model "
                    f"was built with atom_dim={self.lin.in_features}"
                )
            t = t + self.lin(batch.atom_attr.to(t.dtype))
        return t


class EnsembleReadout(nn.Module):
    """Per-conformer pooling, ensemble weighting and the output MLP (see :class:`SPiCE`)."""

    def __init__(self, hidden: int, n_targets: int, readout: str, atom_pool: str) -> None:
        super().__init__()
        self.readout, self.atom_pool = readout, atom_pool
        self.phi = nn.Sequential(
            nn.Linear(2 * hidden, hidden), nn.SiLU(), nn.Linear(hidden, hidden)
        )
        self.score = (
            nn.Sequential(nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, 1))
            if readout == "learned"
            else None
        )
        self.head = nn.Sequential(
            nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, n_targets)
        )

    def conformer_embedding(
        self, h: torch.Tensor, v: torch.Tensor, batch: EnsembleBatch
    ) -> torch.Tensor:
        """``g_c = pool_i phi([h_{c,i}, |V_{c,i}|])`` of shape ``(C, F)`` (invariant)."""
        pool = scatter_sum if self.atom_pool == "sum" else scatter_mean
        x = torch.cat([h, torch.sqrt(v.square().sum(1) + 1e-8)], dim=-1)
        return pool(self.phi(x), batch.point_to_conf, batch.num_confs)

    def weights(self, g: torch.Tensor, batch: EnsembleBatch) -> torch.Tensor:
        """Conformer weights ``w_c`` of shape ``(C,)`` (sum to 1 per molecule)."""
        if self.readout == "boltzmann":
            return batch.conf_weight.to(g.dtype)
        if self.readout == "learned":
            return segment_softmax(self.score(g).squeeze(-1), batch.conf_to_mol, batch.num_mols)
        counts = batch.confs_per_mol.to(g.dtype)
        return 1.0 / counts[batch.conf_to_mol]

    def forward(
        self, h: torch.Tensor, v: torch.Tensor, batch: EnsembleBatch
    ) -> tuple[torch.Tensor, torch.Tensor]:
        g = self.conformer_embedding(h, v, batch)
        w = self.weights(g, batch)
        gm = scatter_sum(w.unsqueeze(-1) * g, batch.conf_to_mol, batch.num_mols)
        return self.head(gm), w


class SPiCE(EnsembleRegressor):
    """SPiCE model over conformer ensembles (see the module docstring).

    Parameters
    ----------
    config : SPiCEConfig
        Built from ``**kwargs`` when omitted.

    Examples
    --------
    >>> model = SPiCE(n_targets=2, hidden=16, num_layers=1, num_experts=4)
    >>> out = model(batch)  # doctest: +SKIP
    >>> out.pred.shape  # doctest: +SKIP
    torch.Size([M, 2])
    """

    def __init__(self, config: SPiCEConfig | None = None, **kwargs) -> None:
        if config is None:
            config = SPiCEConfig(**kwargs)
        elif kwargs:
            raise TypeError("pass either a SPiCEConfig or keyword arguments, not both")
        super().__init__(config.n_targets)
        c = self.config = config
        self.embedding = AtomEmbedding(c.hidden, c.num_atom_types, c.atom_dim)
        self.encoder = EnsembleEncoder(c.encoder_config())
        self.readout = EnsembleReadout(c.hidden, c.n_targets, c.readout, c.atom_pool)

    def moe_layers(self) -> list[GeometricMoE]:
        """The geometric MoE layers, in order."""
        return list(self.encoder.moes)

    def edge_index(self, batch: EnsembleBatch) -> torch.Tensor:
        """Radius graph of every conformer, shape ``(2, E)`` (positions in the model's dtype)."""
        return self._edges(batch.pos.to(self.embedding.emb.weight.dtype), batch)

    def _edges(self, pos: torch.Tensor, batch: EnsembleBatch) -> torch.Tensor:
        c = self.config
        return radius_graph_per_conformer(pos, batch.point_to_conf, c.cutoff_nm, c.max_neighbors)

    def encode(self, batch: EnsembleBatch):
        """``(h (P, F), V (P, 3, F), t (A, F), moe infos)`` after the encoder.

        Positions are cast to the model's dtype (graphs keep them in float64), so a float64
        model is invariant to rotations to float64 precision whatever the default dtype was
        when the graphs were built.
        """
        t = self.embedding(batch)
        h = t.index_select(0, batch.point_to_atom)  # = t[point_to_atom], faster backward
        pos = batch.pos.to(h.dtype)
        return self.encoder(h, t, pos, self._edges(pos, batch), batch)

    def forward_norm(self, batch: EnsembleBatch):
        h, v, _, infos = self.encode(batch)
        pred, w = self.readout(h, v, batch)
        aux = sum((i.aux_loss for i in infos), pred.new_zeros(()))
        return pred, aux, infos if self.config.use_moe else [], w

    @property
    def is_dense(self) -> bool:
        """Whether the MoE layers are in dense mode (before upcycling)."""
        return any(m.is_dense for m in self.moe_layers())

    @torch.no_grad()
    def upcycle_(self, optimizer: torch.optim.Optimizer | None = None) -> None:
        """Copy every layer's expert 0 into all its experts, in place (sparse upcycling).

        Komatsuzaki et al. 2023; SPiCE's ``upcycling_epochs``. Parameters stay the same
        objects, so the optimiser keeps training every expert afterwards; with
        ``optimizer`` its moments are copied too.
        """
        if not self.config.use_moe:
            raise ValueError("this model has use_moe=False: build it with use_moe=True")
        for m in self.moe_layers():
            m.upcycle_(optimizer)

    @classmethod
    def from_dense(cls, dense: SPiCE, config: SPiCEConfig | None = None) -> SPiCE:
        """Upcycle a trained dense model (``use_moe=False``) into a SPiCE with MoE.

        Every parameter of ``dense`` is copied; its single scalar and vector expert of
        each layer is copied into all ``num_experts`` experts; the routers start fresh.

        Parameters
        ----------
        dense : SPiCE
            With ``config.use_moe=False``.
        config : SPiCEConfig, optional
            Defaults to ``dense.config`` with ``use_moe=True``; the sizes must match.
        """
        if dense.config.use_moe and not dense.is_dense:
            raise ValueError("from_dense needs a dense model (use_moe=False)")
        if config is None:
            config = SPiCEConfig(**{**dense.config.to_dict(), "use_moe": True, "upcycle": False})
        model = cls(config)
        src = dense.state_dict()
        upcycled: list[str] = []  # banks whose single dense expert is copied to every expert
        with torch.no_grad():
            if len(dense.moe_layers()) != len(model.moe_layers()):
                raise ValueError("dense model has a different number of layers; sizes must match")
            for i, (dl, ml) in enumerate(zip(dense.moe_layers(), model.moe_layers(), strict=True)):
                for path in ("scalar", "vector"):
                    db, mb = getattr(dl, path).experts, getattr(ml, path).experts
                    if db.num_experts != mb.num_experts:
                        copy_expert(mb, 0, source=db)  # expert 0 -> every expert
                        upcycled.append(f"encoder.moes.{i}.{path}.experts.")
            for name, p in model.state_dict().items():
                if "router" in name or name.startswith(tuple(upcycled)):
                    continue
                if name not in src:
                    raise ValueError(f"dense model has no {name}; sizes must match")
                q = src[name]
                if q.shape != p.shape:
                    raise ValueError(
                        f"{name}: dense shape {tuple(q.shape)} does not fit {tuple(p.shape)}"
                    )
                p.copy_(q)
            for m in model.moe_layers():
                m.dense.fill_(False)
        return model


def moe_load(infos: list[GeometricMoEInfo]) -> list[dict]:
    """Fraction of assignments per expert, per layer and path (for usage plots)."""
    out = []
    for info in infos:
        row = {}
        for name, r in (("scalar", info.scalar_routing), ("vector", info.vector_routing)):
            load = r.load
            row[name] = (load / load.sum().clamp_min(1)).tolist()
        out.append(row)
    return out
