"""The real-language data of notebook 12: the shipped Tatoeba pairs and their splits, BPE by hand
and at scale, and batches by length within a token budget."""

import gzip
import hashlib
import json
import random
from collections import Counter

import pytest
import torch

import transformer_lib as tl
from transformer_lib.training import translation_corpus
from transformer_lib.training.length_batching import LengthBatches
from transformer_lib.training.subwords import Merge, SubwordVocab, learn_bpe, segment
from transformer_lib.training.translation_corpus import (
    TatoebaCorpus,
    normalise_text,
    sentence_key,
    split_pairs,
)

DATA_DIR = translation_corpus.shipped_pairs_path().parent

# What every machine must hold out: the SHA-256 of the valid then test pairs of the default corpus,
# one "English<TAB>French" line each, in order. A change here changes what the course's BLEU is
# measured on.
HELD_OUT_SHA256 = "3b56ddd15e0485bcc7f67df5ef0c18fc5733907f85f17c11c278214e18257292"


@pytest.fixture(scope="module")
def corpus() -> TatoebaCorpus:
    return TatoebaCorpus()


@pytest.fixture(scope="module")
def vocab(corpus) -> SubwordVocab:
    """A small vocabulary from the first 20,000 training pairs (the notebook trains 8000 tokens on
    all)."""
    pytest.importorskip("tokenizers")
    return SubwordVocab.train(
        [text for pair in corpus.train_pairs[:20_000] for text in pair], vocab_size=1000
    )


# -- the shipped file ------------------------------------------------------------------------------


def test_shipped_pairs_carry_their_licence_size_and_checksum():
    packed = (DATA_DIR / "pairs.tsv.gz").read_bytes()
    text = gzip.decompress(packed)
    licence = (DATA_DIR / "LICENSE.md").read_text(encoding="utf-8")
    readme = (DATA_DIR / "README.md").read_text(encoding="utf-8")
    for document in (licence, readme):
        assert (
            translation_corpus.ATTRIBUTION in document
            and translation_corpus.LICENCE_URL in document
        )
    assert f"{len(packed):,} bytes" in readme  # the README states the size of the file next to it
    assert hashlib.sha256(text).hexdigest() == translation_corpus.SHIPPED_TEXT_SHA256
    assert translation_corpus.SHIPPED_TEXT_SHA256 in readme
    assert len(packed) < 4_000_000  # a course repository, not a data set host
    course_readme = (DATA_DIR.parents[2] / "README.md").read_text(encoding="utf-8")
    assert (
        translation_corpus.ATTRIBUTION in course_readme
        and translation_corpus.LICENCE_URL in course_readme
    )
    assert f"{len(text.splitlines()):,} pairs" in course_readme
    assert f"{len(packed) / 1e6:.1f} MB gzipped" in course_readme


def test_read_pairs_gives_normalised_pairs_of_at_most_15_english_words():
    pairs = translation_corpus.read_pairs()
    assert len(pairs) == 166_149
    assert pairs[:2] == [
        ("Go.", "Va !"),
        ("Hi.", "Salut !"),
    ]  # the narrow no-break space became a plain one
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


# -- splits ----------------------------------------------------------------------------------------


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
    assert (
        max(several.values()) >= 3
    )  # there are such groups in the test split, and they stayed whole


def test_split_is_the_same_on_every_machine(corpus):
    held_out = "".join(f"{en}\t{fr}\n" for en, fr in corpus.valid_pairs + corpus.test_pairs)
    assert hashlib.sha256(held_out.encode()).hexdigest() == HELD_OUT_SHA256


def test_split_pairs_keeps_groups_whole_by_english_and_by_french():
    pairs = [
        ("I'm fine.", "Je vais bien."),
        ("I'm fine!", "Ça va."),  # the same English sentence (case and punctuation ignored)
        (
            "I'm OK.",
            "Je vais bien.",
        ),  # the same French sentence as the first pair: one group of three
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
    assert {n: sorted(p) for n, p in again.items()} == {
        n: sorted(p) for n, p in splits.items()
    }  # order-free
    other_seed = split_pairs(pairs, num_valid=3, num_test=3, seed=1)
    assert sorted(other_seed["test"]) != sorted(splits["test"])


def test_split_pairs_refuses_bad_sizes_and_pairs():
    pairs = [("a", "b"), ("c", "d")]
    with pytest.raises(ValueError, match="leaves nothing to train on: there are 2 pairs"):
        split_pairs(pairs, num_valid=1, num_test=1)
    with pytest.raises(ValueError, match="num_test must be >= 0, got num_test=-1"):
        split_pairs(pairs, num_test=-1)
    with pytest.raises(TypeError, match="pairs of str, got an element 'ab'"):
        split_pairs(["ab", "cd"], num_valid=0, num_test=0)


def test_corpus_direction_and_length_filter(corpus):
    short = TatoebaCorpus(max_words=5, direction="fr-en")
    assert all(len(en.split()) <= 5 for _, en in short.train_pairs + short.test_pairs)
    english_test = {en for en, _ in corpus.test_pairs}
    assert {
        en for _, en in short.test_pairs
    } <= english_test  # the same held-out groups, fewer pairs
    assert "CC-BY 2.0" in repr(short)
    with pytest.raises(ValueError, match="direction must be one of"):
        TatoebaCorpus(direction="en-de")
    with pytest.raises(ValueError, match="max_words must be >= 1, got max_words=0"):
        TatoebaCorpus(max_words=0)


# -- BPE by hand -----------------------------------------------------------------------------------


def test_learn_bpe_on_a_worked_example():
    # low x5, lower x2, newest x6, widest x3 (Sennrich et al.'s words). Pair counts, by hand:
    #   e s: 6 + 3 = 9, s t: 9, l o: 5 + 2 = 7, o w: 7, n e: 6, e w: 6 + 0, w e: 2, e r: 2,
    #   w i, i d, d e: 3
    # 1. e s (9) beats s t (9) on the tie: 'e' is older than 's' (alphabet order).
    # 2. es t (9): newest = n e w es t, widest = w i d es t.
    # 3. l o (7) beats o w (7): 'l' before 'o'.   4. lo w (7).
    # 5. now e w (6), n e (6) and w est (6) tie: 'e' is the oldest left symbol.
    words = ["low"] * 5 + ["lower"] * 2 + ["newest"] * 6 + ["widest"] * 3
    merges = learn_bpe(words, 5)
    assert merges == [
        Merge("e", "s", 9),
        Merge("es", "t", 9),
        Merge("l", "o", 7),
        Merge("lo", "w", 7),
        Merge("e", "w", 6),
    ]
    assert learn_bpe(Counter(words), 5) == merges  # a {word: count} dict is the same corpus
    assert segment("lowest", merges) == ["low", "est"]  # never seen, spelled with pieces that were
    assert segment("newer", merges) == ["n", "ew", "e", "r"]
    assert len(learn_bpe(["ab", "ab"], 10)) == 1  # stops once every word is one symbol


def _hugging_face_merges(words: list[str], num_merges: int) -> list[tuple[str, str]]:
    tokenizers = pytest.importorskip("tokenizers")
    tokenizer = tokenizers.Tokenizer(tokenizers.models.BPE())
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    alphabet = {ch for word in words for ch in word}
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=len(alphabet) + num_merges, show_progress=False
    )
    tokenizer.train_from_iterator([" ".join(words)], trainer)
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    return [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in merges]


@pytest.mark.parametrize("seed", range(20))
def test_learn_bpe_learns_what_the_library_learns_at_scale(seed):
    rng = random.Random(seed)  # few letters and short words: many ties, and runs like "aaa"
    words = [
        "".join(rng.choice("abcd") for _ in range(rng.randint(1, 7)))
        for _ in range(rng.randint(5, 40))
    ]
    ours = [(m.left, m.right) for m in learn_bpe(words, 12)]
    assert ours == _hugging_face_merges(words, 12)


def test_learn_bpe_refuses_bad_input():
    with pytest.raises(TypeError, match="got one str; split it"):
        learn_bpe("low lower", 3)
    with pytest.raises(ValueError, match="num_merges must be >= 0, got num_merges=-1"):
        learn_bpe(["low"], -1)
    with pytest.raises(ValueError, match="non-empty str, got ''"):
        learn_bpe(["low", ""], 3)
    with pytest.raises(
        ValueError, match="the count of 'low' must be >= 1, got the count of 'low'=0"
    ):
        learn_bpe({"low": 0}, 3)


# -- BPE at scale ----------------------------------------------------------------------------------


def test_subword_vocab_has_the_course_special_ids(vocab):
    char_vocab = tl.Vocab("abc")
    for name in ("pad_id", "bos_id", "eos_id", "unk_id"):
        assert getattr(vocab, name) == getattr(char_vocab, name)
    assert vocab.itos[:4] == char_vocab.itos[:4] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert len(vocab) == 1000


def test_subword_vocab_round_trips_held_out_and_unseen_text(vocab, corpus):
    for en, fr in corpus.test_pairs[::10]:
        for text in (en, fr):
            ids = vocab.encode(text, bos=True, eos=True)
            assert vocab.unk_id not in ids and vocab.decode(ids) == text
    for text in (
        "",
        "中文 и русский 😀",
        "مرحبا",
        "  spaces  kept ",
        "Tom a dit : « <eos> <pad> ! »",
    ):
        ids = vocab.encode(text)
        assert vocab.decode(ids + [vocab.eos_id, 9]) == text  # decoding stops at <eos>
        assert not set(ids) & {vocab.pad_id, vocab.bos_id, vocab.eos_id, vocab.unk_id}
    assert vocab.encode("") == [] and vocab.encode("", bos=True, eos=True) == [
        vocab.bos_id,
        vocab.eos_id,
    ]
    assert (
        vocab.decode(vocab.encode("e\u0301te\u0301")) == "été"
    )  # NFC: typed decomposed, comes back composed
    pieces = vocab.pieces("Je suis content.")
    assert "".join(pieces) == "Je suis content." and len(pieces) < len("Je suis content.")
    assert vocab.pieces("中")[0] == "<0xE4>"  # a piece holding part of a character shows its bytes


def test_subword_vocab_training_is_deterministic_and_saves_to_json(vocab, corpus, tmp_path):
    texts = [text for pair in corpus.train_pairs[:20_000] for text in pair]
    again = SubwordVocab.train(texts, vocab_size=1000)
    assert again.tokenizer.to_str() == vocab.tokenizer.to_str()
    path = vocab.save(tmp_path / "bpe.json")
    assert json.loads(path.read_text(encoding="utf-8"))["model"]["type"] == "BPE"
    loaded = SubwordVocab.load(path)
    sentence = corpus.valid_pairs[0][1]
    assert loaded.encode(sentence) == vocab.encode(sentence) and len(loaded) == len(vocab)
    left, right = vocab.merges()[
        0
    ]  # the first merge learned, as text: its two sides are one token now
    assert vocab.pieces(left + right) == [left + right]


def test_subword_vocab_refuses_bad_input(vocab, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    with pytest.raises(ValueError, match=r"vocab_size must be >= 261 .* got vocab_size=100"):
        SubwordVocab.train(["hello"], vocab_size=100)
    with pytest.raises(TypeError, match="got one str; wrap it"):
        SubwordVocab.train("hello world", vocab_size=300)
    with pytest.raises(ValueError, match="at least one non-empty sentence"):
        SubwordVocab.train(["", ""], vocab_size=300)
    with pytest.raises(TypeError, match="encode takes a str, got int"):
        vocab.encode(5)
    with pytest.raises(ValueError, match=r"id must lie in \[0, 1000\), got id=1000"):
        vocab.decode([5, 1000])
    with pytest.raises(
        ValueError, match=r"takes one sequence \(T,\), got a tensor of shape \(2, 3\)"
    ):
        vocab.decode(torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(FileNotFoundError, match="no tokenizer file"):
        SubwordVocab.load(tmp_path / "missing.json")
    word_level = tokenizers.Tokenizer(tokenizers.models.WordLevel({"<pad>": 0}, unk_token="<pad>"))
    with pytest.raises(
        ValueError, match="needs a byte-level BPE tokenizer .* got a WordLevel model"
    ):
        SubwordVocab(word_level)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="not a tokenizers JSON file"):
        SubwordVocab.load(broken)


def test_the_library_translates_with_a_subword_vocab_unchanged(vocab, corpus):
    """make_batch, the Transformer, its loss and greedy decoding take a SubwordVocab as they take a
    Vocab."""
    torch.manual_seed(0)
    pairs = corpus.train_pairs[1000:1004] + [
        ("", "Rien."),
        ("中文 и 😀", "Des écritures mêlées."),
    ]  # bad inputs too
    batch = tl.make_batch(pairs, vocab)
    assert not batch.src_mask[4].any()  # the empty source: nothing to attend to, zero weights
    model = tl.Transformer(tl.TransformerConfig.cpu_tiny(len(vocab)))
    logits = model(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_mask)  # (B, T, V)
    assert logits.shape == (*batch.tgt_out.shape, len(vocab)) and torch.isfinite(logits).all()
    out = tl.greedy_decode(
        model, batch.src, max_len=5, bos_id=vocab.bos_id, eos_id=vocab.eos_id
    )  # (B, <= 5)
    assert all(isinstance(vocab.decode(row), str) for row in out)


# -- batches by length -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def batches(corpus, vocab) -> LengthBatches:
    return LengthBatches(corpus.train_pairs[::8], vocab, max_tokens=1500, seed=0)


def test_every_pair_once_per_epoch_and_no_batch_over_budget(batches):
    for epoch in (0, 1):
        seen = Counter(i for indices in batches.plan(epoch) for i in indices)
        assert sorted(seen) == list(range(len(batches))) and set(seen.values()) == {1}
    padded = real = 0
    for batch in batches.epoch(0):
        cost = batch.src.numel() + batch.tgt_in.numel()  # (B, S) + (B, T): padding included
        assert cost <= batches.max_tokens
        real += (
            int((batch.src != batch.pad_id).sum()) + batch.num_target_tokens
        )  # tokens, <bos> or <eos> each
        padded += cost
    assert 1 - real / padded == pytest.approx(batches.padding_fraction(0))
    assert batches.padding_fraction(0) < 0.05  # similar lengths together: little padding


def test_unsorted_batches_keep_the_budget_and_pad_far_more(batches, corpus, vocab):
    """by_length=False, notebook 12's baseline: the same pairs and budget, batches filled in
    shuffled order."""
    unsorted = LengthBatches(
        corpus.train_pairs[::8], vocab, max_tokens=1500, seed=0, by_length=False
    )
    seen = Counter(i for indices in unsorted.plan(0) for i in indices)
    assert sorted(seen) == list(range(len(unsorted))) and set(seen.values()) == {1}
    assert all(batch.src.numel() + batch.tgt_in.numel() <= 1500 for batch in unsorted.epoch(0))
    assert unsorted.padding_fraction(0) > 5 * batches.padding_fraction(0)
    assert "not sorted by length" in repr(unsorted)
    with pytest.raises(TypeError, match="by_length must be True or False, got 'no'"):
        LengthBatches(corpus.train_pairs[:5], vocab, max_tokens=1500, by_length="no")


def test_epochs_are_shuffled_with_the_seed(batches, corpus, vocab):
    assert batches.plan(0) != batches.plan(1)
    first_lengths = [len(indices) for indices in batches.plan(0)[:20]]
    assert len(set(first_lengths)) > 1  # batch order is shuffled, not short sentences first
    few = corpus.train_pairs[::50]
    plans = [LengthBatches(few, vocab, max_tokens=1500, seed=seed).plan(1) for seed in (0, 0, 1)]
    assert (
        plans[0] == plans[1] and plans[0] != plans[2]
    )  # the same seed, the same plan; another, another


def test_trainer_consumes_length_batches_across_epochs(batches, vocab):
    first_of_epoch_1 = batches.num_batches(0)
    assert batches.locate(first_of_epoch_1) == (1, 0)
    assert torch.equal(batches(first_of_epoch_1).src, batches.make(batches.plan(1)[0]).src)
    torch.manual_seed(0)
    model = tl.Transformer(tl.TransformerConfig.cpu_tiny(len(vocab)))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    trainer = tl.Trainer(model, optimizer)
    trainer.fit(batches, num_steps=3, progress=False)
    assert trainer.step == 3 and len(trainer.history.loss) == 3


def test_length_batches_work_with_a_character_vocab_and_refuse_what_cannot_fit(vocab):
    task = tl.DateTask(num_test=10, num_valid=10)
    pairs = task.train_pairs(0, 200)
    char_batches = LengthBatches(pairs, task.vocab, max_tokens=300)
    assert sum(len(b) for b in char_batches.plan(0)) == 200
    long_pair = ("word " * 40, "mot " * 40)
    with pytest.raises(
        ValueError, match=r"do not fit in a batch of max_tokens=20 even alone.*raise max_tokens"
    ):
        LengthBatches([("Hi.", "Salut !"), long_pair], vocab, max_tokens=20)
    with pytest.raises(ValueError, match="max_tokens must be >= 1, got max_tokens=0"):
        LengthBatches([("Hi.", "Salut !")], vocab, max_tokens=0)
    with pytest.raises(ValueError, match="at least one"):
        LengthBatches([], vocab, max_tokens=100)
    with pytest.raises(TypeError, match="pairs, got an element 'Hi.'"):
        LengthBatches(["Hi."], vocab, max_tokens=100)
    with pytest.raises(ValueError, match="step must be >= 0, got step=-1"):
        char_batches(-1)
