"""Speech: offline espeak-ng synthesis, phoneme inventories and the Omni-Expert (OE).

:func:`synthesize` speaks text with the espeak-ng library of the ``espeakng-loader`` wheel
and returns the audio with espeak's own phoneme timings; :mod:`~sci_moe.speech.phonemes`
maps them to the 39 ARPAbet phonemes + silence and to visemes. The Omni-Expert (Saha et
al., NeurIPS 2025) replaces a 40-expert phoneme MoE by one expert with per-phoneme input
transforms, for phoneme-specific dereverberation masks of cochlear-implant speech; it is
the subpackage :mod:`sci_moe.speech.omni`. MoME (Cappellazzo et al., NeurIPS 2025),
Matryoshka experts beside a frozen transformer for speech recognition at several
compression rates, is the subpackage :mod:`sci_moe.speech.mome`. Each name has one import
path: this package exports the synthesis and the phoneme inventories, not the papers' names.
"""

from .phonemes import (
    ARPABET,
    ARPABET_TO_VISEME,
    ESPEAK_TO_ARPABET,
    N_PHONEME_CLASSES,
    N_VISEMES,
    SILENCE,
    phoneme_index,
    to_arpabet,
    to_viseme,
)
from .tts import (
    PhonemeEvent,
    Utterance,
    check_synthesis,
    list_voices,
    synthesis_id,
    synthesize,
)

__all__ = [
    "ARPABET",
    "ARPABET_TO_VISEME",
    "ESPEAK_TO_ARPABET",
    "N_PHONEME_CLASSES",
    "N_VISEMES",
    "SILENCE",
    "PhonemeEvent",
    "Utterance",
    "check_synthesis",
    "list_voices",
    "phoneme_index",
    "synthesis_id",
    "synthesize",
    "to_arpabet",
    "to_viseme",
]
