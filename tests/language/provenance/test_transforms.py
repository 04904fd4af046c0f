import pytest

from sci_moe.language.provenance import remove_formatting, restrict_vocabulary, top_words


def test_remove_formatting_fixed_examples():
    md = "## History\n\nThe **city** was *founded* in 1200.\n\n- first item\n- second item\n1. one"
    assert remove_formatting(md) == (
        "History The city was founded in 1200. first item second item one"
    )
    assert remove_formatting("a\n\n\tb   c\n") == "a b c"
    # words and punctuation are untouched
    assert remove_formatting("x - y, z.") == "x - y, z."


def test_remove_formatting_makes_layouts_equal():
    a = "Title\nThe cat sat.\nIt slept."
    b = "# Title\n\nThe cat sat.\n\nIt slept."
    assert remove_formatting(a) == remove_formatting(b)


def test_restrict_vocabulary():
    vocab = top_words(["the cat the dog", "the cat"], 2)
    assert vocab == {"the", "cat"}
    assert restrict_vocabulary("The CAT, a dog!\nthe end", vocab) == "the cat the"
    assert restrict_vocabulary("the bird", vocab, unknown="_") == "the _"
    with pytest.raises(ValueError):
        top_words(["x"], 0)
