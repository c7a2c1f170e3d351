import datetime

import pytest
import torch

import transformer_lib as tl


def test_vocab_round_trip_and_specials():
    vocab = tl.Vocab("abc")
    assert vocab.itos[:4] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    ids = vocab.encode("cab", bos=True, eos=True)
    assert ids[0] == vocab.bos_id and ids[-1] == vocab.eos_id
    assert vocab.decode(ids + [vocab.pad_id, 5]) == "cab"  # stops at <eos>
    assert vocab.encode("z") == [vocab.unk_id]


def test_make_batch_pads_shifts_and_masks():
    vocab = tl.Vocab("abcd")
    batch = tl.make_batch([("abc", "cba"), ("a", "a")], vocab)
    assert (
        batch.src.shape == (2, 3) and batch.tgt_in.shape == (2, 4) and batch.tgt_out.shape == (2, 4)
    )
    assert batch.tgt_in[0, 0] == vocab.bos_id and batch.tgt_out[0, -1] == vocab.eos_id
    # teacher forcing: shifted by one
    assert torch.equal(batch.tgt_in[:, 1:], batch.tgt_out[:, :-1])
    assert batch.src_mask[1, 0, 0].tolist() == [True, False, False]
    assert batch.tgt_mask.shape == (2, 1, 4, 4)
    # row 1 reads <bos> a <eos> <pad>: causal, and no query looks at the padding
    assert batch.tgt_mask[1, 0].tolist() == [
        [True, False, False, False],
        [True, True, False, False],
        [True, True, True, False],
        [True, True, True, False],
    ]
    assert batch.num_target_tokens == 4 + 2


def test_copy_and_reverse_tasks():
    copy, reverse = tl.CopyTask(seed=1), tl.CopyTask(reverse=True, seed=1)
    for (s, t), (s2, t2) in zip(copy.train_pairs(0, 20), reverse.train_pairs(0, 20), strict=True):
        assert s == t and s2 == s and t2 == s[::-1] and 3 <= len(s) <= 10


def test_training_batches_are_a_function_of_seed_and_step():
    task = tl.DateTask()
    assert task.train_pairs(7, 5) == tl.DateTask().train_pairs(7, 5)
    assert task.train_pairs(7, 5) != task.train_pairs(8, 5)


def test_date_formats_are_many_and_distinct():
    day = datetime.date(1987, 3, 3)
    written = [f(day) for f in tl.DATE_FORMATS.values()]
    assert len(set(written)) == len(written) >= 10
    assert {"tuesday, 3 march 1987", "03/03/87", "3 MAR 1987", "march 3rd, 1987"} <= set(written)


def test_date_targets_are_iso():
    task = tl.DateTask(num_test=50)
    for source, target in task.test_pairs + task.train_pairs(0, 50):
        assert datetime.date.fromisoformat(target).isoformat() == target
        assert source != target


def test_held_out_dates_never_appear_in_training_in_any_format():
    task = tl.DateTask(num_test=1000)
    held_out = {d.isoformat() for d in task.test_dates}
    assert len(held_out) == 1000 == len(task.test_pairs)
    assert held_out.isdisjoint(d.isoformat() for d in task.train_dates)
    for step in range(50):
        assert held_out.isdisjoint(target for _, target in task.train_pairs(step, 64))
    every_training_text = {f(d) for d in task.train_dates for f in tl.DATE_FORMATS.values()}
    assert every_training_text.isdisjoint(source for source, _ in task.test_pairs)


def test_every_date_character_is_in_the_vocabulary():
    task = tl.DateTask(num_test=10)
    for source, target in task.train_pairs(0, 500):
        assert task.vocab.unk_id not in task.vocab.encode(source + target)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (0, "num_test must be >= 1, got num_test=0"),
        (10**6, "must be below the 36525 days of 1950-2049"),
    ],
)
def test_date_task_rejects_impossible_split(bad, message):
    with pytest.raises(ValueError, match=message):
        tl.DateTask(num_test=bad)


TASKS = {
    "copy": lambda: tl.CopyTask(),
    "reverse": lambda: tl.CopyTask(reverse=True, seed=3),
    "copy, few strings": lambda: tl.CopyTask(
        num_test=8, num_valid=8, min_len=1, max_len=3, alphabet="abc"
    ),
    "date": lambda: tl.DateTask(num_test=300, num_valid=200, first_year=1990, last_year=1999),
}


@pytest.mark.parametrize("name", TASKS)
def test_held_out_splits_are_disjoint_from_training_and_each_other(name):
    task = TASKS[name]()
    test_sources = {s for s, _ in task.test_pairs}
    valid_sources = {s for s, _ in task.valid_pairs}
    assert test_sources and valid_sources and test_sources.isdisjoint(valid_sources)
    # a date is held out in every format: compare the dates themselves
    if isinstance(task, tl.DateTask):
        test_sources = {t for _, t in task.test_pairs}
        valid_sources = {t for _, t in task.valid_pairs}
        assert test_sources.isdisjoint(valid_sources)
        trained = {t for step in range(100) for _, t in task.train_pairs(step, 64)}
    else:
        trained = {s for step in range(100) for s, _ in task.train_pairs(step, 64)}
    assert trained.isdisjoint(test_sources) and trained.isdisjoint(valid_sources)


def test_copy_task_held_out_strings_are_distinct_and_short_ones_are_never_trained():
    task = tl.CopyTask()
    sources = [s for s, _ in task.test_pairs + task.valid_pairs]
    assert len(sources) == len(set(sources)) == 1000
    short_held_out = {s for s in sources if len(s) == 3}
    assert short_held_out  # some three-letter strings are held out (the ones that used to leak) ...
    trained = {s for step in range(200) for s, _ in task.train_pairs(step, 64)}
    assert short_held_out.isdisjoint(trained)  # ... and training never draws them


def test_vocab_with_a_non_zero_pad_id():
    vocab = tl.Vocab("abc", pad_id=5)
    assert vocab.itos[5] == "<pad>" and vocab.pad_id == 5 and len(vocab) == 7
    assert {vocab.bos_id, vocab.eos_id, vocab.unk_id, vocab.pad_id} == {0, 1, 2, 5}
    assert vocab.decode(vocab.encode("cab", bos=True) + [5, vocab.eos_id]) == "cab"
    batch = tl.make_batch([("abc", "ab"), ("a", "a")], vocab)
    assert batch.pad_id == 5 and batch.src[1, 1:].tolist() == [5, 5]
    assert batch.num_target_tokens == 3 + 2
    assert batch.to("cpu").pad_id == 5
