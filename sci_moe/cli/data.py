"""``sci-moe data``: build the offline molecule set, inspect MARCEL archives.

Examples
--------
.. code-block:: console

    $ sci-moe data molecules --out molset            # ~50 molecules, about a minute on 2 cores
    $ sci-moe data molecules --full --out molset_full # 500 molecules
    $ sci-moe data ligands --out data/ligand_set_small   # 100 Kraken-like P ligands
    $ sci-moe data ligands --full --out data/ligand_set_full  # 1,000 ligands
    $ sci-moe data marcel --dataset kraken Kraken.zip --limit 100
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

__all__ = [
    "add_ligand_set_arguments",
    "add_molecule_set_arguments",
    "add_parser",
    "run_ligand_set",
    "run_molecule_set",
]

_LOADERS = ("drugs", "kraken", "bde", "ee")


def add_parser(sub) -> argparse.ArgumentParser:
    """Add the ``data`` subcommand to the subparsers ``sub`` of the ``sci-moe`` parser."""
    p = sub.add_parser("data", help="build or inspect molecular data sets")
    dsub = p.add_subparsers(dest="data_command", required=True)
    mol = dsub.add_parser(
        "molecules",
        help="build the offline conformer-ensemble set (NCI molecules, GFN2-xTB labels)",
        description="NCI molecules shipped with RDKit, ETKDGv3/MMFF94 conformer ensembles, "
        "Boltzmann-averaged GFN2-xTB dipole and HOMO-LUMO gap, radius of gyration and SASA. "
        "Cached per molecule; writes molecule_set.npz, report.json, labels.png and "
        "checksums.sha256 to --out.",
    )
    add_molecule_set_arguments(mol)
    mol.set_defaults(func=run_molecule_set)
    lig = dsub.add_parser(
        "ligands",
        help="build the Kraken-like ligand set (phosphines, phosphites, aminophosphines)",
        description="Enumerated monodentate organophosphorus ligands, ETKDGv3/MMFF94 (UFF "
        "fallback) conformer ensembles, GFN2-xTB energies/HOMO/Delta-SCF IP and morfeus "
        "sterics around P (Sterimol, %%Vbur, solid angle); targets are the Boltzmann "
        "average, minimum and maximum over each ensemble. Cached per ligand (resumable); "
        "writes molecule_set.npz, report.json (with the oracle gap) and checksums.sha256.",
    )
    add_ligand_set_arguments(lig)
    lig.set_defaults(func=run_ligand_set)
    mar = dsub.add_parser(
        "marcel",
        help="load a MARCEL archive and summarise it",
        description="Read a MARCEL archive (Drugs.zip, Kraken.zip, BDE.zip, EE.zip or the "
        "folder with its extracted files) and print molecules, conformers, targets and "
        "skipped records.",
    )
    mar.add_argument("path", help="the archive or folder")
    mar.add_argument("--dataset", required=True, choices=_LOADERS, help="which MARCEL set")
    mar.add_argument("--max-confs", type=int, default=20, help="conformers kept (default 20)")
    mar.add_argument("--limit", type=int, default=None, help="only the first N molecules")
    mar.add_argument("--json", metavar="PATH", help="write the summary as JSON")
    mar.set_defaults(func=_marcel)
    return p


def add_molecule_set_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``sci-moe data molecules``."""
    p.add_argument("--out", required=True, help="output directory")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--full", action="store_true", help="the full set (500 molecules)")
    size.add_argument("--n", type=int, help="number of molecules (default 50)")
    p.add_argument("--seed", type=int, default=0, help="seed of the molecule choice (default 0)")
    p.add_argument("--jobs", type=int, default=None, help="worker processes (default: all CPUs)")
    p.add_argument("--max-confs", type=int, default=10, help="conformers per molecule (default 10)")
    p.add_argument(
        "--temperature-k",
        type=float,
        default=298.15,
        dest="temperature_k",
        help="temperature of the Boltzmann averages (default 298.15)",
    )
    p.add_argument(
        "--smiles",
        metavar="FILE",
        help="your own candidates instead of the NCI pool: one 'SMILES name' per line",
    )
    p.add_argument("--cache", default=None, help="cache directory (default OUT/cache)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument(
        "--electronic",
        action="store_true",
        help="also MARCEL Drugs-75K's ip, ea, chi (Delta-SCF GFN2, eV) as extra targets",
    )


def run_molecule_set(args: argparse.Namespace) -> int:
    """Build the molecule set of ``sci-moe data molecules``; raises ``ValueError`` on bad input."""
    from ..data.molecule_set import REPORT_FILE, MoleculeSetConfig, build_molecule_set
    from ..molecules import ConformerConfig

    n = 500 if args.full else (args.n if args.n is not None else 50)
    cfg = MoleculeSetConfig(
        n_molecules=n,
        seed=args.seed,
        temperature_k=args.temperature_k,
        conformers=ConformerConfig(num_attempts=20, max_confs=args.max_confs),
        electronic=bool(getattr(args, "electronic", False)),
    )
    molecules = None
    if args.smiles:
        path = Path(args.smiles)
        if not path.is_file():
            raise ValueError(f"--smiles file {args.smiles!r} does not exist")
        molecules = []
        for k, line in enumerate(path.read_text().splitlines()):
            parts = line.split()
            if parts and not parts[0].startswith("#"):
                molecules.append((parts[1] if len(parts) > 1 else f"line{k + 1}", parts[0]))
        if not molecules:
            raise ValueError(f"--smiles file {args.smiles!r} holds no SMILES")
    from .._util import lock_directory

    # One builder per --out (the message names the holder); dropped when this process ends.
    with lock_directory(args.out, command=f"sci-moe data molecules --out {args.out}"):
        ms = build_molecule_set(
            args.out,
            cfg,
            n_jobs=args.jobs,
            cache_dir=args.cache,
            progress=not args.no_progress,
            molecules=molecules,
        )
    report = json.loads((Path(args.out) / REPORT_FILE).read_text())
    print(
        f"{len(ms)} molecules, {report['n_conformers']} conformers, "
        f"{len(report['failures'])} failures, {report['seconds']:.1f} s -> {args.out}"
    )
    for f in report["failures"]:
        print(f"  failed {f['name']}: {f['stage']}: {f['reason']}")
    return 0


def add_ligand_set_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``sci-moe data ligands``."""
    p.add_argument("--out", required=True, help="output directory (e.g. data/ligand_set_small)")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--full", action="store_true", help="the full set (1,000 ligands)")
    size.add_argument("--n", type=int, help="number of ligands (default 100)")
    p.add_argument("--seed", type=int, default=0, help="seed of the ligand choice (default 0)")
    p.add_argument(
        "--workers", "--jobs", type=int, default=None, dest="workers",
        help="worker processes, one thread each (default: all CPUs)",
    )  # fmt: skip
    p.add_argument("--max-confs", type=int, default=8, help="conformers per ligand (default 8)")
    p.add_argument("--cache", default=None, help="cache directory (default OUT/cache)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")


def run_ligand_set(args: argparse.Namespace) -> int:
    """Build the ligand set of ``sci-moe data ligands``; raises ``ValueError`` on bad input."""
    from .._util import lock_directory
    from ..data.ligands_build import FULL_LIGANDS, LigandSetConfig, build_ligand_set
    from ..data.molecule_set_store import REPORT_FILE
    from ..molecules import ConformerConfig

    n = FULL_LIGANDS if args.full else (args.n if args.n is not None else 100)
    if n < 1:
        raise ValueError(f"--n must be >= 1 ligand, got {n}")
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers must be >= 1, got {args.workers}")
    if args.max_confs < 1:
        raise ValueError(f"--max-confs must be >= 1, got {args.max_confs}")
    cfg = LigandSetConfig(
        n_ligands=n,
        seed=args.seed,
        conformers=ConformerConfig(num_attempts=24, max_confs=args.max_confs),
    )
    with lock_directory(args.out, command=f"sci-moe data ligands --out {args.out}"):
        ms = build_ligand_set(
            args.out, cfg, n_jobs=args.workers, cache_dir=args.cache, progress=not args.no_progress
        )
    report = json.loads((Path(args.out) / REPORT_FILE).read_text())
    print(
        f"{len(ms)} ligands, {report['n_conformers']} conformers, "
        f"{report['n_uff_fallback']} UFF fallbacks, {len(report['failures'])} failures, "
        f"{report['seconds']:.1f} s -> {args.out}"
    )
    for f in report["failures"]:
        print(f"  failed {f['name']}: {f['stage']}: {f['reason']}")
    return 0


def _marcel(args: argparse.Namespace) -> int:
    from ..data import marcel

    loader = getattr(marcel, f"load_{args.dataset}")
    ds = loader(args.path, max_confs=args.max_confs, limit=args.limit)
    confs = {
        part: sum(g.num_confs for g in ds.graphs(part)) if len(ds) else 0 for part in ds.part_names
    }
    summary = {
        "dataset": ds.name,
        "molecules": len(ds),
        "parts": ds.part_names,
        "conformers": confs,
        "targets": ds.target_names,
        "target_mean": ds.y.mean(0).tolist() if len(ds) else [],
        "skipped": len(ds.failures),
        "failures": ds.failures[:20],
    }
    print(
        f"{ds.name}: {len(ds)} molecules, conformers {confs}, targets {ds.target_names}, "
        f"{len(ds.failures)} records skipped"
    )
    for f in ds.failures[:10]:
        print(f"  skipped {f['name']}: {f['reason']}")
    if args.json:
        from .._util import atomic_save_json

        atomic_save_json(args.json, summary, indent=1)
    return 0
