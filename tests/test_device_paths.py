"""What Apple's ``mps`` lacks never reaches it: every library path that runs on the device
``tl.pick_device()`` gives (training, evaluation, decoding, generation, translation, the benchmarks,
the Table 3 runner) creates no float64 tensor and puts no CPU tensor beside a device tensor.

``mps`` has no float64: a float64 tensor moved there raises ("Cannot convert a MPS Tensor to float64
dtype"), and so does an op that would make one. The tests walk these paths on ``tl.pick_device()``
(the CPU here and in CI) under :class:`NoFloat64`, a dispatch mode that raises when any op receives
or produces a float64 (or complex128) tensor, so a CPU-only machine finds what a Mac would.
``torch.set_default_dtype`` would not do: it leaves explicit ``dtype=torch.float64``, ``.double()``
and tensors made from NumPy's float64 arrays alone. The other half, a CPU tensor beside a device
tensor, shows only where there is a second device (run these tests on a GPU or a Mac); on a CPU it
was checked by reading every tensor the library makes without ``device=`` (``masking_shares`` made
its special ids on the CPU; they now follow the tokens).
"""

from types import SimpleNamespace

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

import transformer_lib as tl
from transformer_lib import bench, lm
from transformer_lib import experiments as ex
from transformer_lib.applications import decode
from transformer_lib.training import train
from transformer_lib.training.data import StringProgramTask

FORBIDDEN = (torch.float64, torch.complex128)
# the device a learner's `tl.pick_device()` gives: the CPU here and in CI, cuda or mps where present
# (there the mixed-devices half is checked for real)
DEVICE = tl.pick_device()


class NoFloat64(TorchDispatchMode):
    """Raises on the first op that takes or makes a float64 (or complex128) tensor."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        for where, values in (("received", (args, kwargs)), ("produced", out)):
            for value in tree_flatten(values)[0]:
                if isinstance(value, torch.Tensor) and value.dtype in FORBIDDEN:
                    raise AssertionError(
                        f"{func} {where} a {value.dtype} tensor: mps has no float64"
                    )
        return out


def test_the_guard_catches_every_way_to_make_float64():
    import numpy as np

    makers = [
        lambda: torch.zeros(2, dtype=torch.float64),
        lambda: torch.ones(2).double(),
        lambda: torch.ones(2).to(torch.float64),
        lambda: torch.tensor(np.array([0.5, 1.5])) + 1,  # NumPy's float64 comes along
        lambda: torch.arange(3, dtype=torch.float64),
    ]
    for make in makers:
        with pytest.raises(AssertionError, match="float64"), NoFloat64():
            make()
    with NoFloat64():  # float32, integers, Python floats: allowed
        (torch.ones(2) * 0.5 + torch.arange(2)).sum().item()


@pytest.fixture(scope="module")
def dates():
    tl.seed_everything(0)
    return tl.DateTask(num_test=8, num_valid=8)


def test_seq2seq_training_evaluation_and_every_decoder(dates):
    with NoFloat64():
        trainer = tl.train_task(
            dates,
            tl.TransformerConfig.cpu_tiny(len(dates.vocab)),
            steps=3,
            batch_size=8,
            warmup=2,
            progress=False,
            device=DEVICE,
        )
        model = trainer.model.eval()
        tl.exact_match(model, dates.test_pairs, dates.vocab, max_len=6)
        src = dates.train_batch(0, 3).src.to(DEVICE)  # (B, S)
        vocab = dates.vocab
        for use_cache in (True, False):
            decode.greedy_decode(model, src, 5, vocab.bos_id, vocab.eos_id, use_cache=use_cache)
        decode.sample_decode(
            model,
            src,
            5,
            vocab.bos_id,
            vocab.eos_id,
            temperature=0.7,
            generator=torch.Generator(DEVICE).manual_seed(0),
            top_k=3,
            top_p=0.9,
        )
        decode.beam_search(model, src, 5, vocab.bos_id, vocab.eos_id, beam_width=3)


def test_language_models_train_generate_and_mask():
    config = lm.LMConfig.cpu_char(20)
    tl.seed_everything(0)
    tokens = torch.randint(1, 20, (4, 12), device=DEVICE)  # (B, T)
    with NoFloat64():
        model = lm.DecoderOnlyLM(config).to(DEVICE)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        trainer = lm.LanguageModelTrainer(model, optimizer, device=DEVICE)
        trainer.fit(lambda step: (tokens[:, :-1], tokens[:, 1:]), 2, progress=False)
        train.perplexity(model, [(tokens[:, :-1], tokens[:, 1:])])
        model.eval()
        chooser = decode.sampler(temperature=0.8, generator=torch.Generator(DEVICE).manual_seed(0))
        lm.generate(model, tokens[:1, :4], 6, choose=chooser)
        lm.generate(model, tokens[:1, :4], 6, use_cache=False)

        masked = lm.MaskedLM(lm.LMConfig.cpu_char_masked(20)).to(DEVICE)
        inputs, targets = lm.mask_tokens(tokens, 19, 20, special_ids=(0,))
        lm.language_model_loss(masked(inputs), targets).backward()
        lm.masking_shares(tokens, inputs, targets, 19, (0,))


def test_translation_with_the_shipped_model():
    from transformer_lib.applications import translation

    model, vocab = translation.load_translator(translation.shipped_model_dir(), device=DEVICE)
    with NoFloat64():
        translation.translate(model, vocab, ["I am happy.", "Where is the station?"])
        translation.translate(model, vocab, ["Tom likes cats."], beam_width=2)


def test_translation_training_for_a_moment(tmp_path):
    from transformer_lib.applications import translation

    pairs = [
        ("I am happy.", "Je suis heureux."),
        ("Where is the station?", "Où est la gare ?"),
        ("Tom likes cats.", "Tom aime les chats."),
        ("It is cold.", "Il fait froid."),
    ]
    corpus = SimpleNamespace(train_pairs=pairs * 4, valid_pairs=pairs[:2], test_pairs=pairs[2:])
    recipe = translation.TINY_RECIPE.replace(minutes=0.005, eval_minutes=(0.005,), valid_pairs=2)
    with NoFloat64():
        translation.train(tmp_path, recipe, corpus=corpus, progress=False)


def test_the_benchmarks_and_mixed_precision_on_the_device():
    with NoFloat64():
        bench.compare_attention(
            batch=2, length=8, d_model=16, num_heads=2, device=DEVICE, repeats=1
        )
        bench.attention_growth((8, 16), batch=1, d_model=16, num_heads=2, device=DEVICE, repeats=1)
        bench.beam_search_speed(num_sources=2, max_len=3, device=DEVICE, repeats=1)
        small = lm.LMConfig.llama_like(50, d_model=16, num_heads=4, d_ff=32, num_layers=1)
        bench.grouped_query_decoding(
            (4, 1), prompt_len=4, new_tokens=3, batch=1, config=small, device=DEVICE, repeats=1
        )
        # notebook 09's training step under autocast (bfloat16 on the CPU, float16 on a GPU)
        model = tl.Transformer(tl.TransformerConfig.cpu_tiny(12)).to(DEVICE)
        src = torch.randint(1, 12, (2, 5), device=DEVICE)  # (B, S)
        with torch.autocast(
            DEVICE.type, dtype=torch.bfloat16 if DEVICE.type == "cpu" else torch.float16
        ):
            logits = model(src, src)  # (B, T, V)
        logits.float().mean().backward()


def test_the_table3_runner_on_the_device():
    grid = ex.Grid(
        "micro",
        base=dict(d_model=16, num_heads=2, d_ff=32, num_layers=1, dropout=0.0, eps_ls=0.1),
        rows=(ex.Row("base", "base"),),
        seeds=(0,),
        steps=2,
        batch_size=4,
        warmup=1,
    )
    task = StringProgramTask(num_test=1, num_valid=8, num_gen=8)
    with NoFloat64():
        ex.run_one(grid, grid.rows[0], 0, task, device=DEVICE)
