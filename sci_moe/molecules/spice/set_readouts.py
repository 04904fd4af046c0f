"""Ensemble readouts: pool the conformer embeddings ``g_c`` of each molecule into one.

The set encoders MARCEL (Zhu et al., ICLR 2024, ``Model4D``) and the SPiCE paper compare
against, all permutation-invariant over the conformers of a molecule:

* ``"mean"`` — ``g = (1/K) sum_c g_c``;
* ``"deepsets"`` — ``g = (1/K) sum_c psi(g_c)`` (Zaheer et al. 2017; the output MLP is
  the ``rho``);
* ``"boltzmann"`` — ``g = sum_c w_c g_c`` with the GFN2 (or stored) Boltzmann weights
  ``w_c`` of the batch (no learned weighting);
* ``"attention"`` — one self-attention block over the conformers of each molecule
  (``g_c <- LN(g_c + MHA(g_c, g_{c'}))``, then ``LN(g + MLP(g))``; SetTransformer's SAB,
  Lee et al. 2019) and attention pooling with a learned seed query (PMA).
"""

from __future__ import annotations

import torch
from torch import nn

from ..._util import scatter_mean, scatter_sum
from .ensemble import pack_by_group

__all__ = ["SET_READOUTS", "SetReadout"]

#: Names accepted by :class:`SetReadout`.
SET_READOUTS = ("mean", "deepsets", "boltzmann", "attention")


def _mlp(d_in: int, hidden: int, d_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d_in, hidden), nn.SiLU(), nn.Linear(hidden, d_out))


class SetReadout(nn.Module):
    """Pool conformer embeddings per molecule (see the module docstring).

    Parameters
    ----------
    kind : str
        One of :data:`SET_READOUTS`.
    hidden : int
        Width ``F`` of the conformer embeddings.
    heads : int
        Attention heads (``"attention"`` only; ``hidden`` must be divisible by it).
    """

    def __init__(self, kind: str, hidden: int, heads: int = 4) -> None:
        super().__init__()
        if kind not in SET_READOUTS:
            raise ValueError(f"set readout must be one of {SET_READOUTS}, got {kind!r}")
        if kind == "attention" and hidden % heads:
            raise ValueError(f"hidden={hidden} must be divisible by heads={heads}")
        self.kind = kind
        self.psi = _mlp(hidden, hidden, hidden) if kind == "deepsets" else None
        if kind == "attention":
            self.sab = nn.MultiheadAttention(hidden, heads, batch_first=True)
            self.norm1 = nn.LayerNorm(hidden)
            self.ff = _mlp(hidden, hidden, hidden)
            self.norm2 = nn.LayerNorm(hidden)
            self.seed = nn.Parameter(torch.randn(1, 1, hidden) / hidden**0.5)
            self.pma = nn.MultiheadAttention(hidden, heads, batch_first=True)

    def forward(
        self,
        g: torch.Tensor,
        conf_to_mol: torch.Tensor,
        num_mols: int,
        conf_weight: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Molecule embeddings.

        Parameters
        ----------
        g : Tensor, shape (C, F)
            Conformer embeddings.
        conf_to_mol : Tensor, shape (C,), int64
        num_mols : int
        conf_weight : Tensor, shape (C,), optional
            Boltzmann weights (sum to one per molecule); needed by ``"boltzmann"``.

        Returns
        -------
        Tensor, shape (M, F)
        """
        if self.kind == "mean":
            return scatter_mean(g, conf_to_mol, num_mols)
        if self.kind == "deepsets":
            return scatter_mean(self.psi(g), conf_to_mol, num_mols)
        if self.kind == "boltzmann":
            if conf_weight is None:
                raise ValueError("the Boltzmann readout needs conf_weight (batch.conf_weight)")
            return scatter_sum(conf_weight.to(g.dtype).unsqueeze(-1) * g, conf_to_mol, num_mols)
        rank, k_max = pack_by_group(conf_to_mol, num_mols)
        dense = g.new_zeros(num_mols, k_max, g.shape[1]).index_put((conf_to_mol, rank), g)
        pad = torch.ones(num_mols, k_max, dtype=torch.bool, device=g.device)
        pad[conf_to_mol, rank] = False
        a, _ = self.sab(dense, dense, dense, key_padding_mask=pad, need_weights=False)
        x = self.norm1(dense + a)
        x = self.norm2(x + self.ff(x))
        q = self.seed.expand(num_mols, 1, -1)
        out, _ = self.pma(q, x, x, key_padding_mask=pad, need_weights=False)
        return out[:, 0]
