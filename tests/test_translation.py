"""The real-language data of notebook 12: the shipped Tatoeba pairs and their splits."""

import gzip
import hashlib
import random
from collections import Counter

import pytest

from transformer_lib import translation_corpus
from transformer_lib.translation_corpus import TatoebaCorpus, normalise_text, sentence_key, split_pairs

DATA_DIR = translation_corpus.shipped_pairs_path().parent

# What every machine must hold out: the SHA-256 of the valid then test pairs of the default corpus, one
# "English<TAB>French" line each, in order. A change here changes what the course's BLEU is measured on.
HELD_OUT_SHA256 = "3b56ddd15e0485bcc7f67df5ef0c18fc5733907f85f17c11c278214e18257292"


@pytest.fixture(scope="module")
def corpus() -> TatoebaCorpus:
    return TatoebaCorpus()


# -- the shipped file ---------------------------------------------------------------------------------------------


def test_shipped_pairs_carry_their_licence_size_and_checksum():
    packed = (DATA_DIR / "pairs.tsv.gz").read_bytes()
    text = gzip.decompress(packed)
    licence = (DATA_DIR / "LICENSE.md").read_text(encoding="utf-8")
    readme = (DATA_DIR / "README.md").read_text(encoding="utf-8")
    for document in (licence, readme):
        assert translation_corpus.ATTRIBUTION in document and translation_corpus.LICENCE_URL in document
    assert f"{len(packed):,} bytes" in readme  # the README states the size of the file next to it
    assert hashlib.sha256(text).hexdigest() == translation_corpus.SHIPPED_TEXT_SHA256
    assert translation_corpus.SHIPPED_TEXT_SHA256 in readme
    assert len(packed) < 4_000_000  # a course repository, not a data set host


def test_read_pairs_gives_normalised_pairs_of_at_most_15_english_words():
    pairs = translation_corpus.read_pairs()
    assert len(pairs) == 166_149
    assert pairs[:2] == [("Go.", "Va !"), ("Hi.", "Salut !")]  # the narrow no-break space became a plain one
    assert max(len(en.split()) for en, _ in pairs) == 15
    assert len(set(pairs)) == len(pairs)
    assert all(normalise_text(en) == en and normalise_text(fr) == fr for en, fr in pairs[::97])


def test_normalise_text_gives_one_spelling():
    assert normalise_text("Va\u202f!") == "Va !"  # French typography's narrow no-break space
    assert normalise_text("l\u2019homme\u00a0«\u2009oui\u2009»") == "l'homme « oui »"
    assert normalise_text("e\u0301te\u0301") == "été"  # decomposed accents composed (NFC)
    assert normalise_text("  two \t spaces\u200b here\n") == "two spaces here"
    with pytest.raises(TypeError, match="takes a str, got bytes"):
        normalise_text(b"Go.")


def test_read_pairs_names_what_is_wrong_with_a_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no pairs file"):
        translation_corpus.read_pairs(tmp_path / "missing.tsv")
    truncated = tmp_path / "cut.tsv.gz"
    truncated.write_bytes((DATA_DIR / "pairs.tsv.gz").read_bytes()[:1000])
    with pytest.raises(ValueError, match="not a readable UTF-8"):
        translation_corpus.read_pairs(truncated)
    three = tmp_path / "three.tsv"
    three.write_text("Hi.\tSalut !\nGo.\tVa !\textra\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 2: expected English<TAB>French, got 3 fields"):
        translation_corpus.read_pairs(three)


# -- splits -------------------------------------------------------------------------------------------------------


def test_held_out_sentences_never_appear_in_training_on_either_side(corpus):
    sizes = {name: len(getattr(corpus, f"{name}_pairs")) for name in ("train", "valid", "test")}
    assert 1000 <= sizes["valid"] < 1100 and 1000 <= sizes["test"] < 1100, sizes
    assert sum(sizes.values()) == 166_149
    train_sentences = {sentence_key(text) for pair in corpus.train_pairs for text in pair}
    valid_sentences = {sentence_key(text) for pair in corpus.valid_pairs for text in pair}
    test_sentences = {sentence_key(text) for pair in corpus.test_pairs for text in pair}
    assert not train_sentences & valid_sentences and not train_sentences & test_sentences
    assert not valid_sentences & test_sentences
    # English sentences with several French translations are held out with all of them
    english_split = {}
    for name in ("train", "valid", "test"):
        for en, _ in getattr(corpus, f"{name}_pairs"):
            assert english_split.setdefault(sentence_key(en), name) == name
    several = Counter(sentence_key(en) for en, _ in corpus.test_pairs)
    assert max(several.values()) >= 3  # there are such groups in the test split, and they stayed whole


def test_split_is_the_same_on_every_machine(corpus):
    held_out = "".join(f"{en}\t{fr}\n" for en, fr in corpus.valid_pairs + corpus.test_pairs)
    assert hashlib.sha256(held_out.encode()).hexdigest() == HELD_OUT_SHA256


def test_split_pairs_keeps_groups_whole_by_english_and_by_french():
    pairs = [
        ("I'm fine.", "Je vais bien."),
        ("I'm fine!", "Ça va."),  # the same English sentence (case and punctuation ignored)
        ("I'm OK.", "Je vais bien."),  # the same French sentence as the first pair: one group of three
        ("Go.", "Va !"),
        ("Hi.", "Salut !"),
        ("Run!", "Cours !"),
        ("Run.", "Courez !"),
    ] + [(f"Sentence {i}.", f"Phrase {i}.") for i in range(40)]
    splits = split_pairs(pairs, num_valid=3, num_test=3, seed=0)
    split_of = {pair: name for name, kept in splits.items() for pair in kept}
    assert len(split_of) == len(pairs)
    assert split_of[pairs[0]] == split_of[pairs[1]] == split_of[pairs[2]]
    assert split_of[pairs[5]] == split_of[pairs[6]]
    assert 3 <= len(splits["valid"]) <= 5 and 3 <= len(splits["test"]) <= 5
    shuffled = pairs[:]
    random.Random(1).shuffle(shuffled)
    again = split_pairs(shuffled, num_valid=3, num_test=3, seed=0)
    assert {n: sorted(p) for n, p in again.items()} == {n: sorted(p) for n, p in splits.items()}  # order-free
    other_seed = split_pairs(pairs, num_valid=3, num_test=3, seed=1)
    assert sorted(other_seed["test"]) != sorted(splits["test"])


def test_split_pairs_refuses_bad_sizes_and_pairs():
    pairs = [("a", "b"), ("c", "d")]
    with pytest.raises(ValueError, match="leaves nothing to train on: there are 2 pairs"):
        split_pairs(pairs, num_valid=1, num_test=1)
    with pytest.raises(ValueError, match="num_test must be a whole number >= 0, got -1"):
        split_pairs(pairs, num_test=-1)
    with pytest.raises(TypeError, match="pairs of str, got an element 'ab'"):
        split_pairs(["ab", "cd"], num_valid=0, num_test=0)


def test_corpus_direction_and_length_filter(corpus):
    short = TatoebaCorpus(max_words=5, direction="fr-en")
    assert all(len(en.split()) <= 5 for _, en in short.train_pairs + short.test_pairs)
    english_test = {en for en, _ in corpus.test_pairs}
    assert {en for _, en in short.test_pairs} <= english_test  # the same held-out groups, fewer pairs
    assert "CC-BY 2.0" in repr(short)
    with pytest.raises(ValueError, match="direction must be one of"):
        TatoebaCorpus(direction="en-de")
    with pytest.raises(ValueError, match="max_words must be a whole number >= 1, got 0"):
        TatoebaCorpus(max_words=0)
