import pytest

from sci_moe.language.provenance import (
    c4_filter,
    gopher_filter,
    minhash_dedup,
    normalize_text,
    shingles,
)

PAGE = (
    "Home | About\n"
    "The river flows north through the valley for many miles.[1]\n"
    "Enable javascript to see the map of the whole region here.\n"
    "It has two short bridges\n"
    "Fish are common in it and people catch them often. Boats are rare!\n"
    "Too short.\n"
)


def test_c4_keeps_only_terminal_long_lines_and_removes_citations():
    out = c4_filter(PAGE)
    assert out == (
        "The river flows north through the valley for many miles.\n"
        "Fish are common in it and people catch them often. Boats are rare!"
    )


@pytest.mark.parametrize(
    "page",
    [
        "One two three four five six. Seven eight nine ten eleven.",  # 2 sentences
        PAGE + "lorem ipsum dolor sit amet is here now.",
        PAGE + "A curly { brace appears in this line too.",
    ],
)
def test_c4_drops_pages(page):
    assert c4_filter(page) is None


def _prose(n_words=80):
    base = "the cat and the dog went to the park with a ball of yarn that day".split()
    return " ".join(base[i % len(base)] + str(i // len(base)) for i in range(n_words))


def test_gopher_rules():
    good = _prose() + " the and to of"
    assert gopher_filter(good) == good
    assert gopher_filter("the cat and the dog " * 5) is None  # < 50 words
    bullets = "\n".join("- the item and of number" for _ in range(20))
    assert gopher_filter(bullets) is None  # > 90 % bullet lines
    no_stop = " ".join(f"zebra{i}" for i in range(80))
    assert gopher_filter(no_stop) is None  # < 2 stop words
    hashes = good + " #" * 20
    assert gopher_filter(hashes) is None  # symbol-to-word ratio
    repeated = "\n".join(["the cat and the dog sat together on the mat today"] * 10)
    assert gopher_filter(repeated) is None  # duplicate lines


def test_normalize_text():
    assert (
        normalize_text("\u201cQuote\u201d \u2014 x\u2026\n\n\n  y\tz  \n") == '"Quote" - x...\ny z'
    )
    assert normalize_text("\ufb01ne") == "fine"  # NFKC ligature


def test_minhash_dedup_drops_near_duplicates_only():
    a = "the quick brown fox jumps over the lazy dog near the river bank today " * 3
    b = a + "again"  # near-duplicate of a
    c = "completely different text about astronomy stars galaxies and the night sky " * 3
    assert minhash_dedup([a, b, c, "", a], threshold=0.8) == [0, 2]
    assert minhash_dedup([a, c], threshold=0.8) == [0, 1]
    with pytest.raises(ValueError, match="threshold"):
        minhash_dedup([a], threshold=1.5)


def test_shingles():
    assert shingles("A b c", n=5) == {"a b c"}
    assert shingles("a b c d", n=2) == {"a b", "b c", "c d"}
    assert shingles("   ") == set()


def test_english_score_and_language_id_thresholds():
    from sci_moe.language.provenance import english_score, language_id_filter

    assert english_score("The cat sat on the mat.") == 0.5
    assert english_score("Der Hund bellt laut.") == 0.0
    assert english_score("123 456") == 0.0
    text = "The cat sat on the mat.\nDer Hund bellt laut im Garten.\nOk"
    assert language_id_filter(text, 0.2) == text  # page score 4/13 >= 0.2
    assert language_id_filter(text, 0.5) is None
    # line level: the German line goes; "Ok" (< 3 words) is judged by the page score
    kept = language_id_filter(text, 0.2, per_line=True, min_words=3)
    assert kept == "The cat sat on the mat.\nOk"
    assert language_id_filter("Der Hund.", 0.2, per_line=True) is None
    with pytest.raises(ValueError, match="threshold"):
        language_id_filter(text, 1.5)
