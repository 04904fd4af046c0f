"""Conformer ensembles of many molecules: in parallel, cached, with a failure report.

:func:`generate_ensembles` runs :func:`~sci_moe.molecules.embed_ensemble`'s recipe over
many molecules (one process per core, one thread each), caches every result on disk
under a content hash (:func:`~sci_moe.molecules.ensemble_cache_key`) so a rerun costs
nothing, and never drops a molecule silently: every failure (invalid SMILES, no MMFF
parameters, embedding failure, a crashed worker) is listed by name with its reason in the
returned :class:`EnsembleReport`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rdkit import Chem

from .._util import atomic_write_text
from ._pool import parallel_map
from .conformer_cache import _cache_load, _cache_store, ensemble_cache_key
from .embedding import (
    ConformerConfig,
    ConformerEnsemble,
    _embed,
    _Failure,
    _input_smiles,
    ensemble_from_arrays,
)

__all__ = ["EnsembleReport", "generate_ensembles"]


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
        atomic_write_text(path, json.dumps(self.to_dict(), indent=1))

    def summary(self) -> str:
        lines = [
            f"{self.n_ok}/{self.n_input} molecules embedded ({self.n_cached} from cache), "
            f"{self.n_failed} failed, {self.seconds:.1f} s"
        ]
        for f in self.failures:
            lines.append(f"  {f['name']}: {f['stage']}: {f['reason']}")
        return "\n".join(lines)


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
        from .._util import progress_bar

        bar = progress_bar(total=len(items), initial=n_cached, desc="conformers", unit="mol")

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
        ens = ensemble_from_arrays(names[i], smi, res, cfg.temperature_k)
        ensembles.append(ens)
        report.n_confs[names[i]] = ens.num_confs
    report.n_ok = len(ensembles)
    report.n_failed = len(report.failures)
    report.seconds = time.perf_counter() - t0
    if report_path is not None:
        report.save(report_path)
    return ensembles, report
