"""espeak -> ARPAbet -> viseme maps."""

import pytest

from sci_moe.speech import (
    ARPABET,
    ARPABET_TO_VISEME,
    ESPEAK_TO_ARPABET,
    N_PHONEME_CLASSES,
    N_VISEMES,
    phoneme_index,
    synthesize,
    to_arpabet,
    to_viseme,
)

PARAGRAPH = (
    "The birch canoe slid on the smooth planks. Glue the sheet to the dark blue background. "
    "It's easy to tell the depth of a well. These days a chicken leg is a rare dish. "
    "The juice of lemons makes fine punch. Four hours of steady work faced us. "
    "Oh boy, what a pleasure: the usual thing, a measure of beige azure joy! "
    "Bottle, button, rhythm, tour, poor, sure, fire, hour, near, hair, car, door, cure, "
    "caught, cot, bath, father, thought, judge, vision, singing, oil, toy, mouth, butter. "
    "The assigned object should be a sequence object of the same type."
)


def test_inventory_sizes():
    assert N_PHONEME_CLASSES == 40 and len(set(ARPABET)) == 40 and ARPABET[-1] == "SIL"
    assert set(ESPEAK_TO_ARPABET.values()) == set(ARPABET)  # every class is reachable
    assert set(ARPABET_TO_VISEME) == set(ARPABET)
    assert set(ARPABET_TO_VISEME.values()) == set(range(N_VISEMES)) and N_VISEMES == 22


@pytest.mark.parametrize("voice", ["en-us", "en", "en-us+f3"])
def test_map_covers_every_symbol_espeak_emits(voice):
    utt = synthesize(PARAGRAPH, voice=voice, sample_rate=8000)
    symbols = {e.symbol for e in utt.phonemes}
    missing = symbols - set(ESPEAK_TO_ARPABET)
    assert not missing, missing
    classes = {to_arpabet(s) for s in symbols}
    assert len(classes) >= 34, sorted(set(ARPABET) - classes)  # nearly the whole inventory


def test_known_mappings_and_errors():
    assert [to_arpabet(s) for s in ["'oU", "dZ", "T", "D", "N", "_:", "@L", "t#"]] == [
        "OW", "JH", "TH", "DH", "NG", "SIL", "L", "T"
    ]  # fmt: skip
    assert phoneme_index(["AA", "SIL", "B", "AH0"]).tolist() == [0, 39, 6, 2]
    assert to_viseme(to_arpabet("m")) == to_viseme("B") == 21
    with pytest.raises(ValueError, match="no ARPAbet class"):
        to_arpabet("qq")
    with pytest.raises(ValueError, match="not an ARPAbet phoneme"):
        phoneme_index(["dZ"])
