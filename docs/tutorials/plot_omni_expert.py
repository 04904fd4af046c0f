"""
The Omni-Expert idea in 40 lines: one expert, per-phoneme input transforms
==========================================================================

The Omni-Expert (Saha et al., NeurIPS 2025) gets the divide-and-conquer of a
phoneme-specific mixture of experts with **one** expert: for phoneme ``n`` the input is
transformed, ``z_n = a_n * x + b_n``, and the mask is ``E(z_n)``. The 40 scale/shift
vectors come from tiny MLPs of a one-hot and fold into a 40 x 65 lookup table, so the
model costs one expert pass plus a table lookup instead of 40 experts.

Here, in a few seconds: espeak-ng speaks seven sentences (synthetic speech, with espeak's
own phoneme timings as labels), a pyroomacoustics room reverberates them, and we train a
phoneme-independent (PI) dereverberation mask, then the OE on top of it, each until its
validation loss (on a sixth sentence) is flat, and compare their ideal-ratio-mask loss and
the STOI and ESTOI of cochlear-implant-vocoded speech on a held-out sentence. The full
comparison with the 40-expert MoE, every model trained until flat, 5 seeds, is
``benchmarks/omni_expert/full.py``.
"""

# %%
# Speech, a room, frames
# ----------------------
import matplotlib.pyplot as plt
import numpy as np
import torch

from sci_moe.speech import ARPABET, synthesize
from sci_moe.speech.omni import (
    FeatureNormalizer,
    FrameSet,
    MaskNetConfig,
    OmniExpertMask,
    RoomConfig,
    TrainConfig,
    apply_mask,
    converged,
    frame_tensors,
    mask_loss,
    oracle_probs,
    reverberate,
    simulate_rir,
    train_oe,
    train_pi,
    utterance_frames,
    vocoded_stoi,
)  # fmt: skip

torch.manual_seed(0)
texts = ["The name is rebound if it was already bound.", "Next, the subscript is evaluated.",
         "The bounds should evaluate to integers.", "This is a sequence of small words.",
         "A new object is created for every call.", "The name is returned.",
         "Each value is checked in turn."]  # fmt: skip
room = simulate_rir(RoomConfig(rt60=0.4, room_dim=(5.0, 4.0, 3.0)), 16000, seed=0)
utts = [synthesize(t, voice=v) for t, v in zip(texts, ["en-us", "en-us+m3"] * 4, strict=False)]
sigs = [reverberate(u.audio, u.sample_rate, room) for u in utts]
frames = [utterance_frames(r.reverberant, r.direct, u.phonemes) for r, u in zip(sigs, utts)]  # noqa: B905
train = FrameSet.concat(frames[:5])
norm = FeatureNormalizer.fit(train.log_mag)
net = MaskNetConfig(context=5, hidden=64)
D, test = frame_tensors(train, norm, net.context), frame_tensors(frames[5], norm, net.context)
val = frame_tensors(frames[6], norm, net.context)

# %%
# PI first, then the Omni-Expert initialised from it
# --------------------------------------------------
# ``OmniExpertMask.from_pi`` copies the PI expert and starts every ``a_n = 1``,
# ``b_n = 0``, so before training it *is* the PI model. Training uses the oracle phoneme
# of each frame (espeak's event); at test time we also give oracle labels (OE^k). Each
# trains until its validation loss is flat: less than 1 % better over the last 20 % of the
# steps (checked every 20 steps, at most 60 epochs); the best weights are kept.
cfg = TrainConfig(epochs=60, batch_size=32, eval_every=20, until_flat=True, flat_min_steps=200)
pi, r_pi = train_pi(D, net, cfg, validation=val, return_result=True)
oe0 = OmniExpertMask.from_pi(pi)
k = oracle_probs(test.labels)
assert torch.allclose(oe0(test.features, k), pi(test.features))
oe, r_oe = train_oe(pi, D, cfg, validation=val, return_result=True)
for name, r in [("PI", r_pi), ("OE", r_oe)]:
    print(f"{name}: {r.step} steps, best validation loss {r.best_metric:.4f}, "
          f"flat {converged(r, cfg)}")  # fmt: skip
oe.table.fold()  # the MLPs become two 40 x 65 lookup tables

with torch.no_grad():
    for name, m in [("PI", pi(test.features)), ("OE^k", oe(test.features, k))]:
        est = apply_mask(sigs[5].reverberant, m.double().numpy())
        print(f"{name:5s} mask loss {float(mask_loss(m, test.irm, test.magnitude)):.4f}  "
              f"vocoded STOI {vocoded_stoi(sigs[5].direct, est, 16000):.3f}  ESTOI "
              f"{vocoded_stoi(sigs[5].direct, est, 16000, extended=True):.3f}")  # fmt: skip
print(f"reverberant vocoded STOI {vocoded_stoi(sigs[5].direct, sigs[5].reverberant, 16000):.3f}")

# %%
# The learned per-phoneme scale and shift tables
# ----------------------------------------------
# Rows are the 39 phonemes + silence, columns the 65 frequency bins. A phoneme that the five
# training sentences never contain has no gradient on its own column of the MLP, so its
# row moves only with the MLP's shared bias.
A, B = (t.numpy() for t in oe.table.tables())
fig, axes = plt.subplots(1, 2, figsize=(9, 4.5), sharey=True)
for ax, T, title in [(axes[0], A, "scale a_n"), (axes[1], B, "shift b_n")]:
    im = ax.imshow(T, aspect="auto", cmap="coolwarm", interpolation="nearest")
    ax.set_title(title), ax.set_xlabel("frequency bin"), fig.colorbar(im, ax=ax)
axes[0].set_yticks(range(0, 40, 3), [ARPABET[i] for i in range(0, 40, 3)], fontsize=7)
fig.tight_layout()
seen = np.unique(D.labels.numpy())
print(
    f"{len(seen)} of 40 classes occur in training; mean |a - 1| seen "
    f"{np.abs(A[seen] - 1).mean():.3f}, unseen {np.abs(np.delete(A, seen, 0) - 1).mean():.3f}"
)
