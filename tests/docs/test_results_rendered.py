"""Every measured number on a results page is rendered from its JSON (issue 41, item 1).

The pages in ``docs/results/`` write figures as ``:result:`FILE#SELECTOR:FORMAT``` (and
tables as ``.. result-table::``, verdicts as ``.. verdicts::``), rendered at build time by
``docs/_ext/results_role.py``. Here, in well under a second and without Sphinx:

* the role, the directives and their errors work on a temporary JSON, and changing a JSON
  value changes the rendered page (the mutation test);
* on every converted page, every reference resolves (plain docutils with the extension
  registered), and no digit is left outside them -- no hand-typed measured number --
  except in code, math, cross-references, file names and commands (inline literals), and
  what :data:`ALLOWED` (every page) or :data:`PAGE_ALLOWED` (one page, exact phrases with a
  reason) lets through: setup constants, seeds, citations, years, software versions;
* every page in ``docs/results/`` is converted: a new page is held to these rules at once.
"""

from __future__ import annotations

import importlib.util
import io
import json
import re
from pathlib import Path

import docutils.core
import docutils.nodes
import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = sorted(p for p in (DOCS / "results").glob("*.rst") if p.name != "index.rst")

#: Digits these patterns match are not measurements, on every page (pattern: why).
ALLOWED = {
    r"\b\d{4}\.\d{4,5}\b": "arXiv id",
    r"\b(?:NeurIPS|ICML|ICLR|AAAI|ACL|EMNLP|Interspeech|ICASSP|CVPR|KDD|TMLR|JMLR)\s+\d{4}\b": (
        "venue and year of the cited paper"
    ),
    r"\bet al\.,?\s+\d{4}\b": "year of the cited paper",
    r"\b[Ii]ssues?\s+\d+(?:\s*(?:,|and)\s*\d+)*": "issue numbers of this repository",
    r"\b(?:Tables?|Sections?|Sec\.|Eqs?\.|Figures?|Fig\.|App\.|Appendix)\s+[A-Z]?\d+(?:\.\d+)*": (
        "a reference into the paper"
    ),
    r"\b(?:torch|Python|torchcde|scipy|numpy|PyVRP|OpenMM|transformers|CUDA|statsmodels)"
    r"\s+\d+(?:\.\d+)*\S*": "software version",
    r"\b[Ss]eeds?\s+\d+(?:\s*(?:,|-|to|and)\s*\d+)*": "which seeds ran (a setting, not a result)",
    r"\b[A-Za-z]\w{0,3}\s?=\s?\d+\b(?![.,]\d)": (
        "an integer setting of a model or data set (K = 5, N = 100, d = 16)"
    ),
    r"\b[A-Za-z][\w+-]*\d[\w+-]*": "a name with digits in it (rk4, L2, DOP853, all-MiniLM-L6-v2)",
    r"\b(?:ln|log)\s+\d+\b": "a constant (ln 3, log 2)",
    r"\b(?:[Ll]evel|[Ss]tage|[Ll]ayer|[Rr]ank|[Bb]lock)s?\s+\d+(?:/\d+)*\b": (
        "an index (level 0, stage 2, router ranks 2/3)"
    ),
    r"\b\d+-core\b": "the machine (a 2-core CPU)",
    r"\b\d+-way\b": "the number of classes of a task (4-way)",
    r"\b\d+-expert\b": "the size of a model (a 40-expert MoE)",
    r"\b\d+-bit\b": "a number format (4-bit weights)",
    r"\b\d+-D\b": "the dimension of a target (a 10-D mixture)",
    r"(?<![\w.])\d+(?:\.\d+)?e[-+]?\d+\b": "a setting in scientific notation (lr 3e-4, t = 1e-5)",
    r"(?:\b[Ss]ection\s+)?\(\d\)": "a section label ((5), section (5))",
    r"\b\d+(?:\.\d+)?(?:-\d+)?\s?K\b": "a temperature setting (300 K, 300-800 K, 298.15 K)",
    r"\b\d+-(?:epoch|configuration|parameter|step|bead|atom|walker|ligand|molecule|split)\b": (
        "a setting used as an adjective (the 36-epoch run, a 2-parameter fit)"
    ),
    r"@\d+\b": "a ranking metric's cut-off (Recall@20)",
    r"\b\d+c\d+\b": "a setting's name: experts and top-k (8c1 = 8 experts, top-1)",
    r"\b95 % (?:confidence )?interval": "the verdict rule's confidence level (a setting)",
    r"(?:below|under|at least|gain of|less than|than|by the|same)\s+1 %": (
        "the verdict rule's smallest claimable gain (MIN_EFFECT in benchmarks/_common, a setting)"
    ),
}

#: Exact phrases (whitespace-normalised) whose digits are settings, not results: page ->
#: {phrase: why}. A phrase that leaves the page must leave this list too.
PAGE_ALLOWED: dict[str, dict[str, str]] = {
    "moe_layer.rst": {
        ">= 0.8x": "issue 29's targets (ratio to dense)",
        ">= 0.9x": "issue 29's targets (ratio to dense)",
        "d >= 128": "a part of the grid (a setting)",
        "below 1": "the parity line of a ratio",
        "(above 1: sci-moe faster)": "the parity line of a ratio",
        "at most 32 rows per expert": "a bin of the grid's summary rows (a setting)",
        "33-256": "a bin of the grid's summary rows (a setting)",
        "more than 256": "a bin of the grid's summary rows (a setting)",
        "with 8, 32 and 256 rows per expert": "setup: the GEMM probe's shapes",
        "with 32 and 8 rows per expert": "setup: the GEMM probe's shapes",
        "copying a 4 MB tensor, at 16 MB, at 64 MB, at 1 GB": "setup: the memory probe's sizes",
        "rounded up to a multiple of 64": "setup: the Llama-style ffn width",
        "it would gather 3 to 96 GiB": (
            "arithmetic on the three largest shapes' settings (T k 3 ffn d float32 values)"
        ),
        "8 experts with 512-4096 rows each": "setup: those cases' shapes",
        "tensors of 64 MiB": "arithmetic on the case's shape (32768 x 512 float32 values)",
        "largest mmap threshold (32 MiB)": "glibc's constant",
        "8 times smaller": "the case's setting (E = 8)",
        "at least 32 MiB, each expert's share of it at least 2 MiB and each expert at least "
        "512 rows": "the per-expert rule's thresholds (code constants)",
        "0.5-1 MiB per expert": "the first form of the rule's threshold, and the cases' shares",
        "d <= 256": "a part of the grid (a setting)",
        "E = 32-64": "setup: the cases' expert counts",
        "needs 2 MiB per expert": "the rule's threshold (a code constant)",
        "won with 2 MiB or more": "the rule's threshold (a code constant)",
        "had won at 1 MiB": "the cases' per-expert share (a setting)",
        "512-row floor": "the rule's threshold (a code constant)",
        "re-measured with 5 repeats": "setup: the run's repeats",
        "(16 MiB intermediates": "arithmetic on the case's shape",
        "far below 0.9 and 0.8": "issue 29's targets (ratio to dense)",
        "(> 1: dense faster)": "the parity line of a ratio",
        "With 8 or 32 rows per expert": "setup: the GEMM probe's shapes",
        "to 0.9x of dense": "issue 29's target (ratio to dense)",
        "At 128-256 rows per expert": "setup: the GEMM probe's shapes",
        "(at most 32 MB)": "glibc's constant",
        "tensors of 2 MB and more": "PyTorch's THP threshold (a constant)",
        "(d <= 128 SwiGLU experts) and at most 128 rows per expert": (
            "the bfloat16 rule's thresholds (code constants)"
        ),
        "at d = 1024 with 32 rows per expert": "setup: the GEMM probe's shapes",
        "with 8 rows per expert": "setup: the GEMM probe's shapes",
        "d = 128-256": "a part of the grid (a setting)",
    },
    "self_distillation.rst": {
        "0-SD": "the paper's name of the plain classifier (zero SD stages)",
        "1-SD": "the paper's name of one self-distillation stage",
        "2-SD": "the paper's name of two self-distillation stages",
        "20-Newsgroups": "the data set's name",
        "Claim 1:": "section title: the paper's first claim",
        "Claim 2:": "section title: the paper's second claim",
        "Claim 3:": "section title: the paper's third claim",
        "Claim 4:": "section title: the paper's fourth claim",
        "Claim 4 is therefore": "the paper's fourth claim",
        "claims 1 and 4": "the paper's claims",
        "claims 1-3": "the paper's claims",
    },
    "spice.rst": {
        "the 30 targets": "setup: the targets",
        "all 30 targets": "setup: the targets",
        "over 30 targets": "setup: the targets",
        "30 targets": "setup: the targets",
        "Over all 30 targets": "setup: the targets",
        "over the last 6 epochs": "setup: the window of the rows",
        "to 1 % of its peak": "setup: the schedule",
        "70 training and 20 test ligands per split": "setup: the split",
        "(1,552 ligands;": "the size of MARCEL's Kraken (quoted)",
        "(width 32)": "setup: the width",
        "the 5 models x 3 splits": "setup: the runs",
        "Batch 8 was kept": "setup: the batch",
        "all 15 runs": "setup: the runs",
        "3 splits": "setup: the splits",
        "at most 8 per ligand": "setup: the conformers",
        "dummy Pd 2.28 A from P": "setup: the descriptor",
        "30 in all": "setup: the targets",
        "(2 blocks, 16 radial functions, cutoff 0.5 nm)": "setup: the backbone",
        "split 123": "setup: the tuning split",
        "SPiCE at width 32 with (experts, top-k) = (4, 1) or (8, 2)": "setup: the tuning grid",
        "every other model at width 16 or 32": "setup: the tuning grid",
        "batch 8, AdamW lr": "setup: the optimiser",
        "(2 warm-up epochs, cosine decay)": "setup: the schedule",
        "(2 warm-up epochs, cosine)": "setup: the schedule",
        "each family of 30 per-target tests": "setup: the correction",
        "at most 10 conformers": "setup: the conformers",
        "at most 10 per molecule": "setup: the conformers",
        "over the 4 targets": "setup: the targets",
        "84 training molecules per split": "setup: the split",
        "2D GINE embedding concatenated with the DeepSets 3D embedding": "the model's description",
        "2D + 3D": "the model's name",
        "2D-only": "the model's name",
        "2D only": "the model's name",
        "on splits 123, 8888, 8889": "which splits ran",
        "(70/10/20, molecule level;": "setup: the split",
        "(70/10/20,": "setup: the split",
        "20 epochs, batch 8": "setup: the training",
        "gradient clip 10": "setup: the training",
        "(20,000 flips)": "setup: the test",
        "mean ± std over 3 seeds": "setup: the seeds",
        "every model chose width 32 except": "the tuning's outcome (a grid value)",
        "Holm over the 7 targets": "setup: the correction",
        "reaches p = 0.05": "the test's level",
        "all 7 targets": "setup: the targets",
        "42 training and 12 test molecules per split": "setup: the split",
        "every model at width 32": "setup: the timing",
        "SPiCE with 8 experts, top-2": "setup: the timing",
        "four training batches of 8 molecules, interleaved, median of 3": "setup: the timing",
        '"within 2x of DeepSets"': "the issue's target",
        "All ten models at 30 epochs with a 4-configuration grid": (
            "setup: the run that did not fit"
        ),
        "(75 k molecules x tens of conformers)": "MARCEL's size (quoted)",
        "with Holm's correction over the 30 targets": "setup: the correction",
        "70/10/20 splits (seeds 123, 8888, 8889, 4242; training seeds 0-3)": "which splits ran",
    },
    "energy_diffusion.rst": {
        "within a factor 1.5 of the i.i.d. JS": "the agreement rule's factor (issue 28's target)",
        "(3 seeds)": "setup: the seeds",
        "MLP 3 x 92, batch 128": "setup: ScoreMD's recipe",
        "100 x 1,000 MD frames": "setup: ScoreMD's evaluation",
        'the target "within 1.5x"': "issue 28's target",
        "within the 1.5x target": "issue 28's target",
        "30 / 30 / 120 of the 180 epochs on t in [0.6, 1], [0.099, 0.6], [1e-5, 0.099]": (
            "setup: ScoreMD's Mueller-Brown MoE"
        ),
        "mass 0.5, friction 1, dt 5e-3, 50 steps per sample": "setup: ScoreMD's data recipe",
        "(100 BAOAB walkers from (-0.558, 1.442), burn-in 2000 steps)": "setup: the data generator",
        "MLP energy 3 x 92": "setup: the network",
        "t ~ U[1e-5, 1], time-weight mid 0.5": "setup: the DSM loss",
        "Batch 128,": "setup: the batch",
        '"EMA 0.995" updates ema = 0.995 new + 0.005 old': "setup: ScoreMD's EMA convention",
        "frames x 50 steps each": "setup: the MD",
        "ours, 100 x 100 bins of the box [-1.8, 1.1] x [-0.5, 2.0], and ScoreMD's, 100 bins": (
            "setup: the JS definitions"
        ),
        "on 64 bins per axis": "setup: the PMF error",
        "in kT^2": "a unit",
        "kT^2": "a unit",
        "1,024 points per t": "setup: the FP residual estimate",
        "the first 10,000 frames (1 ps apart)": "setup: the alanine training data",
        "Langevin 1/ps, 2 fs": "setup: the reference integrator",
        "/std = 10.6 /nm": "setup: the normalisation",
        "2 x 128, 2 x 128, 3 x 256": "setup: the expert networks",
        "5 / 10 / 35 epochs of 100 batches of 256": "setup: the training schedule",
        "10,000 i.i.d. samples (500 steps), MD with 100 walkers from reference frames, BAOAB "
        "2 fs, friction 1/ps, 300 K, 300 frames x 50 steps": ("setup: the alanine evaluation"),
        "on 64 bins of [-pi, pi]^2": "setup: the phi/psi histogram",
        "t -> 0 derivatives": "a limit",
        "within 1.5x of i.i.d.": "issue 28's target",
        "a negative two-probe mean to 0 (fp at t >= 0.3)": "where the plot clips",
        "host reads every 50 steps": "setup: the trainer",
        "sampler on 100,000 samples": "setup: the timing",
        "row chunks of 4,096": "setup: the sampler's chunk",
        "Langevin (100 walkers)": "setup: the timing",
        "(> 1: ours faster)": "how to read the ratio",
        "moved by 10-20 %": "an estimate of run-to-run spread (not stored)",
        "(5 beads, three seeds)": "setup: the model",
        "(phi > 0)": "a region of the Ramachandran plane",
        "Heavy atoms (10 atoms)": "setup: the model",
        "the 10 heavy atoms": "setup: the model",
        "/std = 7.45 /nm": "setup: the normalisation",
        "from 10 distances + 5 volumes to 45 + 210": "setup: the network inputs",
        "over the 9 heavy-atom bonds": "setup: the bonds",
        "after 150 more epochs (60 + 90)": "setup: the diagnostic",
        "after 150 more high-t epochs": "setup: the diagnostic",
        "as for the 5 beads": "setup: the model",
        "(~10,000 vs ~500,000;": "the paper's budget vs ours (settings)",
        "runs ScoreMD's 140,580": "setup: ScoreMD's step count",
        "100 parallel walkers instead of one trajectory": "setup",
        "instead of 0.": "the paper's force field time",
        "10,000 training frames from 10 ns (paper: 50,000 from 1 us, unconstrained, 1 fs)": (
            "setup and the paper's (quoted)"
        ),
        "3 ns of MD instead of 1.2 us": "setup and the paper's (quoted)",
        'code has "+1"': "ScoreMD's formula",
    },
    "tempering.rst": {
        "On a 1-D two-mode mixture": "setup: the target",
        "the 0.7 mode weight": "setup: the exact mode weight",
        "(exact 0.7)": "setup: the exact mode weight",
        "5 ns per sampler": "setup: the simulated time",
        "padded by 5 standard deviations": "setup: the grid",
        "proposal scale 1,": "setup: the kernel",
        "the 8-sigma gap": "setup: the mode separation",
        "20,000 iterations (one local step and one level move each), the first 4,000 discarded": (
            "setup: the Muller-Brown run"
        ),
        "RWMH (step 0.06), MALA (step 0.03), Langevin BAOAB (timestep 0.02, friction 10,": (
            "setup: the local kernels"
        ),
        "(1/ps, 2 fs)": "setup: the integrator",
        "for 22 atoms on one core": "setup: the system",
        "(5 ns)": "setup: the simulated time",
        "a frame every 50 steps": "setup: the output interval",
        "a Gibbs level move every 50 steps": "setup: the level moves",
        "(phi < 0, psi outside (-120, 50) deg)": "setup: the macrostates",
        "(phi < 0, -120 < psi < 50 deg)": "setup: the macrostates",
        "(phi > 0)": "setup: the macrostates",
        "phi in (-180, -30) and (30, 130) deg": "setup: the transition cores",
        "in 5 ns": "setup: the simulated time",
        "phi > 0": "setup: the macrostates",
        "plain MD stays at 0": "a count (no visit)",
        "(step 1, padded by": "setup: the theory grid",
        "(scale 1,": "setup: the kernel",
        "runs over 2-12 for": "setup: the separations",
        "and 2-8 for": "setup: the separations",
        "up to 2,500 states": "setup: the solver switch",
        "(padded by 5)": "setup: the fine grid",
        "*log(1/eps).*": "a heading (the formula)",
        "with 32 chains": "setup: the simulation",
        "over 5 seeds": "setup: the simulation",
    },
    "alanine_energy_model.rst": {
        "5-bead": "setup: the model",
        "walkers x 100 ps of Langevin BAOAB at 1 fs": "setup: the demo's MD",
        "a frame every 0.2 ps": "setup: the demo's MD",
        "(JS, nats, 64 x 64 bins)": "setup: the histogram",
        "JS <= 0.04": "issue 28's target",
        "MD seeds 0-2": "which seeds ran",
        "3 i.i.d. and 3 MD seeds": "setup: the seeds",
        "(16 walkers x 100 ps": "setup: the earlier demo",
        "(seeds 0-2,": "which seeds ran",
        "dropping the first 10 ps": "setup: the burn-in",
        "by about 0.02": "a rounded difference of two rendered figures",
        "for 5000 samples": "setup: the i.i.d. sample size",
        "with 16, 32 and 64 of its walkers": "setup: the check run (not stored)",
        "10 ps was taken": "setup: the burn-in",
        "(new protocol, seed 0)": "which seed",
        "2-3 minutes": "the demo's budget (issue 40)",
        "3-seed evaluation": "setup",
        "remaining 0.02": "a rounded difference of two rendered figures",
        "2-3 minute budget": "the demo's budget (issue 40)",
        "0.04 target": "issue 28's target",
        "(the force field at t = 1e-5)": "setup: the expert",
        "(weight 1e-3, ScoreMD's two-probe estimator, lr 3e-4 cosine": "setup: the fine-tune",
        "75-minute budget": "the issue's budget",
        "walkers x 25 ps, seed 100": "setup: the curve evaluations",
        "(step 0)": "an index",
        "16 walkers x 100 ps from one minimised structure": "setup: the earlier demo",
        "(phi > 0)": "a region of the Ramachandran plane",
        "about 1 % of their mass at phi > 0": "a rounded reading of the per-seed fractions",
        "at phi > 0": "a region of the Ramachandran plane",
        "(5000 draws; 8000:": "setup: the floor's sample sizes",
        "(16 x 100 ps from one minimised structure, a frame every 0.2 ps)": "setup",
        "seeds 0-2)": "which seeds ran",
        "32,000 frames": "setup: the continuation's data",
        "the first 10 ps of the demo": "setup: the comparison window",
        "over the same 10 ps": "setup: the comparison window",
        "at t = 1e-5": "setup: the force field's time",
        "(1000 i.i.d. samples, MD 16 x 10 ps;": "setup: the curve point",
        "(64 walkers x 100 ps, 10 ps burn-in)": "setup: the benchmark's defaults",
        "the earlier demo's 16 walkers and no burn-in": "setup: the earlier demo",
        "(1 seed, 1000 i.i.d. samples at 200 sampler steps, 4 walkers x 5 ps, 1 ps burn-in)": (
            "setup: the smoke test"
        ),
    },
    "mxd.rst": {
        "about 480M OpenWebText tokens with about 21k experts per layer": (
            "quoted: the paper's scale"
        ),
        "committed right after as ab02fd4": "the commit",
        "above the 3-minute target": "the issue's target",
        "d = 576, SwiGLU MLP 576 -> 1536 -> 576": "setup: the model",
        "10 % of each source's": "setup: the held-out share",
        "a transcoder of 2 d =": "setup: the budget",
        "The paper's ratio is 32 d latents": "quoted: the paper's sizes",
        "so that 24 trainings fit": "setup: the number of trainings",
        "the MLP's own 1536 hidden neurons": "setup: the MLP width",
        "own 1536 hidden neurons": "setup: the MLP width",
        "at 32 d latents and H = 1536": "setup: the paper-size rows",
        "with 8 times the MLP's parameters": "setup: the paper-size rows",
        "at k = 32": "a setting",
        "(16,896 experts, H = 1536)": "setup: the paper-size rows",
        "which has 8 times fewer parameters": "setup: the paper-size rows",
        "instead of about 21k, one layer of one 135M model": "quoted: the paper's scale",
    },
    "omni_expert.rst": {
        "and p < 0.05": "the test level of the verdicts",
        "at RT60 0.3, 0.6 and 1 s": "setup: the reverberation times",
        "of the 3 seeds": "setup: the seeds",
        "(RT60 0.6 s only, smaller sets)": "setup: the quick run",
        "rate 150-200 words/min, pitch 35-65, 16 kHz": "setup: the voices",
        "ShoeBox 6 x 5 x 3 m": "setup: the room",
        "8 ms Hamming frames, 6 ms hop (2 ms overlap)": "setup: the STFT",
        "an MLP 325 -> 128 (ReLU) -> 65 (sigmoid)": "setup: the expert",
        "40 experts upcycled from PI": "setup: the MoE",
        "40 x 65 scale (ReLU) and shift (LeakyReLU) tables": "setup: the OE tables",
        "mixture of 40 passes": "setup: Eq. 3",
        "325 -> 128 -> 40 (softmax). Adam 1e-3, 512 frames per batch": "setup: the classifier",
        "the 39 ARPAbet phonemes + silence": "setup: the labels",
        "(16-channel sine vocoder, log-spaced bands 200-7000 Hz, 160 Hz envelopes)": (
            "setup: the CI vocoder"
        ),
        "within 40 dB of the loudest": "setup: the LSD frames",
        "**RT60 = 0.3 s**": "setup: the reverberation time",
        "**RT60 = 0.6 s**": "setup: the reverberation time",
        "**RT60 = 1 s**": "setup: the reverberation time",
        "at RT60 0.6 s": "setup: the reverberation time",
        "the two folded 40 x 65 tables": "setup: the OE tables",
        "at 0.3, 0.6 and 1 s": "setup: the reverberation times",
        "the 10 ms frames": "setup: the alignment frames",
        "(RT60 0.6 s)": "setup: the reverberation time",
        "at 0.6 s": "setup: the reverberation time",
        "at 1 s": "setup: the reverberation time",
        "at 0.3 and 0.6 s": "setup: the reverberation times",
        "(PI 0.797 vs OE^p 0.807 / OE^k 0.836 STOI, LSTM, Table 2; quoted)": (
            "quoted: the paper's Table 2"
        ),
        "about 1/40 of the compute": "the paper's claim",
        "about 1/40 of very few frames": "a proportion (one of 40 experts)",
        '"one expert is as good as 40"': "a summary of the claim",
        "(Eq. 3 needs 40 expert passes": "the paper's equation",
        "(109.45 against PI's 109.44 MMACs; quoted)": "quoted: the paper's App. A.4",
        "(the paper, Table 3: 0.819 / 0.826 / 0.829 / 0.829; quoted)": (
            "quoted: the paper's Table 3"
        ),
        "an MLP over 5 past frames": "setup: the expert's context",
    },
    "mome.rst": {
        "transformers 5.24.0": "software version",
        "phrases of 2-4 words": "setup: the phrases",
        "speaking rate (140, 175, 210 words/min)": "setup: the voices",
        "split 70/15/15": "setup: the split",
        "40 log-mel bins, 25 ms window, 10 ms hop": "setup: the features",
        "rates 4, 8 and 16 (25, 12½ and 6¼ tokens per second)": "setup: the compression rates",
        "plus 0.01 x the Switch balance loss": "setup: the balance loss",
        "(rate 4)": "setup: the single adapter's rate",
        "(clean, 10 dB or 5 dB per batch)": "setup: the noise augmentation",
        "200 draws": "setup: the control",
        "seeds 0-2": "which seeds ran",
        "at rates 4, 8 and 16": "setup: the compression rates",
        "(layer 0)": "an index",
        "(layer 1)": "an index",
        "each 40 ms frame (25 frames/s)": "setup: the visual stream",
        "(22 SAPI classes,": "setup: the visemes",
        "30 % of the frames are zeroed": "setup: the visual dropout",
        "audio 4 or 16 x video 1 or 2 (25 or 12½ visual tokens per second)": (
            "setup: the rate pairs"
        ),
        "(rates 4 and 16)": "setup: the audio-only reference",
        "at rate 16,": "a setting (the compression rate)",
        "at rates 4 and 8": "a setting (the compression rates)",
        "at rates 8 and 16": "a setting (the compression rates)",
        "at rate 4": "a setting (the compression rate)",
        "at rate 16": "a setting (the compression rate)",
        "rate 4,": "a setting (the compression rate)",
        "0 dB": "a setting (the test SNR)",
        "-5 dB": "a setting (the test SNR)",
        "audio 4 / video 1": "a setting (the rate pair)",
        "audio 16 / video 2": "a setting (the rate pair)",
        "audio 16 / video 1": "a setting (the rate pair)",
        "audio 16 / video": "a setting (the rate pair)",
        "video rate 2": "a setting (the video rate)",
        "top-2 of 8 routed": "setup: the routing",
        "Fig. 5": "a reference into the paper",
    },
    "cogamid.rst": {
        "the full 64 x 64 run": "setup: the image size",
        "32 x 32 run": "setup: the image size",
        "(means over 3 seeds;": "setup: the seeds",
        "Procedural 32 x 32 scenes": "setup: the image size",
        "6 classes, 1-3 objects per image, colour drift 0.05 per step": "setup: the scenes",
        "2-3 appearance modes": "setup: the multimodal world",
        "Protocol 4-1 (classes 1-4, then 5, then 6)": "setup: the protocol",
        "(width 8, 16-dim penultimate features)": "setup: the network",
        "step 0 (250 Adam steps, batch 8, 120 images)": "setup: the base step",
        "60 Adam steps on 120 images": "setup: the later steps",
        "256 replayed pseudo-features": "setup: the replay",
        "refit every old-class mixture on 2000 of its own samples": "setup: Dynamic Adjustment",
        "probability >= 0.7": "setup: Dynamic Adjustment",
        "(weight 0.1, temperature 1)": "setup: the GRC loss",
        "Quick run (32 x 32)": "setup: the image size",
        "step 0": "an index (the incremental step)",
        "step 1": "an index (the incremental step)",
        "step 2": "an index (the incremental step)",
        "step-0 model": "an index (the incremental step)",
        "Full run (64 x 64)": "setup: the image size",
        "64 x 64 scenes (objects a quarter to 45 % of the side), 160 training and 60 test "
        "images per step, 400 base and 100 step iterations": "setup: the full run",
        "of 3 seeds": "setup: the seeds",
        "of 3)": "setup: the seeds",
        "At 64 x 64": "setup: the image size",
        "at 32 x 32": "setup: the image size",
        "1x1 head": "setup: the head",
        "class 5, the class learned in step 1": "an index (the class learned in step 1)",
        "temperature 1, untuned": "setup: the GRC loss",
        "at 64 x 64,": "setup: the image size",
        "(full:": "which run",
    },
    "vrp.rst": {
        "instances of 20 customers": "setup: the training size",
        "stages of 50 / 20 / 20 updates, batch 10": "setup: the script's default configuration",
        "pyvrp 0.14.1": "software version",
        "d = 32, 4 heads, 2 encoder layers, feed-forward 64": "setup: the policy",
        "(LoRA rank 4 per basis expert": "setup: the experts",
        "Adam 1e-3": "setup: the optimiser",
        "instances x 20 starts": "setup: the POMO starts",
        "on the 11 seen variants": "setup: the seen variants",
        "the 16 variants": "setup: the variants",
        "x8 augmentation": "setup: the augmentation",
        "over the 3 seeds": "setup: the seeds",
        "a time limit of 0.5 s per instance at N = 20 and 1 s at N = 50": "setup: PyVRP's limit",
        "all tokens of 8 instances per variant": "setup: the gate measurement",
        "for all 16 variants": "setup: the variants",
        "(CVRP50 0.873 % for MoSES(CaDA) in the paper, quoted)": "quoted: the paper's figure",
        "20-customer instances": "setup: the training size",
        "Inference 2-3 times slower than one backbone": "the claim's words",
        "PyVRP limits of 0.1 and 0.2 s": "setup: the quick run's limits",
    },
    "routing_science.rst": {
        "2.6 MB training / 0.29 MB validation bytes, fixed 90/10 split": "setup: the corpus",
        "of 16 windows, AdamW lr 3e-3 (warm-up 30, cosine to 3e-4), weight decay 0.1, clip "
        "1.0; validation on 128 fixed windows (8,192 bytes of the validation part)": (
            "setup: the optimiser and the validation set"
        ),
        "8 experts only": "setup: the quick run",
        "(coefficient 0.01)": "setup: the Switch loss",
        "(> 1: Default better)": "how to read the ratio",
        "(one per seed)": "setup",
        "the three 8-expert, k=2 Top-K models": "setup: the fine-tuned models",
        "(lr 1e-3, warm-up 10)": "setup: the fine-tuning optimiser",
        "(cross-entropy + Switch loss 0.01)": "setup: the objective",
        "on a 200-step model": "setup: the probe (not stored)",
        '"ratio" > 1': "how to read the ratio",
        "(Switch loss 0.01)": "setup: the Switch loss",
        "(8 experts only)": "setup",
        "over the 128 validation windows": "setup: the validation set",
        "batches of 16 windows": "setup: the validation batches",
        "(> 1: better than Switch)": "how to read the ratio",
        "(colour clipped at 3x)": "the figure's scale",
        "with 32 experts": "setup: the expert count",
        "8c1 … 32c4": "the paper's settings",
        "(paper: 9 % fewer for 8c1)": "quoted: the paper's figure",
        "(paper: -1.85 % throughput at 2B parameters)": "quoted: the paper's figure",
        "(paper: -45 %)": "quoted: the paper's figure",
        "(paper: +150 %)": "quoted: the paper's figure",
        "(paper: up to 23.8 % relative gain on downstream benchmarks)": (
            "quoted: the paper's figure"
        ),
        "with 8 experts": "setup: the expert count",
    },
    "fame.rst": {
        "rose by only 1 over the whole domain": "setup: the scaled time domain",
        "a rate of 10-20 per scaled domain": "setup: the tasks' rates (1.5-2 per unit, T = 10)",
        "by more than 1 over the domain": "setup: the tanh bound times the domain length",
        "With 75 % of the test observation times dropped": "setup: the dropped share",
        "with 75 % of the observation times dropped": "setup: the dropped share",
        "35 times the FLM's": "quoted: issue 45's figure for the issue-24 run",
        "(anomaly relative error 1)": "a reference level (climatology, by definition)",
        "scores exactly 1)": "a reference level (climatology, by definition)",
        "climatology is 1)": "a reference level (climatology, by definition)",
        "(50 % is no split)": "a reference level (chance)",
        "Nino 1+2 SST": "the data set",
        "up to 1989 to train on": "the chronological split",
        "input years up to 1989 train, 1990-1994 validate, 1995 on test": "the chronological split",
        "of 50 points)": "setup: the observation grid",
        "re-observed with 0, 25, 50 and 75 %": "setup: the dropped shares",
        "at 0 % dropped": "setup: the dropped share",
        "(p < 0.05)": "setup: the test level",
        "at rest at 0": "setup: the initial condition",
    },
    "routing_mamba.rst": {
        "(two blocks of width 32 vs 1.3B active parameters)": "setup and the paper's size",
        "10 % warm-up": "setup: the optimiser",
        "(within 5 %) 1x, 1.5x, 2.3x and 3x": "setup: the dense sizes (the issue's)",
        "of its last 20 % of the steps is less than 1 % below the best": "the flatness criterion",
        "the one at 80 % of the steps": "the older flatness criterion",
        "at 1x-3x active": "setup: the dense sizes",
        "95 % bootstrap interval": "the interval's level",
        "(2000 resamples": "setup: the bootstrap",
        "The paper's figure is 2.3x": "the paper's claim",
        "evaluated at L, 2L and 4L": "the context lengths (multiples of L)",
        "FLOP/token = 2 x active": "the FLOP count's definition",
        "= 3 x FLOP/token": "the FLOP count's definition",
        "(p < 0.05)": "the test level",
        'for "matches 2.3x"': "the paper's claim",
        "an upper end below 2.3": "the verdict rule",
        "a lower end above 1 with an upper end at or above 2.3": "the verdict rule",
        "1.3B/10B parameters": "the paper's setups (not run here)",
        "RoM matches a dense model of 2.3x its active parameters": "the paper's claim",
        "the dense 2.3x model itself": "the paper's claim (the model RoM should match)",
        "the dense 2.3x model;": "the paper's claim (the model RoM should match)",
        '"Matches 2.3x"': "the paper's claim",
        "the dense hybrids have 1x, 1.5x, 2.3x and 3x": "setup: the dense hybrid sizes",
        "The dense hybrids span 1x-3x": "setup: the dense hybrid sizes",
        "of its last 20 % of the tokens is less than 1 % below the best": (
            "the flatness criterion"
        ),
    },
    "fedlease.rst": {
        "the seeds where M > 2": "where top-M_max differs from top-2 (a setting's condition)",
        "(16 clients)": "the paper's setup",
        "LLaMA-2-7B": "the paper's model",
        "30 % of each client's examples held out": "setup: the split",
        "offline, 32 tokens": "setup: the model",
        "20-Newsgroups": "the name of the data set",
        "each token uses 1..M experts": "the paper's claim",
        "the first five layers": "setup: the model",
        "LoRA rank 4 (alpha 8)": "setup: the adapter",
        "Adam 3e-3, batch 16": "setup: the optimiser",
        "2..8": "setup: the silhouette's range",
        "from 4 random warm-up clients": "setup: IFCA's initialisation",
        "(Dirichlet 100)": "a diagnostic's setting (not stored)",
        "87.76 vs FedIT 82.23": "quoted: the paper's GLUE averages (not run here)",
        '"+5.53 %"': "quoted: the paper's abstract",
        "FedSA at 84.60, is 3.16 points": "quoted: the paper's GLUE average and its gap",
        "at the 5 % level": "the test's level (a setting)",
    },
    "md.rst": {
        "8.6.1 with one thread": "software version (OpenMM)",
        "alanine dipeptide at 300 K, Langevin with friction 1/ps and a 2 fs step": (
            "setup: the system"
        ),
        "all 22 atoms": "setup: the system",
        "5 backbone beads": "setup: the model",
        "5-bead model": "setup: the model",
        "5 coarse-grained beads against 22 atoms": "setup: the model and the system",
        "22 atoms on one core": "setup: the system",
        "16 walkers": "setup: the batch",
        "256 walkers": "setup: the batch",
        "the target was below 15 %": "the issue's target",
        "(median of 3 starts)": "setup: the repeats",
        "64 walkers at 1 fs": "setup: the demo's settings",
        "64 walkers": "setup: the demo's batch",
        "2 fs with X-H constraints": "setup: OpenMM's settings",
        "at least 3x": "the issue's target",
        "4 minutes": "the issue's target",
    },
    "graph_merging.rst": {
        "AnyGraph's 38 data sets": "quoted: the paper's benchmark (not run here)",
        "3-8 blocks": "setup: the SBM generator",
        "feature dimension 4-64, mean degree 8, 15 % of the edges held out": (
            "setup: the graph collection"
        ),
        "stops after 20 % of its most evaluations": "the early-stopping rule",
        "its last 20 % of the steps": "the convergence criterion",
        "the last 20 % of the evaluations and an absolute 0.005": "the older criterion",
        "p < 0.05": "the test level of the verdicts",
        "at the 5 % level": "the test level of the verdicts",
    },
    "fingerprints.rst": {
        "with a 95 % bootstrap interval": "the interval's level (a setting)",
        "its 95 % interval": "the interval's level (a setting)",
        "(< 1 % better over the last 20 % of steps)": "the flatness rule (a setting)",
        "(d_model 64, 2 layers, 4 experts, top-2,": "setup: the propagation LM",
        "alpha 0.05": "the test level of the verdicts",
        "(0.5 / 0.3 / 0.2 of the bytes)": "setup: the mixture's true proportions",
        "pretrained 160M-parameter models": "quoted: the paper's classifier (not run here)",
    },
    "more_brain.rst": {
        "tree 2 -> 4 -> 8 -> 16": "setup: the expert tree",
        "among the 300 held-out sentences of a subject (chance top-1 = 1/300)": (
            "setup: the retrieval pool"
        ),
        "a fixed 300 steps (100 in the quick run": "setup of the issue-41 runs (step counts)",
        "against the 4 planted networks and the 16 regions": "setup: the planted groups",
        "p < 0.05 decides": "the test level of the verdicts",
        "(weight 0.3, a partial-volume / registration mix)": "setup: the subject mixing",
        "the last 300 sentences test, the 150 before them validation": "setup: the split",
        "13 values from": "setup: the alpha grid",
        "one expert-choice level of 16 experts": "setup: the flat MoE",
        "the last 20 % of the steps beat the best": "the convergence criterion",
        "before them by less than 0.01, the resolution": "the convergence criterion",
        "or by less than 1 % relative": "the convergence criterion",
        "adjusted Rand index (0: chance, 1: exact)": "reference levels of the ARI",
        "into 4 and 16 clusters": "setup: the spectral clustering baseline",
        "(among the 150 validation sentences, so higher than the test figures among 300)": (
            "setup: the validation and test pools"
        ),
        "Dotted: the 100 and 300 steps": "setup of the issue-41 runs (step counts)",
    },
    "mvcge.rst": {
        "4 classes, mean degree 6 per view": "setup: the data set",
        "a 3-view contextual SBM": "setup: the data set",
        "MMD^2": "the name of the metric",
        "class means 1.0 e_c": "setup: the data set",
        "split 20 % train, 20 % validation, 60 % test": "setup: the split",
        "(contrast 0.7)": "setup: the complementary views",
        "(contrast 0.4)": "setup: the consistent views",
        "dropout 0.5, Adam (lr 0.01, weight decay": "setup: the optimiser",
        "WWW 2019": "venue and year of the cited paper (HAN)",
        "last 20 % of evaluations is less than 1 % below": "the convergence criterion",
        "p < 0.05": "the test level of the verdicts",
    },
}

_SKIP_DIRECTIVES = (
    "code-block",
    "code",
    "math",
    "image",
    "figure",
    "result-table",
    "verdicts",
    "toctree",
    "literalinclude",
)
_ROLE = re.compile(r":[\w:-]+:`[^`]*`")
_LITERAL = re.compile(r"``.+?``")
_LINK = re.compile(r"<[^>\s]+>`_")


def _ext():
    spec = importlib.util.spec_from_file_location(
        "_results_role", DOCS / "_ext" / "results_role.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def ext():
    mod = _ext()
    mod.register()
    return mod


def prose(text: str) -> str:
    """The page's text a reader sees as typed: without code, math, images, the rendered
    tables and roles, literals and link targets; whitespace normalised."""
    out, skip_indent, options = [], None, False
    lines = text.split("\n")
    for line in lines:
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if skip_indent is not None:
            if not stripped or indent > skip_indent:
                continue
            skip_indent = None
        m = re.match(r"\.\.\s+([\w-]+)::", stripped)
        is_comment = stripped.startswith("..") and not m and not stripped.startswith(".. |")
        if (m and m.group(1) in _SKIP_DIRECTIVES) or is_comment:
            skip_indent = indent
            continue
        if m:  # another directive (note, ...): its content is prose, its line is not
            options = True
            continue
        if options and re.match(r":[\w-]+:(?:\s|$)", stripped):
            continue  # an option of that directive (:header-rows: 1)
        options = False
        if stripped and set(stripped) <= set("=-~^*+#'\"`:._ ") and len(stripped) >= 3:
            continue  # section adornment, table border
        if stripped.endswith("::"):
            skip_indent = indent
            line = line.rstrip()[:-1]
        out.append(line)
    joined = " ".join(" ".join(out).split())
    for pattern in (_ROLE, _LITERAL, _LINK):
        joined = pattern.sub(" ", joined)
    return " ".join(joined.split())


def typed_numbers(page: str, text: str) -> list[str]:
    """Context of every digit on ``page`` that nothing renders and nothing allows."""
    body = prose(text)
    for phrase in sorted(PAGE_ALLOWED.get(page, {}), key=len, reverse=True):
        body = body.replace(phrase, " ")
    for pattern in ALLOWED:
        body = re.sub(pattern, " ", body)
    return [
        f"{body[max(0, m.start() - 40) : m.start()]}[[{m.group(0)}]]{body[m.end() : m.end() + 40]}"
        for m in re.finditer(r"\d+(?:[.,]\d+)*", body)
    ]


def problems(text: str) -> list[str]:
    """docutils messages (level >= warning) for ``text``, Sphinx-only roles left out."""
    tree = docutils.core.publish_doctree(
        text, settings_overrides={"warning_stream": io.StringIO(), "report_level": 5}
    )
    out = []
    for msg in tree.findall(docutils.nodes.system_message):
        first = msg.astext().split("\n", 1)[0]
        if msg["level"] >= 2 and "Unknown interpreted text role" not in msg.astext():
            if "No role entry" not in msg.astext():
                out.append(f"line {msg.get('line')}: {first}")
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_types_no_measured_number(page, ext):
    text = page.read_text(encoding="utf-8")
    bad = typed_numbers(page.name, text)
    assert not bad, (
        f"{page.name}: digits outside :result: -- render them from the JSON, or, for a "
        "setting, list the exact phrase in PAGE_ALLOWED with why:\n" + "\n".join(bad)
    )
    for phrase in PAGE_ALLOWED.get(page.name, {}):
        assert phrase in prose(text), f"{page.name}: {phrase!r} is gone; drop it from PAGE_ALLOWED"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_references_resolve(page, ext):
    text = page.read_text(encoding="utf-8")
    assert ":result:`" in text or ".. result-table::" in text, page.name
    assert not problems(text), problems(text)


def test_the_scan_finds_typed_numbers():
    text = (
        "Title\n=====\n\nFAME (NeurIPS 2025, issue 24) reaches 0.875 with K = 5, seeds 0, 1, 2;\n"
        "rk4 at :result:`fame#a | b:.3f` and ``--steps 60``.\n\n.. code-block:: console\n\n"
        "   $ run 1 2 3\n\n========  =====\nmodel     err\n========  =====\nFLM       0.351\n"
        "========  =====\n"
    )
    found = typed_numbers("x.rst", text)
    assert len(found) == 2 and "0.875" in found[0] and "0.351" in found[1]


# ---------------------------------------------------------------- the extension itself


def _doc(path: Path, value: float = 0.8754) -> None:
    rows = [
        {
            "case": "osc K=3",
            "metric": "err",
            "value": value,
            "unit": "",
            "vs": "K=1",
            "ratio": 1.05,
        },
        {"case": "osc K=5", "metric": "err", "value": 0.5, "unit": "", "vs": None, "ratio": None},
        {"case": "gap K=7", "metric": "err", "value": None, "unit": "", "vs": None, "ratio": None},
    ]
    verdicts = [
        {
            "claim": "more experts help",
            "verdict": "reproduced",
            "decisive": False,
            "metric": "err",
            "ours": value,
            "baseline": "K=1",
            "baseline_value": 0.9,
            "seeds": 3,
            "p_value": 0.04,
            "converged": False,
            "why": "not converged",
        }
    ]
    doc = {"benchmark": "demo", "machine": {"contention": {"f": 0.758}}, "rows": rows}
    path.write_text(json.dumps({**doc, "verdicts": verdicts}))


PAGE = """Demo
====

Error :result:`demo#osc K=3 | err:.3f` (ratio :result:`demo#osc K=3 | err | ratio:.2f`),
best :result:`demo#osc K=* | err @min:.1f`, load :result:`demo#/machine/contention/f:.0%`.

.. result-table:: demo
   :stub: model
   :rows: K=3; K=5
   :format: .2f
   :empty: K=5 | err ± ratio

   err = osc {row} | err
   err ± ratio = osc {row} | err ± osc {row} | err | vs=K=1 | ratio / osc {row} | err:.1f

.. verdicts:: demo
"""


def _html(ext, tmp_path, monkeypatch, text: str) -> tuple[str, list[str]]:
    monkeypatch.setattr(ext, "DEFAULT_DIRS", (tmp_path,))
    warnings = io.StringIO()
    html = docutils.core.publish_string(
        text, writer="html", settings_overrides={"warning_stream": warnings}
    ).decode()
    return html, [m for m in warnings.getvalue().splitlines() if "ERROR" in m]


def test_page_renders_values_from_json(ext, tmp_path, monkeypatch):
    _doc(tmp_path / "demo.json")
    html, errors = _html(ext, tmp_path, monkeypatch, PAGE)
    assert not errors, errors
    assert "0.88 ± 1.05 / 0.9" in html
    for shown in ("0.875", "1.05", "0.5", "76 %", "0.88", "more experts help", "reproduced"):
        assert shown in html, shown


def test_changing_a_json_value_changes_the_page(ext, tmp_path, monkeypatch):
    _doc(tmp_path / "demo.json", value=0.8754)
    before, _ = _html(ext, tmp_path, monkeypatch, PAGE)
    _doc(tmp_path / "demo.json", value=0.8784)  # three units in the last shown digit
    after, errors = _html(ext, tmp_path, monkeypatch, PAGE)
    assert not errors and "0.875" in before and "0.875" not in after and "0.878" in after
    assert ext.render("demo#osc K=3 | err:.3f", (tmp_path,))[0] == "0.878"


def test_derived_figures(ext, tmp_path):
    _doc(tmp_path / "demo.json")
    show = lambda spec: ext.render(spec, (tmp_path,))[0]  # noqa: E731
    assert show("demo#osc K=3 | err // osc K=5 | err:.3f") == "1.751"
    assert show("demo#osc K=3 | err -- osc K=5 | err:.4f") == "0.3754"
    assert show("demo#1 // osc K=5 | err:.1f") == "2.0"
    assert show("demo#osc K=* | err @max // osc K=* | err @min:.2f") == "1.75"
    assert show("demo#/machine/contention/f // 2:.3f") == "0.379"
    assert show("demo#osc K=3 | err -- osc K=5 | err // 2:.4f") == "0.1877"
    assert show("demo#osc K=3 | err ** osc K=3 | err | ratio:.4f") == "0.9192"


def test_a_filter_value_may_hold_a_wildcard(ext, tmp_path):
    _doc(tmp_path / "demo.json")
    show = lambda spec: ext.render(spec, (tmp_path,))[0]  # noqa: E731
    assert show("demo#osc K=* | err | vs=K=* @count:d") == "1"
    assert show("demo#osc K=* | err | vs=*1 | ratio @max:.2f") == "1.05"
    with pytest.raises(ext.ResultError, match="no matching row"):
        ext.render("demo#osc K=* | err | vs=K=2* @count", (tmp_path,))


def test_median_of_the_matched_rows(ext, tmp_path):
    _doc(tmp_path / "demo.json")
    show = lambda spec: ext.render(spec, (tmp_path,))[0]  # noqa: E731
    assert show("demo#osc K=* | err @median:.4f") == "0.6877"  # even count: mean of the two
    assert show("demo#osc K=3 | err @median:.4f") == "0.8754"


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("nothere#osc K=3 | err", "no results file"),
        ("demo#osc K=9 | err", "no row"),
        ("demo#osc K=3 | loss", "metrics of that case: err"),
        ("demo#gap K=7 | err", "not a measurement"),
        ("demo#osc K=* | err", "matches 2 rows"),
        ("demo#/machine/contention/g", "no key 'g'"),
        ("demo#osc K=3 | err | vs=K=2", "vs = 'K=2'"),
        ("demo#osc K=3 | err | vs:d", "cannot format"),
        ("demo osc K=3 | err", "FILE#SELECTOR"),
        ("demo#osc K=3 | err // 0", "division by zero"),
        ("demo#osc K=3 | err // two", "CASE | METRIC"),
        ("demo#osc K=3 | err -- osc K=3 | err | vs", "not a number"),
    ],
)
def test_missing_file_path_or_value_is_an_error(ext, tmp_path, spec, match):
    _doc(tmp_path / "demo.json")
    with pytest.raises(ext.ResultError, match=match):
        ext.render(spec, (tmp_path,))


def test_a_broken_reference_is_a_build_error(ext, tmp_path, monkeypatch):
    _doc(tmp_path / "demo.json")
    bad = "T\n=\n\nx :result:`demo#osc K=9 | err`\n\n.. verdicts:: nothere\n"
    _, errors = _html(ext, tmp_path, monkeypatch, bad)
    assert len(errors) == 2 and "no row" in errors[0] and "no results file" in errors[1]
    doc = json.loads((tmp_path / "demo.json").read_text())
    doc["verdicts"][0]["verdict"] = "partly"
    (tmp_path / "demo.json").write_text(json.dumps(doc))
    _, errors = _html(ext, tmp_path, monkeypatch, "T\n=\n\n.. verdicts:: demo\n")
    assert len(errors) == 1 and "partly" in errors[0]
