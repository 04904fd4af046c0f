"""
MoME: Matryoshka experts beside a frozen transformer, at three compression rates
================================================================================

MoME (Cappellazzo et al., NeurIPS 2025) adds shared and top-k routed bottleneck
experts *in parallel* to the blocks of a frozen pretrained transformer, with one router
serving every Matryoshka compression rate of the input token sequence.
:mod:`sci_moe.speech.mome` builds it from the core's router, adapter experts and
dispatch. This tutorial, in a few seconds:

1. speaks three phrases with espeak-ng (synthetic speech) and computes log-mel frames;
2. puts MoME adapters beside the attention blocks of the frozen all-MiniLM-L6-v2 and
   checks that, freshly initialised, they leave its output bit-identical;
3. runs the recogniser at audio compression rates 4, 8 and 16 and looks at the
   per-rate expert usage of the one shared router.

Training and the comparison with per-rate and single adapters are in
``benchmarks/mome/run.py``; the numbers are on the results page.
"""

# %%
# Synthetic speech and log-mel frames
# -----------------------------------
# :func:`~sci_moe.speech.mome.build_speech_set` speaks each phrase with espeak-ng
# (voices, speaking rates and pitches drawn per utterance) and keeps espeak's phoneme
# timings, from which a synthetic 25 frames/s viseme stream is derived.

import matplotlib.pyplot as plt
import torch

from sci_moe.speech.mome import (
    MatryoshkaRates,
    MoMEConfig,
    RecognizerConfig,
    SpeechRecognizer,
    SpeechSetConfig,
    build_speech_set,
    load_minilm,
)
from sci_moe.stats import pairwise_js_divergence

torch.manual_seed(0)
phrases = ["open the door", "rivers flow to the sea", "we like music"]
data = build_speech_set(
    SpeechSetConfig(num_phrases=3, variants=1, split=(0.34, 0.33, 0.33)),
    progress=False,
    phrases=phrases,
)
batch = data.batch(range(len(data)), multiple={"audio": 16})
frames, mask = batch.streams["audio"]
print("log-mel frames", tuple(frames.shape), "real frames per utterance", mask.sum(1).tolist())

fig, ax = plt.subplots(figsize=(7, 2.5))
ax.imshow(frames[0, : int(mask[0].sum())].T, origin="lower", aspect="auto")
ax.set(xlabel="frame (10 ms)", ylabel="mel bin", title=f"'{batch.texts[0]}' (espeak-ng)")
fig.tight_layout()

# %%
# MoME beside the frozen attention blocks
# ---------------------------------------
# Every up-projection starts at zero, so the adapters change nothing until trained.

backbone = load_minilm(num_layers=2)
x = torch.randn(1, 7, 384)
before = backbone(inputs_embeds=x).last_hidden_state
config = RecognizerConfig(
    compression=MatryoshkaRates({"audio": (4, 8, 16)}),
    adapter="mome",
    mome=MoMEConfig(d_model=384, num_experts=8, top_k=2, num_shared=1, bottleneck=8),
    upsample=8,
    encoder_dim=32,
)
model = SpeechRecognizer(backbone, config).eval()
after = backbone(inputs_embeds=x).last_hidden_state
print("frozen output unchanged by fresh adapters:", torch.equal(before, after))
print(model.parameter_counts())

# %%
# One router, three compression rates
# -----------------------------------
# The same model runs at any of its rates; the adapters record which experts each
# rate's tokens use. Random (untrained) experts are used here so the router has
# something to route; the benchmark measures the trained router.

adapters = model.adapters
for a in adapters.adapters:
    torch.nn.init.normal_(a.experts.down, std=0.02)
adapters.record(True)
with torch.no_grad():
    for rate in (4, 8, 16):
        out = model(batch.streams, {"audio": rate})
        print(f"rate {rate:2d}: {tuple(out.log_probs.shape)} CTC frames x symbols")
adapters.record(False)
usage = adapters.usage()[-1]
fig, ax = plt.subplots(figsize=(7, 2.8))
for i, (label, u) in enumerate(usage.items()):
    ax.bar(torch.arange(8) + 0.27 * (i - 1), u, 0.27, label=label)
ax.set(xlabel="routed expert", ylabel="share of assignments", title="last layer, per rate")
ax.legend()
fig.tight_layout()
js = pairwise_js_divergence(torch.stack([u.float() for u in usage.values()]))
print("mean JS between the rates' usage (nats):", round(float(js), 4))
