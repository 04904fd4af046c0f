"""Conformer ensembles from SMILES or RDKit molecules.

Recipe (RDKit 2024+): seeded ETKDGv3 embedding (Riniker & Landrum 2015; Wang et al. 2020)
of ``num_attempts`` conformers, MMFF94 optimisation, an energy window, greedy
symmetry-aware heavy-atom RMSD pruning in order of increasing energy
(``rdMolAlign.GetBestRMS``), at most ``max_confs`` conformers kept, energies in kJ/mol
and Boltzmann weights at ``temperature_k``.

:func:`generate_ensembles` runs this over many molecules in parallel (one process per
core, one thread each), caches every result on disk under a content hash (input +
settings + RDKit version) so a rerun costs nothing, and never drops a molecule silently:
every failure (invalid SMILES, no MMFF parameters, embedding failure, a crashed worker)
is listed by name with its reason in the returned :class:`EnsembleReport`.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import json
import multiprocessing as mp
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from rdkit import Chem, RDLogger, rdBase
from rdkit.Chem import AllChem, rdDistGeom, rdMolAlign

from .graph import EnsembleGraph, boltzmann_weights

__all__ = [
    "KCAL_TO_KJ",
    "ConformerConfig",
    "ConformerEnsemble",
    "EnsembleReport",
    "embed_ensemble",
    "ensemble_cache_key",
    "generate_ensembles",
    "parallel_map",
]

#: kcal/mol -> kJ/mol.
KCAL_TO_KJ = 4.184
_CACHE_VERSION = 3
_FORCE_FIELDS = ("mmff94", "mmff94s")


@dataclass
class ConformerConfig:
    """Settings of :func:`embed_ensemble`.

    Parameters
    ----------
    num_attempts : int
        Conformers ETKDGv3 tries to embed.
    max_confs : int
        Conformers kept (lowest energies after pruning).
    seed : int
        ETKDG ``randomSeed`` (results are reproducible for a fixed seed and RDKit).
    prune_rms : float
        Heavy-atom RMSD threshold in Angstrom for symmetry-aware pruning after
        optimisation (0 switches pruning off); also ETKDG's ``pruneRmsThresh`` before it.
    energy_window_kj : float or None
        Drop conformers more than this above the lowest (kJ/mol); None keeps all.
    temperature_k : float
        Temperature of the Boltzmann weights (K).
    force_field : {"mmff94", "mmff94s"}
        MMFF variant for optimisation and energies.
    max_iters : int
        MMFF optimisation iterations per conformer.
    max_matches : int
        Symmetry matches tried per RMSD (``GetBestRMS(maxMatches=...)``).
    assign_stereo : bool
        Give unspecified stereocentres and double bonds a definite configuration (that of
        one seeded ETKDG embedding, so always a feasible one) so the ensemble holds one
        stereoisomer, not a mixture of mirror images; the result is
        :attr:`ConformerEnsemble.stereo_smiles`.
    """

    num_attempts: int = 30
    max_confs: int = 10
    seed: int = 0xF00D
    prune_rms: float = 0.5
    energy_window_kj: float | None = 10.0 * KCAL_TO_KJ
    temperature_k: float = 298.15
    force_field: str = "mmff94"
    max_iters: int = 2000
    max_matches: int = 10000
    assign_stereo: bool = True

    def __post_init__(self) -> None:
        if self.num_attempts < 1:
            raise ValueError(f"num_attempts must be >= 1, got {self.num_attempts}")
        if self.max_confs < 1:
            raise ValueError(f"max_confs must be >= 1, got {self.max_confs}")
        if self.prune_rms < 0:
            raise ValueError(f"prune_rms must be >= 0 Angstrom, got {self.prune_rms}")
        if self.energy_window_kj is not None and not self.energy_window_kj > 0:
            raise ValueError(f"energy_window_kj must be > 0 or None, got {self.energy_window_kj}")
        if not self.temperature_k > 0:
            raise ValueError(f"temperature_k must be > 0 K, got {self.temperature_k}")
        if self.force_field not in _FORCE_FIELDS:
            raise ValueError(
                f"force_field must be one of {_FORCE_FIELDS}, got {self.force_field!r}"
            )
        if self.max_iters < 1 or self.max_matches < 1:
            raise ValueError("max_iters and max_matches must be >= 1")


@dataclass
class ConformerEnsemble:
    """Conformers of one molecule, in order of increasing energy.

    Attributes
    ----------
    name : str
        Identifier given by the user (or generated).
    smiles : str
        Input SMILES (canonical SMILES for RDKit-molecule input).
    mol : rdkit.Chem.Mol
        Molecule with explicit hydrogens and conformers ``0..C-1`` (RDKit coordinates, Angstrom).
    energies_kj : numpy.ndarray, shape (C,)
        Force-field energies in kJ/mol relative to the lowest conformer.
    converged : numpy.ndarray, shape (C,), bool
        Whether the optimisation converged.
    temperature_k : float
        Temperature of :attr:`weights`.
    min_energy_kj : float
        Absolute force-field energy of the lowest conformer (kJ/mol).
    stereo_smiles : str
        Canonical isomeric SMILES of the embedded stereoisomer.
    """

    name: str
    smiles: str
    mol: Chem.Mol
    energies_kj: np.ndarray
    converged: np.ndarray
    temperature_k: float = 298.15
    min_energy_kj: float = 0.0
    stereo_smiles: str = ""

    @property
    def num_confs(self) -> int:
        return int(self.mol.GetNumConformers())

    @property
    def weights(self) -> np.ndarray:
        """Boltzmann weights at :attr:`temperature_k`, shape (C,)."""
        return boltzmann_weights(self.energies_kj, self.temperature_k)

    @property
    def atomic_numbers(self) -> np.ndarray:
        """Atomic numbers, shape (N,)."""
        return np.array([a.GetAtomicNum() for a in self.mol.GetAtoms()], dtype=np.int64)

    @property
    def positions_nm(self) -> np.ndarray:
        """Conformer positions in nm, shape (C, N, 3)."""
        return np.stack([c.GetPositions() for c in self.mol.GetConformers()]) * 0.1

    def to_graph(
        self,
        y: Sequence[float] | None = None,
        conf_y: np.ndarray | None = None,
        energies_kj: Sequence[float] | None = None,
        heavy_only: bool = False,
    ) -> EnsembleGraph:
        """The ensemble as an :class:`~sci_moe.molecules.graph.EnsembleGraph`.

        ``energies_kj`` replaces the force-field energies (e.g. by GFN2-xTB energies);
        weights are Boltzmann weights of whichever energies are used.
        """
        e = self.energies_kj if energies_kj is None else np.asarray(energies_kj, dtype=np.float64)
        return EnsembleGraph.from_rdkit(
            self.mol,
            conf_ids=[c.GetId() for c in self.mol.GetConformers()],
            energies_kj=e,
            temperature_k=self.temperature_k,
            y=y,
            conf_y=conf_y,
            heavy_only=heavy_only,
            name=self.name,
        )


@dataclass
class EnsembleReport:
    """What happened to every input molecule of :func:`generate_ensembles`.

    Attributes
    ----------
    n_input, n_ok, n_failed, n_cached : int
        Inputs, successes, failures, results read from the cache.
    failures : list of dict
        One ``{"name", "smiles", "stage", "reason"}`` per failed molecule; ``stage`` is
        one of ``"parse"``, ``"forcefield"``, ``"embed"``, ``"optimize"``, ``"worker"``.
    n_confs : dict
        Conformers kept per successful molecule name.
    seconds : float
        Wall time.
    config : dict
        The :class:`ConformerConfig` used.
    """

    n_input: int = 0
    n_ok: int = 0
    n_failed: int = 0
    n_cached: int = 0
    failures: list[dict] = field(default_factory=list)
    n_confs: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    config: dict = field(default_factory=dict)

    @property
    def failed_names(self) -> list[str]:
        return [f["name"] for f in self.failures]

    def to_dict(self) -> dict:
        return asdict(self)

    def save(self, path: str | Path) -> None:
        """Write the report as JSON (atomically)."""
        _atomic_write_text(Path(path), json.dumps(self.to_dict(), indent=1))

    def summary(self) -> str:
        lines = [
            f"{self.n_ok}/{self.n_input} molecules embedded ({self.n_cached} from cache), "
            f"{self.n_failed} failed, {self.seconds:.1f} s"
        ]
        for f in self.failures:
            lines.append(f"  {f['name']}: {f['stage']}: {f['reason']}")
        return "\n".join(lines)


class _Failure(Exception):
    def __init__(self, stage: str, reason: str):
        super().__init__(reason)
        self.stage = stage
        self.reason = reason


def _parse(item) -> Chem.Mol:
    """SMILES string or RDKit molecule -> molecule with explicit hydrogens."""
    if isinstance(item, Chem.Mol):
        mol = Chem.Mol(item)
        mol.RemoveAllConformers()
    else:
        RDLogger.DisableLog("rdApp.*")
        try:
            mol = Chem.MolFromSmiles(str(item))
        finally:
            RDLogger.EnableLog("rdApp.*")
        if mol is None:
            raise _Failure("parse", f"invalid SMILES {item!r}")
    if mol.GetNumAtoms() == 0:
        raise _Failure("parse", "molecule has no atoms")
    return Chem.AddHs(mol)


def _prune(
    mol: Chem.Mol, order: list[int], rms: float, max_keep: int, max_matches: int
) -> list[int]:
    """Greedy symmetry-aware heavy-atom RMSD pruning over conformers in ``order``."""
    if rms <= 0:
        return order[:max_keep]
    heavy = Chem.RemoveHs(mol)
    kept: list[int] = []
    for cid in order:
        if len(kept) >= max_keep:
            break
        unique = True
        for ref in kept:
            probe = Chem.Mol(heavy)  # GetBestRMS aligns the probe in place
            r = rdMolAlign.GetBestRMS(probe, heavy, cid, ref, maxMatches=max_matches)
            if r < rms:
                unique = False
                break
        if unique:
            kept.append(cid)
    return kept


def _has_unspecified_stereo(mol: Chem.Mol) -> bool:
    return any(
        si.specified == Chem.StereoSpecified.Unspecified
        for si in Chem.FindPotentialStereo(Chem.RemoveHs(mol))
    )


def _assign_stereo_from_3d(mol: Chem.Mol, params) -> Chem.Mol:
    """Fix unspecified stereo elements to those of one seeded embedding.

    Enumerating stereoisomers can produce impossible ones (e.g. bridgeheads of
    bicyclo[2.2.2]octanes), on which ETKDG spends minutes and fails; a free embedding is
    always feasible, and its 3-D stereo is then imposed on the whole ensemble.
    """
    probe = Chem.Mol(mol)
    cid = rdDistGeom.EmbedMolecule(probe, params)
    if cid < 0:
        return mol
    Chem.AssignStereochemistryFrom3D(probe, confId=cid)
    probe.RemoveAllConformers()
    return probe


def _embed(item, cfg: ConformerConfig) -> dict:
    """Embed, optimise, prune; returns plain data (picklable) or raises _Failure."""
    parsed = _parse(item)
    if not AllChem.MMFFHasAllMoleculeParams(parsed):
        elements = sorted({a.GetSymbol() for a in parsed.GetAtoms()})
        raise _Failure(
            "forcefield",
            f"no {cfg.force_field.upper()} parameters for this molecule (elements {elements})",
        )
    p = rdDistGeom.ETKDGv3()
    p.randomSeed = int(cfg.seed)
    p.pruneRmsThresh = float(cfg.prune_rms) if cfg.prune_rms > 0 else -1.0
    p.numThreads = 1
    mol = parsed
    if cfg.assign_stereo and _has_unspecified_stereo(parsed):
        mol = _assign_stereo_from_3d(parsed, p)
    cids = list(rdDistGeom.EmbedMultipleConfs(mol, numConfs=cfg.num_attempts, params=p))
    if not cids:
        p.useRandomCoords = True
        cids = list(rdDistGeom.EmbedMultipleConfs(mol, numConfs=cfg.num_attempts, params=p))
    if not cids:
        raise _Failure("embed", f"ETKDGv3 embedded 0 of {cfg.num_attempts} attempts")
    res = AllChem.MMFFOptimizeMoleculeConfs(
        mol, numThreads=1, maxIters=cfg.max_iters, mmffVariant=cfg.force_field.upper()
    )
    energies = np.array([e for _, e in res], dtype=np.float64) * KCAL_TO_KJ
    converged = np.array([nc == 0 for nc, _ in res], dtype=bool)
    if not np.isfinite(energies).any():
        raise _Failure("optimize", "MMFF gave no finite energy")
    conf_ids = [c.GetId() for c in mol.GetConformers()]
    order = [i for i in np.argsort(energies, kind="stable") if np.isfinite(energies[i])]
    if cfg.energy_window_kj is not None:
        emin = energies[order[0]]
        order = [i for i in order if energies[i] - emin <= cfg.energy_window_kj]
    kept_idx = _prune(
        mol, [conf_ids[i] for i in order], cfg.prune_rms, cfg.max_confs, cfg.max_matches
    )
    pos_of = {c.GetId(): c.GetPositions() for c in mol.GetConformers()}
    idx_of = {cid: i for i, cid in enumerate(conf_ids)}
    kept_e = energies[[idx_of[c] for c in kept_idx]]
    out = Chem.Mol(mol)
    out.RemoveAllConformers()
    return {
        "mol_binary": np.frombuffer(out.ToBinary(), dtype=np.uint8).copy(),
        "positions": np.stack([pos_of[c] for c in kept_idx]),
        "energies_kj": kept_e,
        "converged": converged[[idx_of[c] for c in kept_idx]],
        "n_embedded": np.int64(len(cids)),
    }


def _build(name: str, smiles: str, data: dict, temperature_k: float) -> ConformerEnsemble:
    mol = Chem.Mol(bytes(np.asarray(data["mol_binary"], dtype=np.uint8).tobytes()))
    mol.RemoveAllConformers()
    for k, xyz in enumerate(np.asarray(data["positions"])):
        conf = Chem.Conformer(mol.GetNumAtoms())
        for a, (x, y, z) in enumerate(xyz):
            conf.SetAtomPosition(a, (float(x), float(y), float(z)))
        conf.SetId(k)
        conf.Set3D(True)
        mol.AddConformer(conf, assignId=False)
    mol.SetProp("_Name", name)
    e = np.asarray(data["energies_kj"], dtype=np.float64)
    return ConformerEnsemble(
        name=name,
        smiles=smiles,
        mol=mol,
        energies_kj=e - e.min(),
        converged=np.asarray(data["converged"], dtype=bool),
        temperature_k=temperature_k,
        min_energy_kj=float(e.min()),
        stereo_smiles=Chem.MolToSmiles(Chem.RemoveHs(mol)),
    )


def embed_ensemble(
    smiles_or_mol, config: ConformerConfig | None = None, name: str = ""
) -> ConformerEnsemble:
    """Conformer ensemble of one molecule (no cache, no parallelism).

    Parameters
    ----------
    smiles_or_mol : str or rdkit.Chem.Mol
        SMILES, or a molecule (its conformers, if any, are discarded).
    config : ConformerConfig, optional
    name : str

    Raises
    ------
    ValueError
        Invalid SMILES, no MMFF parameters or no embeddable conformer (message says which).
    """
    cfg = config or ConformerConfig()
    try:
        data = _embed(smiles_or_mol, cfg)
    except _Failure as err:
        raise ValueError(f"{name or smiles_or_mol}: {err.stage}: {err.reason}") from None
    return _build(name, _input_smiles(smiles_or_mol), data, cfg.temperature_k)


def _input_smiles(item) -> str:
    if isinstance(item, Chem.Mol):
        return Chem.MolToSmiles(Chem.RemoveHs(item))
    return str(item)


def ensemble_cache_key(smiles_or_mol, config: ConformerConfig) -> str:
    """sha256 of the input (SMILES or mol block), the settings and the RDKit version."""
    if isinstance(smiles_or_mol, Chem.Mol):
        m = Chem.Mol(smiles_or_mol)
        m.RemoveAllConformers()
        ident = "molblock:" + Chem.MolToMolBlock(m, includeStereo=True, kekulize=False)
    else:
        ident = "smiles:" + str(smiles_or_mol)
    cfg = asdict(config)
    cfg.pop("temperature_k")  # only changes the weights, computed on load
    payload = json.dumps(
        {"input": ident, "config": cfg, "rdkit": rdBase.rdkitVersion, "v": _CACHE_VERSION},
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; use normal file permissions
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _atomic_write_text(path: Path, text: str) -> None:
    _atomic_write_bytes(path, text.encode())


def _cache_paths(cache_dir: Path, key: str) -> tuple[Path, Path]:
    d = cache_dir / key[:2]
    return d / f"{key}.npz", d / f"{key}.failed.json"


def _cache_load(cache_dir: Path, key: str):
    ok, bad = _cache_paths(cache_dir, key)
    if ok.exists():
        try:
            with np.load(ok, allow_pickle=False) as z:
                return {k: z[k] for k in z.files}
        except Exception:  # corrupt entry: recompute
            return None
    if bad.exists():
        try:
            return json.loads(bad.read_text())
        except Exception:
            return None
    return None


def _cache_store(cache_dir: Path, key: str, result) -> None:
    ok, bad = _cache_paths(cache_dir, key)
    if isinstance(result, dict) and "mol_binary" in result:
        import io

        buf = io.BytesIO()
        np.savez(buf, **result)
        _atomic_write_bytes(ok, buf.getvalue())
    else:
        _atomic_write_text(bad, json.dumps(result))


def _worker(item, cfg: ConformerConfig):
    """Process-pool entry point: never raises for bad molecules."""
    t0 = time.process_time()
    try:
        out = _embed(item, cfg)
    except _Failure as err:
        out = {"failed": True, "stage": err.stage, "reason": err.reason}
    except Exception as err:  # RDKit errors on odd input
        out = {"failed": True, "stage": "embed", "reason": f"{type(err).__name__}: {err}"}
    out["cpu_s"] = time.process_time() - t0
    return out


def _init_worker() -> None:
    os.environ["OMP_NUM_THREADS"] = "1"
    RDLogger.DisableLog("rdApp.*")


def _context(method: str, fn):
    ctx = mp.get_context(method)
    if method == "forkserver":
        # import the worker's module once in the server, not in every worker
        ctx.set_forkserver_preload([fn.__module__])
    return ctx


def parallel_map(
    fn,
    jobs: Sequence[tuple],
    n_jobs: int = 1,
    progress: bool = False,
    desc: str = "",
    on_result=None,
    mp_context: str = "forkserver",
) -> list:
    """``[fn(*job) for job in jobs]`` over ``n_jobs`` one-thread worker processes.

    ``fn`` must be a picklable top-level function that returns a dict and reports bad
    input as ``{"failed": True, "reason": ...}`` rather than raising; an exception or a
    dead worker is turned into such a dict, so finished results are never lost.
    ``on_result(index, result)`` is called in this process as each job finishes (in
    completion order), e.g. to cache it. Workers start with ``OMP_NUM_THREADS=1``.

    The default start method ``"forkserver"`` imports ``fn``'s module once in a clean
    server process and forks every worker from it: cheap start-up, and no OpenMP thread
    pool inherited from this process (``tblite`` and torch share ``libgomp``, which is not
    fork-safe once its threads exist). ``"spawn"`` is the slow, equally safe option.
    As with any spawn/forkserver pool, a *script* that calls this with ``n_jobs > 1``
    must keep its top-level work under ``if __name__ == "__main__":`` (workers import the
    main script); otherwise the workers fail and every job is reported as failed.
    """
    if n_jobs < 1:
        raise ValueError(f"n_jobs must be >= 1, got {n_jobs}")
    jobs = [tuple(j) for j in jobs]
    results: list = [None] * len(jobs)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(jobs), desc=desc or getattr(fn, "__name__", ""), unit="mol")

    def done(i, res):
        results[i] = res
        if on_result is not None:
            on_result(i, res)
        if bar is not None:
            bar.update(1)

    try:
        if n_jobs == 1 or len(jobs) <= 1:
            for i, j in enumerate(jobs):
                try:
                    res = fn(*j)
                except Exception as err:
                    res = {"failed": True, "reason": f"{type(err).__name__}: {err}"}
                done(i, res)
        else:
            ctx = _context(mp_context, fn)
            old = os.environ.get("OMP_NUM_THREADS")
            # inherited by the forkserver / workers, which start lazily on submit
            os.environ["OMP_NUM_THREADS"] = "1"
            try:
                with cf.ProcessPoolExecutor(
                    max_workers=min(n_jobs, len(jobs)), mp_context=ctx, initializer=_init_worker
                ) as pool:
                    futs = {pool.submit(fn, *j): i for i, j in enumerate(jobs)}
                    for fut in cf.as_completed(futs):
                        try:
                            res = fut.result()
                        except Exception as err:  # a worker died (BrokenProcessPool) or raised
                            res = {
                                "failed": True,
                                "reason": f"worker: {type(err).__name__}: {err}",
                            }
                        done(futs[fut], res)
            finally:
                if old is None:
                    os.environ.pop("OMP_NUM_THREADS", None)
                else:
                    os.environ["OMP_NUM_THREADS"] = old
    finally:
        if bar is not None:
            bar.close()
    return results


def generate_ensembles(
    molecules: Sequence,
    config: ConformerConfig | None = None,
    names: Sequence[str] | None = None,
    n_jobs: int = 1,
    cache_dir: str | Path | None = None,
    report_path: str | Path | None = None,
    progress: bool = False,
    mp_context: str = "forkserver",
) -> tuple[list[ConformerEnsemble], EnsembleReport]:
    """Conformer ensembles of many molecules, in parallel, cached, with a failure report.

    Parameters
    ----------
    molecules : sequence of str or rdkit.Chem.Mol
        SMILES strings or molecules.
    config : ConformerConfig, optional
    names : sequence of str, optional
        Unique names (default: a molecule's ``_Name`` property or ``"mol<i>"``).
    n_jobs : int
        Worker processes (1 = in this process). Each worker uses one thread.
    cache_dir : path, optional
        Directory of the content-hash cache; a rerun with the same inputs and settings
        reads every result (failures included) from it.
    report_path : path, optional
        Where to write the :class:`EnsembleReport` as JSON.
    progress : bool
        Show a tqdm progress bar.
    mp_context : str
        Start method of the workers (see :func:`parallel_map`).

    Returns
    -------
    ensembles : list of ConformerEnsemble
        Successful molecules, in input order.
    report : EnsembleReport
        Counts and every failure with its reason.
    """
    cfg = config or ConformerConfig()
    items = list(molecules)
    if names is None:
        names = [
            m.GetProp("_Name") if isinstance(m, Chem.Mol) and m.HasProp("_Name") else f"mol{i}"
            for i, m in enumerate(items)
        ]
    names = [str(n) for n in names]
    if len(names) != len(items):
        raise ValueError(f"got {len(names)} names for {len(items)} molecules")
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(f"molecule names must be unique; duplicated: {dup[:5]}")
    if n_jobs < 1:
        raise ValueError(f"n_jobs must be >= 1, got {n_jobs}")
    t0 = time.perf_counter()
    cache = Path(cache_dir) if cache_dir is not None else None
    results: list = [None] * len(items)
    keys = [ensemble_cache_key(m, cfg) if cache else None for m in items]
    n_cached = 0
    todo = []
    for i in range(len(items)):
        hit = _cache_load(cache, keys[i]) if cache else None
        if hit is not None:
            results[i] = hit
            n_cached += 1
        else:
            todo.append(i)

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(items), initial=n_cached, desc="conformers", unit="mol")

    def done(i, res):
        if res.get("failed") and "stage" not in res:  # the worker process itself failed
            res = {"failed": True, "stage": "worker", "reason": res["reason"]}
        results[i] = res
        if cache and res.get("stage") != "worker":
            _cache_store(cache, keys[i], res)
        if bar is not None:
            bar.update(1)

    payload = [
        ((Chem.Mol(items[i]) if isinstance(items[i], Chem.Mol) else items[i]), cfg) for i in todo
    ]
    parallel_map(
        _worker,
        payload,
        n_jobs=n_jobs,
        on_result=lambda j, res: done(todo[j], res),
        mp_context=mp_context,
    )
    if bar is not None:
        bar.close()

    report = EnsembleReport(n_input=len(items), n_cached=n_cached, config=asdict(cfg))
    report.cpu_seconds = float(sum(float(results[i].get("cpu_s", 0.0)) for i in todo))
    ensembles = []
    for i, res in enumerate(results):
        smi = _input_smiles(items[i]) if not res.get("stage") == "parse" else str(items[i])
        if res.get("failed"):
            report.failures.append(
                {"name": names[i], "smiles": smi, "stage": res["stage"], "reason": res["reason"]}
            )
            continue
        ens = _build(names[i], smi, res, cfg.temperature_k)
        ensembles.append(ens)
        report.n_confs[names[i]] = ens.num_confs
    report.n_ok = len(ensembles)
    report.n_failed = len(report.failures)
    report.seconds = time.perf_counter() - t0
    if report_path is not None:
        report.save(report_path)
    return ensembles, report
