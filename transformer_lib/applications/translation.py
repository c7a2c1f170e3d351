"""``python -m transformer_lib.applications.translation train|evaluate|translate``: English-French
on the Tatoeba pairs.

The recipe of notebook 12 as one command. ``train`` learns a joint BPE vocabulary on the training
split (saved as ``tokenizer.json`` next to the model), builds a
:class:`~transformer_lib.model.transformer.Transformer` from a :class:`TranslationRecipe`, and
trains it with the library's one :class:`~transformer_lib.training.train.Trainer` on
:class:`~transformer_lib.training.length_batching.LengthBatches` (batches by length within a token
budget, paper §5.1), label smoothing 0.1 and the paper's warm-up schedule (eq. 3), for a budget of
*training* minutes. It saves a resumable checkpoint as it goes (a second ``train`` with the same
folder continues from it) and scores greedy BLEU on the **valid** split at fixed training times, the
curve of the run. ``evaluate`` reads the **test** split, once: corpus BLEU (sacreBLEU, default 13a
tokenisation, on detokenised output) and chrF, for greedy decoding, beam search (W=4, length penalty
0.6, paper §6.1) and the copy-the-source baseline. ``translate`` translates sentences given as
arguments, or one per line on stdin.

``--device cuda`` picks :data:`CUDA_RECIPE` (a mid-size pre-LN model, batches of 24,000 tokens,
bfloat16 autocast, a short warm-up, five minutes); ``--recipe`` picks any of :data:`RECIPES`.
"""

import argparse
import copy
import dataclasses
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm

from .._arguments import (
    check_choice,
    check_non_negative_ints,
    check_positive_ints,
    check_positive_real,
    check_probability,
)
from .._package_data import package_data
from ..model.transformer import Transformer, TransformerConfig
from ..training.length_batching import LengthBatches
from ..training.runtime import pick_device
from ..training.subwords import SubwordVocab
from ..training.train import (
    PRECISIONS,
    Trainer,
    load_model_weights,
    make_trainer,
    paper_optimizer,
    read_checkpoint,
)
from ..training.translation_corpus import ATTRIBUTION, TatoebaCorpus, normalise_text
from .decode import beam_search, greedy_decode

__all__ = [
    "TranslationRecipe",
    "CPU_RECIPE",
    "CUDA_RECIPE",
    "CUDA_SMALL_RECIPE",
    "CUDA_BIG_RECIPE",
    "RECIPES",
    "TINY_RECIPE",
    "model_config",
    "build_vocab",
    "train",
    "load_translator",
    "translate",
    "corpus_bleu",
    "corpus_chrf",
    "score_split",
    "spread",
    "evaluate",
    "save_shipped_model",
    "shipped_model_dir",
    "main",
]

# Files of a model folder.
TOKENIZER_FILE = "tokenizer.json"
RECIPE_FILE = "recipe.json"
CHECKPOINT_FILE = "checkpoint.pt"  # the trainer's resumable state (weights, Adam moments, step)
AVERAGED_FILE = "weights_averaged.pt"  # the average of the last kept weights (recipe.average_last)
LOG_FILE = "training_log.json"  # training seconds, CPU seconds, the valid-BLEU curve
WEIGHTS_FILE = "weights.pt"  # the shipped model: weights only, float16
METRICS_FILE = "metrics.json"  # what `evaluate` measured; the shipped-model test recomputes it

# The paper's output length limit: "We set the maximum output length during inference to input
# length + 50" (§6.1). Counted in tokens.
EXTRA_OUTPUT_TOKENS = 50
# The fewest output tokens before <eos> (decode.py's min_len): a non-empty sentence never translates
# to "" (with 0, beam search returned "" for 18 of the 1,000 valid sentences at alpha = 0:
# results/empty_translations.csv).
MIN_OUTPUT_TOKENS = 1


@dataclass(frozen=True)
class TranslationRecipe:
    """Everything that decides a translation run: the model (a :class:`TransformerConfig`, its
    vocabulary sizes the BPE vocabulary's), the batches, the optimiser, the budget.

    The learning rate is the paper's schedule (:func:`~transformer_lib.training.train.noam_lr`):
    ``lr_factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)``; it needs no step count in
    advance, which suits a budget of minutes, and a resumed run continues it exactly.

    Fields:
        model: the model; ``recipe.d_model`` (any model field) and ``recipe.vocab_size`` read it.
        eps_ls: the loss's label smoothing.
        max_tokens: the token budget of one batch (source + target, padding included; the paper's
            is 50,000).
        warmup, lr_factor: the schedule's warm-up steps and factor.
        minutes: the training budget, wall-clock or CPU (:func:`train`'s ``clock``; evaluation not
            counted).
        eval_minutes: the training times at which valid BLEU is measured and the weights are kept.
        valid_pairs: how many valid pairs the periodic BLEU reads, spread over all lengths
            (:func:`spread`).
        seed: seeds the weights and the batch order.
        average_last: > 1 averages the weights kept at the last that many ``eval_minutes`` (paper
            §6.1); the average ships only where it scores higher valid BLEU than the final weights.
        precision: the :class:`~transformer_lib.training.train.Trainer`'s (``"fp32"``, or
            ``"bf16"``/``"fp16"`` autocast).
    """

    model: TransformerConfig
    eps_ls: float
    max_tokens: int
    warmup: int
    lr_factor: float
    minutes: float
    eval_minutes: tuple[float, ...]
    valid_pairs: int = 1000
    seed: int = 0
    average_last: int = 0
    precision: str = "fp32"

    def __post_init__(self):
        if not isinstance(self.model, TransformerConfig):
            raise TypeError(f"model must be a TransformerConfig, got {type(self.model).__name__}")
        check_positive_ints(max_tokens=self.max_tokens, warmup=self.warmup)
        check_probability(eps_ls=self.eps_ls)
        check_positive_real(minutes=self.minutes, lr_factor=self.lr_factor)
        object.__setattr__(self, "eval_minutes", tuple(sorted(float(m) for m in self.eval_minutes)))
        check_choice("precision", self.precision, tuple(sorted(PRECISIONS)))

    def __getattr__(self, name: str):
        """The model's fields read through the recipe: ``recipe.d_model`` is
        ``recipe.model.d_model``, ``recipe.vocab_size`` the shared vocabulary's size."""
        if name == "vocab_size":
            return self.model.src_vocab_size
        if name in _MODEL_FIELDS:
            return getattr(self.model, name)
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def replace(self, **changes) -> "TranslationRecipe":
        """A copy with some fields changed, the model's too:
        ``CPU_RECIPE.replace(minutes=5, d_model=256)``; ``vocab_size`` sets both vocabulary
        sizes."""
        sizes = {name: changes.pop(name) for name in list(changes) if name in _MODEL_FIELDS}
        if "vocab_size" in changes:
            sizes["src_vocab_size"] = sizes["tgt_vocab_size"] = changes.pop("vocab_size")
        model = changes.pop("model", self.model).replace(**sizes)
        return dataclasses.replace(self, model=model, **changes)

    def to_dict(self) -> dict:
        """The flat record ``recipe.json`` holds: ``vocab_size``, the model's other fields, then the
        recipe's."""
        model = {f.name: getattr(self.model, f.name) for f in dataclasses.fields(self.model)}
        del model["src_vocab_size"], model["tgt_vocab_size"]
        own = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "model"}
        return {
            "vocab_size": self.vocab_size,
            **model,
            **own,
            "eval_minutes": list(self.eval_minutes),
        }

    @classmethod
    def from_dict(cls, data: dict) -> "TranslationRecipe":
        """The recipe of a :meth:`to_dict` record; a model field it lacks (a folder written before
        that field existed) keeps :class:`TransformerConfig`'s default."""
        data = dict(data)
        vocab_size = data.pop("vocab_size")
        sizes = {name: data.pop(name) for name in list(data) if name in _MODEL_FIELDS}
        model = TransformerConfig(vocab_size, vocab_size, **sizes)
        return cls(model=model, **{**data, "eval_minutes": tuple(data["eval_minutes"])})

    def peak_lr(self) -> float:
        """The learning rate at the end of warm-up (the schedule's largest)."""
        return self.lr_factor * self.model.d_model**-0.5 * self.warmup**-0.5


# The model fields a recipe reads through and replaces (vocab_size aside).
_MODEL_FIELDS = frozenset(f.name for f in dataclasses.fields(TransformerConfig)) - {
    "src_vocab_size",
    "tgt_vocab_size",
}


# The CPU recipe: 15 minutes of training on one thread (``make translation-model``). Small on
# purpose, so that 15 minutes hold a few thousand updates: N=2, d_model=128, h=4, d_ff=512, one
# shared 4000-token BPE vocabulary tied to the output projection (1.4M parameters, 2.8 MB in
# float16), batches of <= 2500 tokens; the weights of its last 5 minutes are averaged.
CPU_RECIPE = TranslationRecipe(
    model=TransformerConfig(
        4000, 4000, d_model=128, num_heads=4, d_ff=512, num_layers=2, dropout=0.1, max_len=256
    ),
    eps_ls=0.1,
    max_tokens=2500,
    warmup=200,
    lr_factor=0.4,
    minutes=15.0,
    eval_minutes=(3.0, 6.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0),
    average_last=5,
)

# For a GPU (``--device cuda``): five minutes of training on one H100-class GPU. A mid-size model
# (N=4, d_model=512, h=8, d_ff=2048; 33.5M parameters with the 8000-token vocabulary) trained in
# bfloat16 autocast on batches of <= 24,000 tokens (about 1,200 pairs; the paper's were 50,000
# tokens of sentences five times longer). At this size a step is bound by the host launching some
# 1,500 kernels (tens of milliseconds), so a larger batch costs little time and brings more tokens
# per step. Pre-LN, so that a warm-up of 300 steps to a peak learning rate of 1e-3 (lr_factor 0.4:
# 0.4 * 512^-0.5 * 300^-0.5) is stable; the paper's post-LN base model needed its 4000 warm-up
# steps, which five minutes barely hold. Valid BLEU at 0.5, 1, 2, 3, 4, 4.5 and 5 minutes; the
# weights of the last four of those are averaged (paper §6.1). Its peak memory is logged
# (``peak_gpu_MiB`` in the training log).
CUDA_RECIPE = CPU_RECIPE.replace(
    vocab_size=8000,
    d_model=512,
    num_heads=8,
    d_ff=2048,
    num_layers=4,
    dropout=0.1,
    max_tokens=24_000,
    warmup=300,
    lr_factor=0.4,
    minutes=5.0,
    eval_minutes=(0.5, 1.0, 2.0, 3.0, 4.0, 4.5, 5.0),
    average_last=4,
    precision="bf16",
    norm_first=True,
)

# Two alternatives to CUDA_RECIPE at the same budget, to compare against it on a GPU: a smaller
# model (more steps per minute) and a deeper one with more dropout (the regularisation that
# small corpora such as this one, 164,000 pairs, usually want).
CUDA_SMALL_RECIPE = CUDA_RECIPE.replace(d_model=256, num_heads=4, d_ff=1024, num_layers=3)
CUDA_BIG_RECIPE = CUDA_RECIPE.replace(num_layers=6, dropout=0.3)

# For tests: trains in seconds on a few hundred pairs.
TINY_RECIPE = CPU_RECIPE.replace(
    vocab_size=300,
    d_model=32,
    num_heads=2,
    d_ff=64,
    num_layers=1,
    dropout=0.0,
    max_tokens=600,
    warmup=10,
    minutes=0.2,
    eval_minutes=(),
    average_last=0,
    max_len=128,
    valid_pairs=20,
)

# The recipes ``train --recipe NAME`` can pick; ``--device cuda`` alone picks "cuda", else "cpu".
RECIPES = {
    "cpu": CPU_RECIPE,
    "cuda": CUDA_RECIPE,
    "cuda_small": CUDA_SMALL_RECIPE,
    "cuda_big": CUDA_BIG_RECIPE,
    "tiny": TINY_RECIPE,
}


def model_config(recipe: TranslationRecipe, vocab_size: int, pad_id: int = 0) -> TransformerConfig:
    """The recipe's model for the vocabulary actually learned: ``vocab_size`` tokens on both sides,
    padded with ``pad_id`` (one shared vocabulary, embeddings tied: paper §3.4)."""
    return recipe.model.replace(src_vocab_size=vocab_size, tgt_vocab_size=vocab_size, pad_id=pad_id)


def build_vocab(pairs: Sequence[tuple[str, str]], vocab_size: int) -> SubwordVocab:
    """A joint BPE vocabulary learned on both sides of ``pairs`` (the training split only)."""
    return SubwordVocab.train([text for pair in pairs for text in pair], vocab_size)


# --------------------------------------------------------------------------------------------------
# Scores


def _check_parallel(hypotheses: Sequence[str], references: Sequence[str]) -> None:
    for name, texts in (("hypotheses", hypotheses), ("references", references)):
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise TypeError(
                f"{name} must be a list of str (one sentence each), got {type(texts).__name__}"
            )
    if len(hypotheses) != len(references):
        raise ValueError(
            f"expected one reference per hypothesis, got {len(hypotheses)} and {len(references)}"
        )
    if not hypotheses:
        raise ValueError("a corpus score needs at least one sentence")


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Corpus BLEU (0-100) of detokenised ``hypotheses`` against one reference each: sacreBLEU's
    defaults (13a tokenisation, exponential smoothing), the number papers report as "SacreBLEU"."""
    import sacrebleu

    _check_parallel(hypotheses, references)
    return sacrebleu.corpus_bleu(list(hypotheses), [list(references)]).score


def corpus_chrf(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Corpus chrF (0-100, sacreBLEU's defaults): F-score of character n-grams, kinder to near-miss
    words."""
    import sacrebleu

    _check_parallel(hypotheses, references)
    return sacrebleu.corpus_chrf(list(hypotheses), [list(references)]).score


# --------------------------------------------------------------------------------------------------
# Translating


def _encode_sentences(vocab: SubwordVocab, sentences: Sequence[str], positions: int) -> list:
    """The token ids of each sentence, normalised as the training text was; a TypeError for what is
    not a list of str, a ValueError naming a sentence longer than the model's ``positions``."""
    if isinstance(sentences, str):
        raise TypeError(
            "translate takes a list of sentences, got one str; wrap it: translate(model, vocab, "
            "[text])"
        )
    sentences = list(sentences)
    bad = [s for s in sentences if not isinstance(s, str)]
    if bad:  # (a None element must be reported too)
        raise TypeError(
            f"translate takes sentences (str), got an element {bad[0]!r} of type "
            f"{type(bad[0]).__name__}"
        )
    encoded = [vocab.encode(normalise_text(s)) for s in sentences]
    for index, ids in enumerate(encoded):
        if len(ids) > positions:
            raise ValueError(
                f"sentence {index} is {len(ids)} tokens long; this model reads at most "
                f"max_len={positions} tokens (it starts {sentences[index][:40]!r}): split it into "
                "shorter sentences"
            )
    return encoded


def _decode_rows(model, vocab, rows, beam_width, length_penalty, max_len, min_len) -> list:
    """The output ids of one batch of encoded sentences (shortest first), each cut to its own
    limit: ``max_len``, or its length + 50 tokens (paper §6.1), whatever else shared its batch."""
    src = torch.full((len(rows), len(rows[-1])), vocab.pad_id, dtype=torch.long)  # (B, S)
    for row, ids in enumerate(rows):
        src[row, : len(ids)] = torch.tensor(ids)
    src = src.to(next(model.parameters()).device)

    def limit(length: int) -> int:  # the decoder holds <bos> + the output: positions - 1 at most
        wanted = max_len if max_len is not None else length + EXTRA_OUTPUT_TOKENS
        return min(wanted, model.config.max_len - 1)

    ends = (vocab.bos_id, vocab.eos_id)
    longest = limit(len(rows[-1]))
    if beam_width is None:
        out = greedy_decode(model, src, longest, *ends, min_len=min_len)  # (B, <= longest)
    else:
        out = beam_search(model, src, longest, *ends, beam_width, length_penalty, min_len=min_len)
    return [out[row][: limit(len(ids))] for row, ids in enumerate(rows)]


def translate(
    model: Transformer,
    vocab: SubwordVocab,
    sentences: Sequence[str],
    beam_width: int | None = None,
    length_penalty: float = 0.6,
    max_len: int | None = None,
    batch_size: int = 100,
    min_len: int = MIN_OUTPUT_TOKENS,
) -> list[str]:
    """Translate ``sentences`` (a list of str) and return the detokenised translations, in order.

    ``beam_width=None`` decodes greedily; an int runs
    :func:`~transformer_lib.applications.decode.beam_search` with the GNMT ``length_penalty`` (0.6
    in the paper). ``max_len`` caps the output in tokens; by default it is the sentence's length +
    50 tokens (paper §6.1), never beyond the model's positions. ``min_len`` (1 by default) is the
    fewest output tokens before ``<eos>`` (see :mod:`~transformer_lib.applications.decode`): without
    it beam search returns an empty translation for some real sentences, whose ``<eos>``-first
    hypothesis outscores every longer one. Sentences are normalised as the
    training text was (:func:`~transformer_lib.training.translation_corpus.normalise_text`), sorted
    by length and decoded ``batch_size`` at a time (a batch's memory grows with its longest
    sentence).

    An empty (or all-space) sentence translates to ``""`` without running the model. Any character
    is accepted (byte-level BPE spells unseen ones with byte tokens). A sentence longer than the
    model's ``max_len`` tokens raises a ValueError that names it and its length.
    """
    for name, value in (("beam_width", beam_width), ("max_len", max_len)):
        if value is not None:  # None: greedy, and source length + 50
            check_positive_ints(**{name: value})
    check_positive_ints(batch_size=batch_size)
    check_non_negative_ints(min_len=min_len)
    encoded = _encode_sentences(vocab, sentences, model.config.max_len)
    outputs = [""] * len(encoded)
    order = sorted((i for i, ids in enumerate(encoded) if ids), key=lambda i: len(encoded[i]))
    model.eval()
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        rows = [encoded[i] for i in chunk]
        out = _decode_rows(model, vocab, rows, beam_width, length_penalty, max_len, min_len)
        for i, row_out in zip(chunk, out, strict=True):
            outputs[i] = vocab.decode(row_out)
    return outputs


def score_split(
    model: Transformer,
    vocab: SubwordVocab,
    pairs: Sequence[tuple[str, str]],
    beam_width: int | None = None,
    length_penalty: float = 0.6,
    batch_size: int = 100,
) -> dict[str, float]:
    """``{"bleu": ..., "chrf": ...}`` of the model's translations of ``pairs``' sources against
    their targets."""
    hypotheses = translate(
        model, vocab, [s for s, _ in pairs], beam_width, length_penalty, batch_size=batch_size
    )
    references = [t for _, t in pairs]
    return {
        "bleu": corpus_bleu(hypotheses, references),
        "chrf": corpus_chrf(hypotheses, references),
    }


# --------------------------------------------------------------------------------------------------
# Training


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _read_recipe(folder: Path) -> TranslationRecipe:
    return TranslationRecipe.from_dict(json.loads((folder / RECIPE_FILE).read_text("utf-8")))


def spread(pairs: Sequence[tuple[str, str]], n: int) -> list[tuple[str, str]]:
    """``n`` pairs evenly spaced along ``pairs`` (all of them if there are no more than ``n``). The
    corpus keeps its pairs sorted by English length, so the *first* ``n`` would be the shortest and
    score too high."""
    if len(pairs) <= n:
        return list(pairs)
    return [pairs[i * len(pairs) // n] for i in range(n)]


def _pairs_that_fit(
    pairs: Sequence[tuple[str, str]], vocab: SubwordVocab, max_len: int
) -> list[tuple[str, str]]:
    """The pairs whose source and target (+ ``<bos>``) fit the model's ``max_len`` positions; says
    how many not."""
    src = vocab.encode_batch([s for s, _ in pairs])
    tgt = vocab.encode_batch([t for _, t in pairs])
    kept = [
        p
        for p, s, t in zip(pairs, src, tgt, strict=True)
        if len(s) <= max_len and len(t) + 1 <= max_len
    ]
    if len(kept) < len(pairs):
        print(
            f"left out {len(pairs) - len(kept)} of {len(pairs)} training pairs longer than "
            f"max_len={max_len} tokens"
        )
    if not kept:
        raise ValueError(
            f"no training pair fits max_len={max_len} tokens: raise the recipe's max_len"
        )
    return kept


class _EncodedOnce:
    """``vocab``, except that :meth:`encode` reads the ids :meth:`encode_batch` already computed.

    :class:`LengthBatches` encodes every pair once when it is made (to plan batches by length), and
    :func:`~transformer_lib.training.data.make_batch` encodes each pair of a batch again, every
    step: a tenth of a second for a batch of 16,000 tokens, longer than a GPU's training step. With
    this the step reads the same ids from a dictionary."""

    def __init__(self, vocab: SubwordVocab):
        self._vocab, self._ids = vocab, {}
        self.bos_id, self.eos_id, self.pad_id = vocab.bos_id, vocab.eos_id, vocab.pad_id

    def __getattr__(self, name: str):
        return getattr(self._vocab, name)

    def __len__(self) -> int:
        return len(self._vocab)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        ids = self._vocab.encode_batch(texts)
        self._ids.update(zip(texts, ids, strict=True))
        return ids

    def encode(self, text: str, bos: bool = False, eos: bool = False) -> list[int]:
        ids = self._ids.get(text) if isinstance(text, str) else None
        if ids is None:
            return self._vocab.encode(text, bos, eos)
        if bos or eos:
            return [self.bos_id] * bos + ids + [self.eos_id] * eos
        return ids  # the caller only reads it (make_batch pads a copy)


def train(
    folder: str | os.PathLike,
    recipe: TranslationRecipe = CPU_RECIPE,
    corpus: TatoebaCorpus | None = None,
    device: torch.device | str = "cpu",
    progress: bool = True,
    checkpoint_seconds: float = 60.0,
    clock: str = "wall",
) -> Trainer:
    """Train (or resume) the model of ``folder`` for ``recipe.minutes`` minutes of training; returns
    the trainer.

    A fresh folder gets ``tokenizer.json`` (BPE learned on the training split), ``recipe.json``,
    then, every ``checkpoint_seconds`` of training and at the end, ``checkpoint.pt`` (the full
    state) and ``training_log.json`` (training seconds, process CPU seconds, the valid-BLEU curve).
    A folder that has them resumes: same vocabulary, same batches (:class:`LengthBatches` is indexed
    by step), the step count and the schedule go on; a different recipe for an existing folder is
    refused. At each of ``recipe.eval_minutes`` of training (checked after every step), greedy BLEU
    on ``recipe.valid_pairs`` valid pairs (:func:`spread`) is logged and the weights are kept as
    ``weights_<m>min.pt``. Time spent evaluating is not training time; both are logged.

    ``clock="cpu"`` counts the budget and the marks in the process's CPU seconds instead of
    wall-clock seconds: on a machine shared with other jobs, wall time says little about the work
    done, while one thread's CPU time is what the same run takes on an idle core.
    """
    check_choice("clock", clock, ("wall", "cpu"))
    corpus = corpus if corpus is not None else TatoebaCorpus()
    run = _open_run(Path(folder), recipe, corpus, device, clock)
    pairs = _pairs_that_fit(corpus.train_pairs, run.vocab, recipe.max_len)
    batches = LengthBatches(pairs, _EncodedOnce(run.vocab), recipe.max_tokens, recipe.seed)
    run.valid = spread(corpus.valid_pairs, recipe.valid_pairs)
    budget = recipe.minutes * 60
    marks = [m for m in recipe.eval_minutes if m * 60 > run.spent and m <= recipe.minutes]
    run.bar = tqdm(
        total=round(budget),
        initial=min(round(run.spent), round(budget)),
        disable=not progress,
        desc=f"training seconds ({clock})",
        mininterval=2.0,
    )
    saved_at, trainer, log = run.spent, run.trainer, run.log
    while run.spent < budget:
        wall, cpu = time.perf_counter(), time.process_time()
        trainer.fit(batches, trainer.step + 1, progress=False)  # one step: then the clock
        log["train_seconds"] += time.perf_counter() - wall
        log["cpu_seconds"] += time.process_time() - cpu
        run.bar.update(min(round(run.spent), round(budget)) - run.bar.n)
        run.bar.set_postfix(
            step=trainer.step, loss=f"{trainer.history.loss[-1]:.3f}", refresh=False
        )
        while marks and run.spent >= marks[0] * 60:
            run.evaluate_mark(marks.pop(0))
        if run.spent >= budget or run.spent - saved_at >= checkpoint_seconds:
            run.save()
            saved_at = run.spent
    run.bar.close()
    _finish(run, recipe.average_last, progress)
    return trainer


@dataclass
class _Run:
    """The state :func:`train`'s steps share: the folder, trainer, vocabulary, training log, the
    clock's key in the log (``train_seconds`` or ``cpu_seconds``), the valid pairs, the bar."""

    folder: Path
    trainer: Trainer
    vocab: SubwordVocab
    log: dict
    spent_key: str
    valid: list = dataclasses.field(default_factory=list)
    bar: object = None

    @property
    def spent(self) -> float:
        """Training seconds so far on the run's clock."""
        return self.log[self.spent_key]

    def evaluate_mark(self, label: float) -> None:
        """Greedy valid BLEU at ``label`` training minutes, logged, and the weights kept."""
        trainer, log = self.trainer, self.log
        started = time.perf_counter()
        bleu = (
            score_split(trainer.model, self.vocab, self.valid)["bleu"] if self.valid else math.nan
        )
        trainer.model.train()
        log["eval_seconds"] += time.perf_counter() - started
        recent = trainer.history.loss[-50:]
        log["curve"].append(
            {
                "minutes": label,
                "step": trainer.step,
                "train_seconds": round(log["train_seconds"], 1),
                "cpu_seconds": round(log["cpu_seconds"], 1),
                "valid_bleu": round(bleu, 2),
                "loss": round(sum(recent) / max(len(recent), 1), 4),
            }
        )
        save_weights(trainer.model, self.folder / f"weights_{label:g}min.pt", trainer.step)
        self.bar.write(
            f"valid BLEU {bleu:5.2f} at {label:g} training minutes (step {trainer.step})"
        )

    def save(self) -> None:
        """The checkpoint and the log, written together so that they always agree (with a GPU's
        peak memory so far)."""
        if self.trainer.device.type == "cuda":
            peak = torch.cuda.max_memory_allocated(self.trainer.device) / 2**20
            self.log["peak_gpu_MiB"] = round(max(peak, self.log.get("peak_gpu_MiB", 0.0)))
        self.trainer.save_checkpoint(self.folder / CHECKPOINT_FILE)
        _write_json(self.folder / LOG_FILE, self.log)


def _open_run(folder: Path, recipe: TranslationRecipe, corpus, device, clock: str) -> _Run:
    """A fresh or resumed run of ``folder``: the recipe checked against the saved one and written,
    the vocabulary loaded or learned, the trainer made (:func:`make_trainer`) and, where a
    checkpoint exists, restored with its log."""
    folder.mkdir(parents=True, exist_ok=True)
    if (folder / RECIPE_FILE).is_file():
        if _read_recipe(folder).replace(minutes=recipe.minutes) != recipe:
            raise ValueError(
                f"{folder} holds a run of another recipe ({folder / RECIPE_FILE}); use a new "
                "folder, or the same recipe (only minutes may change when resuming)"
            )
    _write_json(folder / RECIPE_FILE, recipe.to_dict())
    if (folder / TOKENIZER_FILE).is_file():
        vocab = SubwordVocab.load(folder / TOKENIZER_FILE)
    else:
        vocab = build_vocab(corpus.train_pairs, recipe.vocab_size)
        vocab.save(folder / TOKENIZER_FILE)
    config = model_config(recipe, len(vocab), vocab.pad_id)
    schedule = (config.d_model, recipe.warmup, recipe.lr_factor)
    trainer = make_trainer(
        config,
        recipe,
        recipe.seed,
        device,
        optimizer=lambda model: paper_optimizer(model, *schedule),
        precision=recipe.precision,
    )
    log = {"train_seconds": 0.0, "cpu_seconds": 0.0, "eval_seconds": 0.0, "threads": 0, "curve": []}
    if (folder / CHECKPOINT_FILE).is_file():
        trainer.load_checkpoint(folder / CHECKPOINT_FILE)
        log = json.loads((folder / LOG_FILE).read_text(encoding="utf-8"))
        print(
            f"resuming {folder} at step {trainer.step}, {log['train_seconds'] / 60:.1f} training "
            "minutes done"
        )
    log["threads"] = torch.get_num_threads()
    log["clock"] = clock
    spent_key = "cpu_seconds" if clock == "cpu" else "train_seconds"
    return _Run(folder, trainer, vocab, log, spent_key)


def _finish(run: _Run, average_last: int, progress: bool) -> None:
    """Average the last kept weights once the curve holds enough of them (``average_last`` > 1),
    and say how far the run got."""
    log = run.log
    if average_last > 1 and "averaged" not in log and len(log["curve"]) >= average_last:
        log["averaged"] = _average_last(
            run.folder, run.trainer, run.vocab, run.valid, average_last, log
        )
        _write_json(run.folder / LOG_FILE, log)
        if progress:
            print(
                f"averaged the weights of minutes {log['averaged']['minutes']}: valid BLEU "
                f"{log['averaged']['valid_bleu']:.2f} (final weights: "
                f"{log['curve'][-1]['valid_bleu']:.2f})"
            )
    if progress:
        print(
            f"trained to step {run.trainer.step}: {log['train_seconds'] / 60:.1f} training "
            f"minutes, {log['cpu_seconds'] / 60:.1f} CPU minutes, {log['threads']} threads"
        )


def _average_last(
    folder: Path,
    trainer: Trainer,
    vocab: SubwordVocab,
    valid: Sequence[tuple[str, str]],
    count: int,
    log: dict,
) -> dict:
    """Average the weights kept at the last ``count`` eval minutes into ``weights_averaged.pt`` and
    score it on the valid pairs (paper §6.1: the base models average their last 5 checkpoints)."""
    minutes = [entry["minutes"] for entry in log["curve"][-count:]]
    states = [
        torch.load(folder / f"weights_{m:g}min.pt", weights_only=True)["model"] for m in minutes
    ]
    model = copy.deepcopy(trainer.model)
    averaged = {
        name: sum(state[name].float() for state in states) / len(states)
        if value.is_floating_point()
        else value
        for name, value in model.state_dict().items()
    }
    model.load_state_dict(averaged)
    bleu = score_split(model, vocab, valid)["bleu"]
    save_weights(model, folder / AVERAGED_FILE, trainer.step)
    return {"minutes": minutes, "valid_bleu": round(bleu, 2)}


# --------------------------------------------------------------------------------------------------
# Saving and loading a model folder


def save_weights(model: Transformer, path: str | os.PathLike, step: int = 0) -> Path:
    """The model's weights alone, in float16 (half the bytes; translations are unchanged at this
    precision, the shipped-model test checks its BLEU), as a checkpoint
    :func:`~transformer_lib.training.train.load_model_weights` reads. Tied matrices (embeddings =
    output projection) stay one tensor in the file."""
    halves: dict[int, torch.Tensor] = {}
    weights = {}
    for name, tensor in model.state_dict().items():
        key = tensor.data_ptr()
        if key not in halves:
            halves[key] = (
                tensor.detach().cpu().half()
                if tensor.is_floating_point()
                else tensor.detach().cpu()
            )
        weights[name] = halves[key]
    state = {
        "model": weights,
        "optimizer": {},
        "scheduler": None,
        "step": step,
        "history": {},
        "rng_state": torch.get_rng_state(),
    }
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)
    return path


def load_translator(
    folder: str | os.PathLike, device: torch.device | str = "cpu"
) -> tuple[Transformer, SubwordVocab]:
    """``(model, vocab)`` of a model folder: ``tokenizer.json``, ``recipe.json`` and ``weights.pt``
    (or, for a run still training, its ``checkpoint.pt``). The model is in eval mode, in float32."""
    folder = Path(folder)
    for needed in (TOKENIZER_FILE, RECIPE_FILE):
        if not (folder / needed).is_file():
            raise FileNotFoundError(
                f"{folder} is not a translation model folder: it has no {needed}"
            )
    weights = (
        folder / WEIGHTS_FILE if (folder / WEIGHTS_FILE).is_file() else folder / CHECKPOINT_FILE
    )
    if not weights.is_file():
        raise FileNotFoundError(
            f"{folder} has no {WEIGHTS_FILE} nor {CHECKPOINT_FILE}: train it first"
        )
    vocab = SubwordVocab.load(folder / TOKENIZER_FILE)
    model = Transformer(model_config(_read_recipe(folder), len(vocab), vocab.pad_id)).to(device)
    load_model_weights(model, weights)
    return model.eval(), vocab


def shipped_model_dir() -> Path:
    """The folder of the trained model that ships with the package (made by
    ``make translation-model``)."""
    return package_data("translation_model")


def save_shipped_model(run_folder: str | os.PathLike, out: str | os.PathLike) -> Path:
    """Copy a finished run's tokenizer, recipe and training log to ``out``, with its weights in
    float16."""
    run_folder, out = Path(run_folder), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model, vocab = load_translator(run_folder)
    log = (
        json.loads((run_folder / LOG_FILE).read_text(encoding="utf-8"))
        if (run_folder / LOG_FILE).is_file()
        else {}
    )
    averaged, curve = log.get("averaged"), log.get("curve", [])
    if averaged and curve and averaged["valid_bleu"] > curve[-1]["valid_bleu"]:
        # the average scores higher on valid: it ships
        load_model_weights(model, run_folder / AVERAGED_FILE)
    # the step of the weights that ship: a run shorter than its first eval minute has no curve,
    # and its checkpoint (or, for a folder of shipped weights, that file) says how far it got
    weights = run_folder / (
        CHECKPOINT_FILE if (run_folder / CHECKPOINT_FILE).is_file() else WEIGHTS_FILE
    )
    step = read_checkpoint(weights)["step"] if not curve else curve[-1]["step"]
    save_weights(model, out / WEIGHTS_FILE, step)
    for name in (TOKENIZER_FILE, RECIPE_FILE, LOG_FILE):
        if (run_folder / name).is_file():
            (out / name).write_bytes((run_folder / name).read_bytes())
    return out


# --------------------------------------------------------------------------------------------------
# Evaluating


def evaluate(
    folder: str | os.PathLike,
    corpus: TatoebaCorpus | None = None,
    beam_width: int = 4,
    length_penalty: float = 0.6,
    subset: int = 200,
    device: torch.device | str = "cpu",
    run_folder: str | os.PathLike | None = None,
) -> dict:
    """Score the model of ``folder`` on the **test** split and write ``metrics.json`` there.

    BLEU and chrF of greedy decoding, of beam search (``beam_width``, ``length_penalty``) and of the
    baseline that copies the source (English words that French shares: names, numbers, punctuation);
    and greedy BLEU on the first ``subset`` test pairs, the number the shipped model's test
    recomputes. With ``run_folder`` (the run that made the model), the weights it kept at each of
    its recipe's ``eval_minutes`` are scored too, with beam search: the test-BLEU curve of training,
    read after training has ended. Without it, a curve already in ``folder``'s ``metrics.json`` is
    kept as it is (the run's weights are not shipped, so it cannot be recomputed), with
    ``curve_min_len``, the ``min_len`` it was decoded with (0 before that setting existed), where it
    may differ from today's :func:`translate` default.
    """
    folder = Path(folder)
    corpus = corpus if corpus is not None else TatoebaCorpus()
    model, vocab = load_translator(folder, device)
    test = corpus.test_pairs
    references = [t for _, t in test]
    results: dict = {"test_pairs": len(test), "attribution": ATTRIBUTION}
    for name, width in (("greedy", None), (f"beam{beam_width}", beam_width)):
        started = time.perf_counter()
        hyps = translate(model, vocab, [s for s, _ in test], width, length_penalty)
        results[name] = {
            "bleu": round(corpus_bleu(hyps, references), 2),
            "chrf": round(corpus_chrf(hyps, references), 2),
            "seconds": round(time.perf_counter() - started, 1),
        }
    sources = [s for s, _ in test]
    results["copy_source"] = {
        "bleu": round(corpus_bleu(sources, references), 2),
        "chrf": round(corpus_chrf(sources, references), 2),
    }
    results["length_penalty"] = length_penalty
    results["min_len"] = MIN_OUTPUT_TOKENS
    results[f"greedy_bleu_first_{subset}"] = round(
        score_split(model, vocab, test[:subset])["bleu"], 2
    )
    results["subset"] = subset
    if run_folder is not None:
        results["curve"] = _test_curve(
            Path(run_folder), vocab, test, beam_width, length_penalty, device
        )
        results["curve_min_len"] = MIN_OUTPUT_TOKENS
    elif (folder / METRICS_FILE).exists():
        kept = json.loads((folder / METRICS_FILE).read_text(encoding="utf-8"))
        if "curve" in kept:
            results["curve"] = kept["curve"]
            results["curve_min_len"] = kept.get("curve_min_len", 0)
    _write_json(folder / METRICS_FILE, results)
    return results


def _test_curve(
    run_folder: Path,
    vocab: SubwordVocab,
    test: Sequence[tuple[str, str]],
    beam_width: int,
    length_penalty: float,
    device: torch.device | str,
) -> list[dict]:
    """Beam-search test BLEU of each ``weights_<m>min.pt`` that :func:`train` kept in
    ``run_folder``."""
    log = json.loads((run_folder / LOG_FILE).read_text(encoding="utf-8"))
    model = Transformer(model_config(_read_recipe(run_folder), len(vocab), vocab.pad_id)).to(device)
    curve = []
    for entry in log["curve"]:
        load_model_weights(model, run_folder / f"weights_{entry['minutes']:g}min.pt")
        hyps = translate(model.eval(), vocab, [s for s, _ in test], beam_width, length_penalty)
        bleu = round(corpus_bleu(hyps, [t for _, t in test]), 2)
        curve.append({**entry, f"test_bleu_beam{beam_width}": bleu})
    return curve


# --------------------------------------------------------------------------------------------------
# Command line


def _recipe_for(
    device: torch.device,
    minutes: float | None,
    name: str | None = None,
    precision: str | None = None,
) -> TranslationRecipe:
    """The recipe ``train`` runs: :data:`RECIPES` ``[name]``, by default "cuda" on a CUDA device and
    "cpu" elsewhere, with ``minutes`` and ``precision`` changed where given."""
    if name is None:
        name = "cuda" if device.type == "cuda" else "cpu"
    check_choice("recipe", name, tuple(RECIPES))
    recipe = RECIPES[name]
    if minutes is not None:
        recipe = recipe.replace(minutes=minutes)
    if precision is not None:
        recipe = recipe.replace(precision=precision)
    return recipe


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: ``train``, ``evaluate`` or ``translate``; 2 on a bad argument or folder."""
    args = _parser().parse_args(argv)
    try:
        device = pick_device(args.device)
        if args.command == "train":
            recipe = _recipe_for(device, args.minutes, args.recipe, args.precision)
            if args.eval_minutes is not None:
                marks = tuple(float(m) for m in args.eval_minutes.split(",") if m.strip())
                recipe = recipe.replace(eval_minutes=marks)
            train(args.folder, recipe, device=device, clock=args.clock)
            if args.ship:
                print(f"shipped to {save_shipped_model(args.folder, args.ship)}")
        elif args.command == "evaluate":
            _print_results(evaluate(args.folder, device=device, run_folder=args.run_folder))
        else:
            sentences = args.sentences or [line.rstrip("\n") for line in sys.stdin]
            model, vocab = load_translator(args.folder, device)
            for line in translate(model, vocab, sentences, args.beam or None):
                print(line)
    except (ValueError, TypeError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def _print_results(results: dict) -> None:
    """What ``evaluate`` prints: the test split's scores, and the curve of kept weights."""
    pairs = results["test_pairs"]
    print(f"test split, {pairs} pairs; sacreBLEU (13a) and chrF on detokenised output")
    for name in ("greedy", "beam4", "copy_source"):
        print(f"  {name:12s} BLEU {results[name]['bleu']:6.2f}   chrF {results[name]['chrf']:6.2f}")
    subset = results["subset"]
    first = results[f"greedy_bleu_first_{subset}"]
    print(f"  greedy BLEU on the first {subset} test pairs: {first:.2f}")
    for point in results.get("curve", []):
        print(
            f"  after {point['minutes']:g} training minutes (step {point['step']}): "
            f"beam-4 test BLEU {point['test_bleu_beam4']:.2f}"
        )


def _parser() -> argparse.ArgumentParser:
    """The command line's three subcommands and their options."""
    parser = argparse.ArgumentParser(
        prog="python -m transformer_lib.applications.translation",
        description=f"English-French translation on the Tatoeba pairs ({ATTRIBUTION}).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_train_arguments(sub)
    p_eval = sub.add_parser(
        "evaluate", help="BLEU and chrF on the test split: greedy, beam 4, copy baseline"
    )
    p_eval.add_argument(
        "--folder", default=str(shipped_model_dir()), help="model folder (default: the shipped one)"
    )
    p_eval.add_argument("--device", default="cpu")
    p_eval.add_argument(
        "--run-folder",
        default=None,
        help="the training run's folder: also score the weights it kept at each eval minute",
    )
    p_tr = sub.add_parser(
        "translate", help="translate sentences given as arguments, or one per line on stdin"
    )
    p_tr.add_argument("sentences", nargs="*")
    p_tr.add_argument(
        "--folder", default=str(shipped_model_dir()), help="model folder (default: the shipped one)"
    )
    p_tr.add_argument(
        "--beam", type=int, default=4, help="beam width; 0 decodes greedily (default %(default)s)"
    )
    p_tr.add_argument("--device", default="cpu")
    return parser


def _add_train_arguments(sub) -> None:
    """The ``train`` subcommand's options."""
    p_train = sub.add_parser(
        "train", help="learn BPE, then train (resumes from FOLDER/checkpoint.pt if present)"
    )
    p_train.add_argument(
        "--folder",
        default="checkpoints/translation",
        help="where the run lives (default %(default)s)",
    )
    p_train.add_argument(
        "--minutes", type=float, default=None, help="training minutes (default: the recipe's)"
    )
    p_train.add_argument(
        "--device", default="cpu", help="cpu (the CPU recipe) or cuda (the bigger recipe)"
    )
    p_train.add_argument(
        "--recipe",
        default=None,
        help=f"one of {', '.join(RECIPES)} (default: cuda on a CUDA device, else cpu)",
    )
    p_train.add_argument(
        "--eval-minutes",
        default=None,
        help="comma-separated training minutes at which to score valid BLEU (default: the "
        "recipe's)",
    )
    p_train.add_argument(
        "--precision",
        default=None,
        help="fp32, bf16 or fp16 (default: the recipe's; a GPU without bfloat16 needs fp16)",
    )
    p_train.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="count the training budget in wall-clock or process CPU seconds (default %(default)s)",
    )
    p_train.add_argument(
        "--ship", default=None, help="after training, copy the model (float16) to this folder"
    )


if __name__ == "__main__":
    sys.exit(main())
