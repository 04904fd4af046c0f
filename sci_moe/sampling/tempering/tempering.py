"""Simulated tempering (ST) and parallel tempering (PT) over a batch of chains.

ST state per chain: ``(x, l)``. The joint target is

.. math:: \\pi(l, x) \\propto \\exp\\big(g_l + \\beta_l \\log p(x)\\big),

so the level marginal is :math:`\\propto e^{g_l} Z_l` with :math:`Z_l = \\int p^{\\beta_l}`;
``g_l = -\\log Z_l`` makes it uniform. A level move proposes ``l' = l \\pm 1`` and accepts with
:math:`\\min\\{1, \\exp((\\beta_{l'} - \\beta_l)\\log p(x) + g_{l'} - g_l)\\}` (Marinari-Parisi
1992). Weights ``g`` are given, estimated by Park-Pande (2007) thermodynamic integration from
pilot runs, or adapted online by SAMS (Tan 2017) / Wang-Landau with a decreasing gain, as in
OpenMM's ``ExpandedEnsembleSampler`` and openmmtools' ``SAMSSampler``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from torch import Tensor

from ..._util import progress_bar
from .checks import CheckedLogProb, check_finite_rows, check_finite_vector
from .kernels import RWMH, LogProb
from .langevin import BAOAB
from .weights import (
    OnlineWeights,
    check_weight_adaptation,
    park_pande_weights,
    resolve_weight_mode,
)

__all__ = [
    "OnlineWeights",
    "ParallelTempering",
    "SimulatedTempering",
    "TemperingConfig",
    "TemperingResult",
    "park_pande_weights",
]

_WEIGHT_MODES = ("given", "park-pande", "sams", "wang-landau")


@dataclass
class TemperingConfig:
    """Settings shared by :class:`SimulatedTempering` and :class:`ParallelTempering`.

    Parameters
    ----------
    betas : Tensor, shape (L,)
        Increasing inverse temperatures with ``betas[-1] == 1`` (see :mod:`.ladder`).
    kernel : RWMH, MALA or BAOAB
        Local kernel; its ``step_size`` is the scale at ``beta = 1``. With
        :class:`~.langevin.BAOAB` (Langevin dynamics at temperature ``1/beta``) each chain
        carries velocities, handled at level moves / swaps as the kernel's ``velocities``
        option says.
    n_local_steps : int
        Local kernel steps between level moves (swaps for PT).
    scale_step_with_beta : bool
        Use step ``step_size / sqrt(beta_l)`` at level ``l`` (natural for power tempering).
        Ignored by BAOAB, whose timestep stability limit does not depend on temperature.
    weights : {"given", "park-pande", "sams", "wang-landau"}, optional
        How ST level weights ``g`` are obtained (ignored by PT). Default: ``"given"`` when
        ``log_weights`` is passed, else ``"sams"``.
    log_weights : Tensor, shape (L,), optional
        Required for ``"given"``; the starting point for ``"sams"``/``"wang-landau"``.
    gain0 : float
        Initial gain :math:`\\gamma_0` of the online updates.
    gain_exponent : float
        Stage-0 SAMS gain :math:`\\gamma_0\\min(\\pi^*, t^{-\\beta_0})`, ``beta_0`` in (0.5, 1).
    flatness : float
        Histogram counts as flat when every level's visit fraction since the last stage
        change is at least ``(1 - flatness)`` times its target ``1/L``.
    n_pilot_steps : int
        Local steps per level for Park-Pande means of ``log_prob``.
    """

    betas: Tensor
    kernel: RWMH | BAOAB = field(default_factory=RWMH)
    n_local_steps: int = 1
    scale_step_with_beta: bool = True
    weights: str | None = None
    log_weights: Tensor | None = None
    gain0: float = 1.0
    gain_exponent: float = 0.8
    flatness: float = 0.2
    n_pilot_steps: int = 200

    def __post_init__(self) -> None:
        b = torch.as_tensor(self.betas)
        if b.ndim != 1 or b.numel() < 2:
            raise ValueError("betas must be a 1-D tensor with at least 2 levels")
        if not bool((b[1:] > b[:-1]).all()) or not bool(b[0] > 0):
            raise ValueError("betas must be positive and strictly increasing (hottest first)")
        if abs(float(b[-1]) - 1.0) > 1e-12:
            raise ValueError(f"betas[-1] must be 1 (the target), got {float(b[-1])}")
        self.betas = b
        if self.n_local_steps < 1:
            raise ValueError(f"n_local_steps must be >= 1, got {self.n_local_steps}")
        self.weights = resolve_weight_mode(self.weights, self.log_weights, _WEIGHT_MODES)
        if self.log_weights is not None:
            self.log_weights = torch.as_tensor(self.log_weights)
            if self.log_weights.shape != b.shape:
                raise ValueError(f"log_weights must have shape {tuple(b.shape)}")
            check_finite_vector(self.log_weights, "log_weights")
        check_weight_adaptation(self.gain0, self.gain_exponent, self.flatness, self.n_pilot_steps)

    @property
    def n_levels(self) -> int:
        return int(self.betas.numel())


@dataclass
class TemperingResult:
    """Trace of a tempering run (``T`` recorded iterations, ``B`` chains or replicas).

    Attributes
    ----------
    x : Tensor, shape (T, B, d)
        States; for ST chain ``b`` sits at level ``levels[t, b]``; for PT ``x[:, l]`` is
        the replica currently at level ``l``.
    log_prob : Tensor, shape (T, B)
        Untempered ``log_prob(x)``.
    levels : Tensor, shape (T, B), long
        ST: level of each chain. PT: level of each *replica* (for round trips).
    log_weights : Tensor, shape (T, L)
        ST weights ``g`` after each iteration (constant unless adapted).
    local_acceptance : Tensor, shape (L,)
        Local-kernel acceptance per level.
    level_acceptance : Tensor, shape (L-1,)
        Acceptance of moves (ST) or swaps (PT) between levels ``l`` and ``l+1``.
    wall_time : float
        Seconds spent in the run.
    """

    x: Tensor
    log_prob: Tensor
    levels: Tensor
    log_weights: Tensor
    local_acceptance: Tensor
    level_acceptance: Tensor
    wall_time: float

    def log_z_estimate(self) -> Tensor:
        """Final :math:`\\log Z_l - \\log Z_{L-1}` implied by the weights, shape (L,)."""
        g = self.log_weights[-1]
        return -(g - g[-1])


class _Base:
    def __init__(self, log_prob: LogProb, config: TemperingConfig) -> None:
        if not callable(log_prob):
            raise TypeError("log_prob must be a callable (B, d) -> (B,)")
        self.log_prob = log_prob
        self.config = config
        self._checked = CheckedLogProb(log_prob)

    @property
    def _dynamics(self) -> bool:
        return bool(getattr(self.config.kernel, "uses_velocities", False))

    def _local(self, x, lp, beta, gen, acc, cnt, lev, aux):
        # aux carries a dynamics kernel's velocities "v" and cached gradient "g"
        cfg, k = self.config, self.config.kernel
        scale = cfg.scale_step_with_beta and not self._dynamics
        h = k.step_size / (beta.sqrt() if scale else 1.0)
        h = torch.as_tensor(h, dtype=x.dtype).expand(x.shape[0])
        for _ in range(cfg.n_local_steps):
            if self._dynamics:
                s = k.step(
                    x,
                    self._checked,
                    beta,
                    generator=gen,
                    step_size=h,
                    lp=lp,
                    velocities=aux.get("v"),
                    grad=aux.get("g"),
                )
                aux["v"], aux["g"] = s.velocities, s.grad
            else:
                s = k.step(x, self._checked, beta, generator=gen, step_size=h, lp=lp)
            x, lp = s.x, s.log_prob
            acc.index_add_(0, lev, s.accepted.to(acc.dtype))
            cnt.index_add_(0, lev, torch.ones_like(acc[lev]))
        return x, lp

    def _check(self, x0: Tensor, n_iterations: int, what: str = "chain") -> None:
        if x0.ndim != 2:
            raise ValueError(f"x0 must have shape (B, d), got {tuple(x0.shape)}")
        if n_iterations < 1:
            raise ValueError(f"n_iterations must be >= 1, got {n_iterations}")
        check_finite_rows(x0, "x0", what)
        self._checked.what = what


class SimulatedTempering(_Base):
    """Simulated tempering over ``B`` independent chains sharing one set of weights.

    Examples
    --------
    Eight chains in a 1-D double well, six levels from beta = 0.01 to 1, SAMS weights:

    >>> import torch
    >>> from sci_moe.sampling.tempering import geometric_ladder
    >>> def log_prob(x):  # wells at -2 and +2
    ...     wells = torch.stack([-(x - 2) ** 2 / 0.1, -(x + 2) ** 2 / 0.1])
    ...     return torch.logsumexp(wells, 0).sum(-1)
    >>> cfg = TemperingConfig(geometric_ladder(0.01, 6), weights="sams")
    >>> res = SimulatedTempering(log_prob, cfg).run(torch.zeros(8, 1), 300, seed=0, progress=False)
    >>> res.x.shape, res.levels.shape, res.log_weights.shape  # (iterations, chains, ...)
    (torch.Size([300, 8, 1]), torch.Size([300, 8]), torch.Size([300, 6]))
    """

    def pilot_weights(self, x0: Tensor, gen: torch.Generator) -> Tensor:
        """Park-Pande weights from ``n_pilot_steps`` local steps at every level."""
        cfg = self.config
        betas = cfg.betas.to(x0.dtype)
        means = []
        for beta in betas:
            x, lp = x0.clone(), self._checked(x0)
            bt = beta.expand(x.shape[0])
            lev = torch.zeros(x.shape[0], dtype=torch.long)
            vals, aux = [], {}
            for t in range(cfg.n_pilot_steps):
                x, lp = self._local(x, lp, bt, gen, torch.zeros(1), torch.zeros(1), lev, aux)
                if t >= cfg.n_pilot_steps // 2:
                    vals.append(lp)
            means.append(torch.stack(vals).mean())
        return park_pande_weights(betas, torch.stack(means))

    def run(
        self,
        x0: Tensor,
        n_iterations: int,
        *,
        levels0: Tensor | None = None,
        seed: int | None = None,
        generator: torch.Generator | None = None,
        thin: int = 1,
        progress: bool | None = None,
    ) -> TemperingResult:
        """Run ``n_iterations`` of (local steps, level move, weight update).

        Parameters
        ----------
        x0 : Tensor, shape (B, d)
        n_iterations : int
        levels0 : Tensor, shape (B,), long, optional
            Starting levels (default: the target level ``L-1``).
        seed, generator
            Randomness; ``generator`` wins over ``seed``.
        thin : int
            Record every ``thin``-th iteration.
        progress : bool, optional
            tqdm bar; ``None`` shows it only on a terminal.
        """
        self._check(x0, n_iterations)
        if thin < 1:
            raise ValueError(f"thin must be >= 1, got {thin}")
        cfg = self.config
        L, B = cfg.n_levels, x0.shape[0]
        gen = generator or torch.Generator().manual_seed(0 if seed is None else seed)
        betas = cfg.betas.to(x0.dtype)
        t0 = time.perf_counter()
        lp0 = self._checked.initial(x0).detach()
        if cfg.weights == "park-pande":
            g = self.pilot_weights(x0, gen)
        elif cfg.log_weights is not None:
            g = cfg.log_weights.to(x0.dtype).clone()
        else:
            g = torch.zeros(L, dtype=x0.dtype)
        check_finite_vector(g, "log_weights")
        lev = torch.full((B,), L - 1, dtype=torch.long) if levels0 is None else levels0.clone()
        if (
            lev.shape != (B,)
            or lev.dtype.is_floating_point
            or lev.dtype == torch.bool
            or int(lev.min()) < 0
            or int(lev.max()) >= L
        ):
            raise ValueError(
                f"levels0 must be an integer tensor of shape ({B},) with values in [0, {L - 1}]"
            )
        lev = lev.long()
        x, lp = x0.detach().clone(), lp0
        aux = {"v": cfg.kernel.init_velocities(x, betas[lev], gen)} if self._dynamics else {}
        acc, cnt = torch.zeros(L, dtype=x.dtype), torch.zeros(L, dtype=x.dtype)
        lacc, lcnt = torch.zeros(L - 1, dtype=x.dtype), torch.zeros(L - 1, dtype=x.dtype)
        adapt = cfg.weights in ("sams", "wang-landau")
        if adapt:
            online = OnlineWeights(cfg.weights, L, cfg.gain0, cfg.gain_exponent, cfg.flatness)
        rec: dict[str, list[Tensor]] = {"x": [], "lp": [], "lev": [], "g": []}
        for t in progress_bar(
            range(1, n_iterations + 1),
            disable=None if progress is None else not progress,
            desc="simulated tempering",
            leave=False,
        ):
            x, lp = self._local(x, lp, betas[lev], gen, acc, cnt, lev, aux)
            # level move to a random neighbour; out-of-range proposals are rejected
            step = torch.randint(0, 2, (B,), generator=gen) * 2 - 1
            new = lev + step
            valid = (new >= 0) & (new < L)
            new_c = new.clamp(0, L - 1)
            log_a = (betas[new_c] - betas[lev]) * lp + g[new_c] - g[lev]
            ok = valid & (torch.rand(B, generator=gen, dtype=x.dtype).log() < log_a)
            pair = torch.minimum(lev, new_c)[valid]
            lacc.index_add_(0, pair, ok[valid].to(x.dtype))
            lcnt.index_add_(0, pair, torch.ones_like(pair, dtype=x.dtype))
            if self._dynamics:
                aux["v"] = cfg.kernel.change_level(aux["v"], betas[lev], betas[new_c], ok, gen)
            lev = torch.where(ok, new_c, lev)
            if adapt:
                # Rao-Blackwellised level probabilities p(l | x) for every chain
                p = torch.softmax(g[None, :] + betas[None, :] * lp[:, None], dim=1).mean(0)
                g = online.update(g, p, t)
            if t % thin == 0:
                rec["x"].append(x)
                rec["lp"].append(lp)
                rec["lev"].append(lev)
                rec["g"].append(g)
        self._checked.report()
        return TemperingResult(
            x=torch.stack(rec["x"]),
            log_prob=torch.stack(rec["lp"]),
            levels=torch.stack(rec["lev"]),
            log_weights=torch.stack(rec["g"]),
            local_acceptance=acc / cnt.clamp(min=1),
            level_acceptance=lacc / lcnt.clamp(min=1),
            wall_time=time.perf_counter() - t0,
        )


class ParallelTempering(_Base):
    """Replica exchange between neighbouring levels, ``L`` replicas per independent system.

    Swaps alternate between even and odd neighbour pairs (deterministic even-odd scheme);
    a swap of levels ``l, l+1`` is accepted with
    :math:`\\min\\{1, \\exp((\\beta_{l+1}-\\beta_l)(\\log p(x_l) - \\log p(x_{l+1})))\\}`.
    """

    def run(
        self,
        x0: Tensor,
        n_iterations: int,
        *,
        seed: int | None = None,
        generator: torch.Generator | None = None,
        thin: int = 1,
        progress: bool | None = None,
    ) -> TemperingResult:
        """Run PT on ``M`` independent systems of ``L`` replicas.

        Parameters
        ----------
        x0 : Tensor, shape (M, d)
            One start per system; replicas of a system start at the same point.

        Returns
        -------
        TemperingResult
            ``x`` has shape ``(T, M * L, d)`` laid out system-major (``index = m * L + l``
            is the replica at level ``l`` of system ``m``); ``levels`` gives each replica's
            level, in the same layout keyed by replica id.
        """
        self._check(x0, n_iterations, what="system")
        if thin < 1:
            raise ValueError(f"thin must be >= 1, got {thin}")
        cfg = self.config
        L, M = cfg.n_levels, x0.shape[0]
        gen = generator or torch.Generator().manual_seed(0 if seed is None else seed)
        betas = cfg.betas.to(x0.dtype)
        t0 = time.perf_counter()
        x = x0.detach().repeat_interleave(L, dim=0)  # (M*L, d)
        lp = self._checked.initial(x, group=L).detach()
        lev_of_pos = torch.arange(L).repeat(M)
        beta_pos = betas[lev_of_pos]
        replica = torch.arange(M * L)  # replica id at each position
        aux = {"v": cfg.kernel.init_velocities(x, beta_pos, gen)} if self._dynamics else {}
        acc, cnt = torch.zeros(L, dtype=x.dtype), torch.zeros(L, dtype=x.dtype)
        lacc, lcnt = torch.zeros(L - 1, dtype=x.dtype), torch.zeros(L - 1, dtype=x.dtype)
        rec: dict[str, list[Tensor]] = {"x": [], "lp": [], "lev": []}
        for t in progress_bar(
            range(1, n_iterations + 1),
            disable=None if progress is None else not progress,
            desc="parallel tempering",
            leave=False,
        ):
            x, lp = self._local(x, lp, beta_pos, gen, acc, cnt, lev_of_pos, aux)
            lo = torch.arange(t % 2, L - 1, 2)
            if lo.numel():
                i = (torch.arange(M)[:, None] * L + lo[None, :]).reshape(-1)
                j = i + 1
                log_a = (beta_pos[j] - beta_pos[i]) * (lp[i] - lp[j])
                ok = torch.rand(i.numel(), generator=gen, dtype=x.dtype).log() < log_a
                lacc.index_add_(0, lev_of_pos[i], ok.to(x.dtype))
                lcnt.index_add_(0, lev_of_pos[i], torch.ones_like(ok, dtype=x.dtype))
                si, sj = i[ok], j[ok]
                perm = torch.arange(M * L)
                perm[si], perm[sj] = sj, si
                x, lp, replica = x[perm], lp[perm], replica[perm]
                if self._dynamics:  # velocities travel with their replica to its new level
                    moved = perm != torch.arange(M * L)
                    v = aux["v"][perm]
                    aux["v"] = cfg.kernel.change_level(v, beta_pos[perm], beta_pos, moved, gen)
                    aux["g"] = aux["g"][perm]
            if t % thin == 0:
                lev_of_rep = torch.empty_like(replica)
                lev_of_rep[replica] = lev_of_pos
                rec["x"].append(x)
                rec["lp"].append(lp)
                rec["lev"].append(lev_of_rep)
        T = len(rec["x"])
        self._checked.report()
        return TemperingResult(
            x=torch.stack(rec["x"]),
            log_prob=torch.stack(rec["lp"]),
            levels=torch.stack(rec["lev"]),
            log_weights=torch.zeros(T, L, dtype=x.dtype),
            local_acceptance=acc / cnt.clamp(min=1),
            level_acceptance=lacc / lcnt.clamp(min=1),
            wall_time=time.perf_counter() - t0,
        )
