"""Phoneme inventories: espeak-ng English mnemonics -> the 39 CMU/ARPAbet phonemes + silence,
and the many-to-one phoneme -> viseme map.

**ARPAbet classes.** The 39 phonemes of the CMU Pronouncing Dictionary (stress removed),
plus ``"SIL"``: the 40 subtask classes of the Omni-Expert paper (Saha et al., NeurIPS
2025) and of Kaldi/pocketsphinx phone alignments. Index order: :data:`ARPABET` (alphabetical
phonemes, then ``"SIL"`` last).

**espeak-ng -> ARPAbet** (:data:`ESPEAK_TO_ARPABET`; stress marks ``' , % =`` are removed
first). Consonants map one-to-one (``D``->DH, ``T``->TH, ``S``->SH, ``Z``->ZH, ``N``->NG,
``tS``->CH, ``dZ``->JH, ``j``->Y, ``h``->HH; the flap ``t#``, ``t2`` and the glottal
stop ``?``->T; the linking glide ``;`` (*the* before a vowel: *the-y-object*)->Y;
syllabic ``n-``->N, ``m-``->M, ``@L``/``l-``->L; ``r-``/``*``->R; ``x``->HH). Vowels:
schwas ``@ @2 @5 a# V``->AH; ``3 3:``->ER; ``a aa``->AE; ``A: A@ 0 02 aa#``->AA (US *lot*,
*start*); ``O: O O2 O@ o@``->AO; ``E E2 E3 e@``->EH (*square*); ``eI``->EY; ``I I# I2 IR``->IH;
``i i: i@ i@3``->IY (*near*); ``U U@ @5``->UH (*cure*); ``u: u``->UW; ``aI aI@ aI3``->AY;
``aU aU@``->AW; ``OI``->OY; ``oU o``->OW. r-coloured diphthongs (``A@``,
``e@`` ...) map to their vowel only: one espeak event is one class, so the R is not split
off. Pauses ``_ _: _! _| ||``->SIL.

**Visemes** (:data:`ARPABET_TO_VISEME`): the 22-class map of Microsoft SAPI
(``SPVISEMES``, the en-US viseme IDs of the Azure/SAPI speech APIs): 0 silence; 1 AE AH;
2 AA; 3 AO; 4 EY EH UH; 5 ER; 6 Y IY IH; 7 W UW; 8 OW; 9 AW; 10 OY; 11 AY; 12 HH; 13 R;
14 L; 15 S Z; 16 SH CH JH ZH; 17 TH DH; 18 F V; 19 D T N; 20 K G NG; 21 P B M.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

import numpy as np

__all__ = [
    "ARPABET",
    "ARPABET_TO_VISEME",
    "ESPEAK_TO_ARPABET",
    "N_PHONEME_CLASSES",
    "N_VISEMES",
    "SILENCE",
    "phoneme_index",
    "to_arpabet",
    "to_viseme",
]

SILENCE = "SIL"

#: The 39 CMU/ARPAbet phonemes (alphabetical) followed by ``"SIL"``: class index order.
ARPABET: tuple[str, ...] = (
    "AA", "AE", "AH", "AO", "AW", "AY", "B", "CH", "D", "DH", "EH", "ER", "EY", "F", "G",
    "HH", "IH", "IY", "JH", "K", "L", "M", "N", "NG", "OW", "OY", "P", "R", "S", "SH", "T",
    "TH", "UH", "UW", "V", "W", "Y", "Z", "ZH", SILENCE,
)  # fmt: skip

N_PHONEME_CLASSES = len(ARPABET)

_GROUPS: dict[str, tuple[str, ...]] = {
    # consonants
    "B": ("b",), "CH": ("tS",), "D": ("d",), "DH": ("D",), "F": ("f",), "G": ("g",),
    "HH": ("h", "x"), "JH": ("dZ",), "K": ("k",), "L": ("l", "@L", "l-"),
    "M": ("m", "m-"), "N": ("n", "n-"), "NG": ("N",), "P": ("p",), "R": ("r", "r-", "*"),
    "S": ("s",), "SH": ("S",), "T": ("t", "t#", "t2", "?"), "TH": ("T",), "V": ("v",),
    "W": ("w",), "Y": ("j", ";"), "Z": ("z",), "ZH": ("Z",),
    # vowels
    "AH": ("@", "@2", "a#", "V", "@-"), "ER": ("3", "3:", "VR"), "AE": ("a", "aa"),
    "AA": ("A:", "A@", "0", "02", "A", "aa#"), "AO": ("O:", "O", "O2", "O@", "o@"),
    "EH": ("E", "E2", "E3", "e@", "e"), "EY": ("eI",), "IH": ("I", "I#", "I2", "IR", "I@"),
    "IY": ("i", "i:", "i@", "i@3"), "UH": ("U", "U@", "@5"), "UW": ("u:", "u"),
    "AY": ("aI", "aI@", "aI3", "aI@3"), "AW": ("aU", "aU@"), "OY": ("OI",), "OW": ("oU", "o"),
    SILENCE: ("_", "_:", "_!", "_|", "||", "_^_"),
}  # fmt: skip

#: espeak-ng English phoneme mnemonic (stress removed) -> ARPAbet class.
ESPEAK_TO_ARPABET: Mapping[str, str] = MappingProxyType(
    {sym: cls for cls, syms in _GROUPS.items() for sym in syms}
)

_VISEME_GROUPS: tuple[tuple[str, ...], ...] = (
    (SILENCE,), ("AE", "AH"), ("AA",), ("AO",), ("EY", "EH", "UH"), ("ER",), ("Y", "IY", "IH"),
    ("W", "UW"), ("OW",), ("AW",), ("OY",), ("AY",), ("HH",), ("R",), ("L",), ("S", "Z"),
    ("SH", "CH", "JH", "ZH"), ("TH", "DH"), ("F", "V"), ("D", "T", "N"), ("K", "G", "NG"),
    ("P", "B", "M"),
)  # fmt: skip

#: ARPAbet class -> Microsoft SAPI viseme id (0-21).
ARPABET_TO_VISEME: Mapping[str, int] = MappingProxyType(
    {p: v for v, group in enumerate(_VISEME_GROUPS) for p in group}
)
N_VISEMES = len(_VISEME_GROUPS)
_INDEX = {p: i for i, p in enumerate(ARPABET)}


def to_arpabet(symbol: str) -> str:
    """ARPAbet class of one espeak-ng phoneme mnemonic (stress marks allowed).

    espeak and ARPAbet share letters with different meanings (espeak ``T`` is ARPAbet
    ``TH``), so this takes espeak symbols only; ARPAbet names go to :func:`phoneme_index`.

    Parameters
    ----------
    symbol : str
        espeak mnemonic such as ``"'oU"``, ``"dZ"`` or ``"_:"``.

    Returns
    -------
    str
        One of :data:`ARPABET`.

    Examples
    --------
    >>> to_arpabet("'oU"), to_arpabet("dZ"), to_arpabet("T"), to_arpabet("_:")
    ('OW', 'JH', 'TH', 'SIL')
    """
    bare = symbol.lstrip("',%=")
    try:
        return ESPEAK_TO_ARPABET[bare]
    except KeyError:
        raise ValueError(
            f"espeak phoneme {symbol!r} has no ARPAbet class: add it to "
            "sci_moe.speech.phonemes._GROUPS (English voices only are mapped)"
        ) from None


def phoneme_index(phonemes: Iterable[str]) -> np.ndarray:
    """Class indices (into :data:`ARPABET`) of ARPAbet phoneme names.

    Parameters
    ----------
    phonemes : iterable of str
        ARPAbet names (``"AA"`` ... ``"ZH"``, ``"SIL"``); stress digits (``"AH0"``) are
        removed. Convert espeak symbols with :func:`to_arpabet` first.

    Returns
    -------
    numpy.ndarray, shape (n,), int64
    """
    out = []
    for p in phonemes:
        bare = p.rstrip("012")
        if bare not in _INDEX:
            raise ValueError(f"{p!r} is not an ARPAbet phoneme: use one of sci_moe.speech.ARPABET")
        out.append(_INDEX[bare])
    return np.array(out, dtype=np.int64)


def to_viseme(phoneme: str) -> int:
    """SAPI viseme id (0-21) of an ARPAbet phoneme (stress digits allowed).

    Examples
    --------
    >>> to_viseme("P"), to_viseme("AH0"), to_viseme("SIL")
    (21, 1, 0)
    """
    return ARPABET_TO_VISEME[ARPABET[int(phoneme_index([phoneme])[0])]]
