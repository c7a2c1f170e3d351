"""The GPU translation recipe (``train --device cuda``) and ``--ship`` for any budget, on the CPU:
its config builds, it trains a few steps in bfloat16 autocast and writes its curve; a run shorter
than its first eval minute still ships."""

import copy
import json

import pytest
import torch

from transformer_lib.applications import translation
from transformer_lib.training.translation_corpus import TatoebaCorpus

pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def corpus() -> TatoebaCorpus:
    small = copy.copy(TatoebaCorpus())
    small.train_pairs = small.train_pairs[::400]
    small.valid_pairs, small.test_pairs = small.valid_pairs[:20], small.test_pairs[:20]
    return small


def test_the_cuda_recipe_is_a_mid_size_pre_ln_bf16_model_of_its_stated_size():
    recipe = translation.CUDA_RECIPE
    assert recipe.precision == "bf16" and recipe.norm_first and recipe.minutes == 5.0
    assert {0.5, 1.0, 2.0, 5.0} <= set(recipe.eval_minutes)
    model = translation.Transformer(translation.model_config(recipe, recipe.vocab_size))
    assert sum(p.numel() for p in model.parameters()) == 33_523_712  # "33.5M" in its comment
    assert model.config.norm_first
    assert recipe.peak_lr() == pytest.approx(1.02e-3, rel=1e-2)  # "a peak learning rate of 1e-3"
    # the CPU recipe and the shipped model are unchanged: post-LN, float32
    assert translation.CPU_RECIPE.precision == "fp32" and not translation.CPU_RECIPE.norm_first
    shipped = translation._read_recipe(translation.shipped_model_dir())
    assert shipped == translation.CPU_RECIPE.replace(minutes=shipped.minutes)


def test_device_and_name_pick_the_recipe():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert translation._recipe_for(cpu, None) == translation.CPU_RECIPE
    assert translation._recipe_for(cuda, None) == translation.CUDA_RECIPE
    small = translation._recipe_for(cpu, 0.5, "cuda_small", "fp32")
    assert small == translation.CUDA_SMALL_RECIPE.replace(minutes=0.5, precision="fp32")
    with pytest.raises(ValueError, match=r"recipe must be one of \('cpu', 'cuda'"):
        translation._recipe_for(cpu, None, "gpu")
    with pytest.raises(ValueError, match=r"precision must be one of \('bf16', 'fp16', 'fp32'\)"):
        translation.CUDA_RECIPE.replace(precision="half")


def test_the_cuda_recipe_trains_in_bf16_on_the_cpu_and_writes_its_curve(tmp_path, corpus):
    """The recipe as it is, but for its sizes (a CPU cannot run the real ones in seconds):
    bfloat16 autocast, pre-LN, the short warm-up; valid BLEU at its marks, then the average."""
    recipe = translation.CUDA_RECIPE.replace(
        d_model=32,
        num_heads=2,
        d_ff=64,
        num_layers=1,
        vocab_size=300,
        max_tokens=600,
        warmup=5,
        minutes=0.04,
        eval_minutes=(0.01, 0.02, 0.03, 0.04),
        average_last=2,
        valid_pairs=20,
    )
    folder = tmp_path / "run"
    trainer = translation.train(folder, recipe, corpus=corpus, progress=False)
    assert trainer.precision == "bf16" and trainer.autocast_dtype == torch.bfloat16
    log = json.loads((folder / "training_log.json").read_text())
    assert [p["minutes"] for p in log["curve"]] == [0.01, 0.02, 0.03, 0.04]
    assert all(0 <= p["valid_bleu"] <= 100 for p in log["curve"])
    assert log["averaged"]["minutes"] == [0.03, 0.04]
    assert json.loads((folder / "recipe.json").read_text())["precision"] == "bf16"
    assert torch.load(folder / "checkpoint.pt", weights_only=True)["precision"] == "bf16"
    assert trainer.history.loss[-1] < trainer.history.loss[0]


def test_ship_works_for_a_budget_shorter_than_the_first_eval_minute(tmp_path, corpus):
    """``train --minutes 0.1 --ship DIR`` with the CPU recipe (first mark at 3 minutes) crashed with
    an IndexError on the empty curve."""
    recipe = translation.TINY_RECIPE.replace(minutes=0.01, eval_minutes=(3.0,), average_last=0)
    folder = tmp_path / "run"
    trainer = translation.train(folder, recipe, corpus=corpus, progress=False)
    assert json.loads((folder / "training_log.json").read_text())["curve"] == []
    shipped = translation.save_shipped_model(folder, tmp_path / "shipped")
    assert torch.load(shipped / "weights.pt", weights_only=True)["step"] == trainer.step > 0
    model, vocab = translation.load_translator(shipped)
    assert len(translation.translate(model, vocab, ["I am happy."])) == 1


def test_the_command_line_ships_a_short_run(tmp_path, corpus, monkeypatch, capsys):
    monkeypatch.setattr(translation, "TatoebaCorpus", lambda: corpus)
    monkeypatch.setitem(
        translation.RECIPES, "tiny", translation.TINY_RECIPE.replace(eval_minutes=(3.0,))
    )
    argv = ["train", "--folder", str(tmp_path / "run"), "--recipe", "tiny", "--minutes", "0.01"]
    assert translation.main([*argv, "--ship", str(tmp_path / "out")]) == 0
    assert "shipped to" in capsys.readouterr().out
    assert (tmp_path / "out" / "weights.pt").is_file()
    bad = ["train", "--folder", str(tmp_path / "x"), "--recipe", "tiny", "--precision", "fp8"]
    assert translation.main(bad) == 2
    assert "precision must be one of" in capsys.readouterr().err


def test_batches_read_each_pairs_ids_once_and_are_unchanged(corpus):
    from transformer_lib.training.length_batching import LengthBatches

    vocab = translation.build_vocab(corpus.train_pairs, 300)
    plain = LengthBatches(corpus.train_pairs, vocab, 600)
    cached = LengthBatches(corpus.train_pairs, translation._EncodedOnce(vocab), 600)
    for step in range(5):
        a, b = plain.batch(step), cached.batch(step)
        for name in ("src", "tgt_in", "tgt_out", "src_mask", "tgt_mask"):
            assert torch.equal(getattr(a, name), getattr(b, name))
    assert cached.vocab.encode("an unseen sentence", bos=True) == vocab.encode(
        "an unseen sentence", bos=True
    )
