"""``python -m transformer_lib.bench``: our attention against PyTorch's, how attention grows with T,
and the speed of beam search over a batch of sources; ``--recipe``: the CPU training recipe on the
date task, timed.

Speed and memory claims of the course live here, never in timed tests. Each timing is the median of
several repeats after warm-up. On a CUDA machine everything runs there. Peak memory is measured on
both devices: on CUDA by the allocator's own peak counter, on the CPU (whose allocator keeps no peak
count) by replaying every allocation and free that ``torch.profiler`` records with
``profile_memory=True``.
"""

import argparse
import contextlib
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Iterator

import torch
from torch import nn

from .applications.decode import beam_search, exact_match, generate
from .applications.interop import copy_from_torch
from .model.attention import MultiHeadAttention, kv_cache_bytes_per_token
from .model.lm import DecoderOnlyLM, LMConfig
from .model.transformer import Transformer, TransformerConfig
from .training.data import Batch, DateTask, make_batch
from .training.runtime import device_name, pick_device, seed_everything
from .training.train import CPU_RECIPE, train_task

__all__ = [
    "time_call",
    "peak_memory_MiB",
    "compare_attention",
    "attention_growth",
    "attention_memory",
    "beam_search_speed",
    "mixed_precision_steps",
    "sdpa_backends",
    "gemm_rate",
    "attention_gemm_share",
    "versus_torch_transformer",
    "main",
]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def time_call(
    fn: Callable[[], object],
    device: torch.device,
    repeats: int = 10,
    warmup: int = 3,
    summary: Callable[[list[float]], float] = statistics.median,
) -> float:
    """Seconds of ``fn()``: the ``summary`` (median by default) of ``repeats`` runs, after
    ``warmup`` runs."""
    for _ in range(warmup):
        fn()
    _sync(device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - start)
    return summary(times)


@contextlib.contextmanager
def _native_stderr_silenced() -> Iterator[None]:
    """Send file descriptor 2 to /dev/null while the block runs, then restore it.

    The CPU profiler's native code writes ``USDT: ... profiler_start`` / ``profiler_stop`` lines
    straight to the process's stderr descriptor, where ``sys.stderr`` redirection cannot reach them;
    in a notebook they land in the cell's output. Python exceptions still propagate as usual.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def peak_memory_MiB(fn: Callable[[], object], device: torch.device) -> float:
    """Peak of the memory allocated while ``fn()`` runs, above what was allocated before it, in MiB.

    CUDA: ``torch.cuda.max_memory_allocated``. CPU: the profiler's allocation events (bytes, + for
    an allocation and - for a free) summed in time order; the peak is the largest running total.
    Tensors that ``fn`` returns count while they live (the result is dropped only after the
    measurement).
    """
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        result = fn()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
        del result
        return peak / 2**20
    if device.type != "cpu":
        raise ValueError(f"peak memory is measured on cpu or cuda, got device {device}")
    from torch.profiler import ProfilerActivity, profile

    with (
        _native_stderr_silenced(),
        profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof,
    ):
        result = fn()
    del result
    # The public events API folds allocations into their operators; the raw kineto events keep each
    # one.
    allocations = sorted(
        (event.start_ns(), event.nbytes())
        for event in prof.profiler.kineto_results.events()
        if event.name() == "[memory]" and event.device_type() == torch.autograd.DeviceType.CPU
    )
    running = peak = 0
    for _, nbytes in allocations:
        running += nbytes
        peak = max(peak, running)
    return peak / 2**20


def _paired_modules(
    d_model: int, num_heads: int, device: torch.device
) -> tuple[MultiHeadAttention, nn.Module]:
    theirs = nn.MultiheadAttention(d_model, num_heads, batch_first=True).to(device)
    ours = copy_from_torch(MultiHeadAttention(d_model, num_heads).to(device), theirs)
    return ours, theirs


def compare_attention(
    batch: int = 30,
    length: int = 200,
    d_model: int = 512,
    num_heads: int = 8,
    device: torch.device | None = None,
    repeats: int = 10,
) -> list[dict]:
    """Forward and forward+backward self-attention times of ours (fast and explicit) and
    nn.MultiheadAttention."""
    device = device or pick_device()
    seed_everything(0)
    ours, theirs = _paired_modules(d_model, num_heads, device)
    x = torch.randn(batch, length, d_model, device=device, requires_grad=True)
    variants = {
        "nn.MultiheadAttention(need_weights=False)": lambda: theirs(x, x, x, need_weights=False)[0],
        "ours, fast path (fused SDPA)": lambda: ours(x, x, x)[0],
        "ours, explicit path (returns weights)": lambda: ours(x, x, x, need_weights=True)[0],
    }
    rows = []
    for name, run in variants.items():
        with torch.no_grad():
            forward = time_call(run, device, repeats)
        backward = time_call(lambda run=run: run().sum().backward(), device, repeats)
        rows.append({"variant": name, "forward_s": forward, "forward_backward_s": backward})
    reference = rows[0]
    for row in rows:
        row["forward_ratio"] = row["forward_s"] / reference["forward_s"]
        row["forward_backward_ratio"] = row["forward_backward_s"] / reference["forward_backward_s"]
    return rows


def _both_paths_as_t_grows(
    lengths: tuple[int, ...],
    batch: int,
    d_model: int,
    num_heads: int,
    device: torch.device | None,
    measure: Callable[[Callable[[], object], torch.device], float],
    unit: str,
) -> list[dict]:
    """One row per T: ``measure(forward, device)`` of a self-attention forward on the fast and on
    the explicit path (keys ``fast_<unit>``, ``explicit_<unit>``), and the size of the
    ``(B, h, T, T)`` float32 weights."""
    device = device or pick_device()
    seed_everything(0)
    mha = MultiHeadAttention(d_model, num_heads).to(device).eval()
    rows = []
    for length in lengths:
        x = torch.randn(batch, length, d_model, device=device)  # (B, T, d_model)
        row = {"T": length, "weights_MiB": batch * num_heads * length * length * 4 / 2**20}
        for path, need_weights in (("fast", False), ("explicit", True)):
            with torch.no_grad():
                row[f"{path}_{unit}"] = measure(
                    lambda nw=need_weights, x=x: mha(x, x, x, need_weights=nw), device
                )
        rows.append(row)
    return rows


def attention_growth(
    lengths: tuple[int, ...] = (128, 256, 512, 1024),
    batch: int = 4,
    d_model: int = 256,
    num_heads: int = 4,
    device: torch.device | None = None,
    repeats: int = 5,
) -> list[dict]:
    """Forward time (``fast_s``, ``explicit_s``) of both paths as T grows, with the size of the
    ``(B, h, T, T)`` weights the explicit path materialises (``weights_MiB``).

    Each time is the fastest of ``repeats`` runs: other processes can only add time to a run, so the
    minimum is the least disturbed, and the growth from one T to the next stays readable on a loaded
    machine."""
    return _both_paths_as_t_grows(
        lengths,
        batch,
        d_model,
        num_heads,
        device,
        lambda run, dev: time_call(run, dev, repeats, 1, min),
        "s",
    )


def attention_memory(
    lengths: tuple[int, ...] = (128, 256, 512, 1024),
    batch: int = 4,
    d_model: int = 256,
    num_heads: int = 4,
    device: torch.device | None = None,
) -> list[dict]:
    """Measured peak memory (``fast_peak_MiB``, ``explicit_peak_MiB``; see :func:`peak_memory_MiB`)
    of one self-attention forward on each path as T grows, next to the size of the ``(B, h, T, T)``
    float32 weights.

    The explicit path stores the scores and the weights, so its peak grows as T²; the fused path
    (``scaled_dot_product_attention``) works through the keys in blocks and never holds a T x T
    matrix, so on the CPU its peak grows as T. Both still do O(T²) work.
    """

    def measure(run: Callable[[], object], dev: torch.device) -> float:
        run()  # warm-up: one-off workspaces are not the path's cost
        return peak_memory_MiB(run, dev)

    return _both_paths_as_t_grows(lengths, batch, d_model, num_heads, device, measure, "peak_MiB")


def beam_search_speed(
    num_sources: int = 64,
    beam_width: int = 4,
    max_len: int = 11,
    config: TransformerConfig | None = None,
    device: torch.device | None = None,
    repeats: int = 3,
) -> list[dict]:
    """Sentences per second of :func:`~transformer_lib.applications.decode.beam_search` on
    ``num_sources`` date sources: all in one call (``B * W`` rows through the decoder each step) and
    one call per source (``W`` rows).

    The model is an untrained ``config`` (``TransformerConfig.cpu_small`` by default) over the date
    task's vocabulary: training would cost more than the measurement, and an untrained model rarely
    puts ``<eos>`` first, so nearly every source runs to ``max_len`` in both modes and they do the
    same work. Each time is the median of ``repeats`` runs after one warm-up. ``same_outputs`` says
    whether both modes returned the same tokens for every source (they should: batching changes the
    speed, not the search).
    """
    device = device or pick_device()
    task = DateTask(num_test=num_sources, num_valid=0)
    vocab = task.vocab
    seed_everything(0)
    model = Transformer(config or TransformerConfig.cpu_small(len(vocab))).to(device).eval()
    # num_sources x (1, S_i)
    sources = [make_batch([pair], vocab).src.to(device) for pair in task.test_pairs]
    batch = make_batch(task.test_pairs, vocab).src.to(device)  # (num_sources, S)

    def search(src: torch.Tensor) -> list[list[int]]:
        return beam_search(model, src, max_len, vocab.bos_id, vocab.eos_id, beam_width=beam_width)

    modes = {
        "batched (one call)": lambda: search(batch),
        "one source at a time": lambda: [tokens for src in sources for tokens in search(src)],
    }
    rows = [
        {"mode": mode, "seconds": time_call(run, device, repeats, warmup=1)}
        for mode, run in modes.items()
    ]
    same = search(batch) == modes["one source at a time"]()
    for row in rows:
        row["sentences_per_s"] = num_sources / row["seconds"]
        row["speedup"] = rows[1]["seconds"] / row["seconds"]
        row["same_outputs"] = same
    return rows


def grouped_query_decoding(
    kv_heads: tuple[int, ...] | None = None,
    prompt_len: int = 16,
    new_tokens: int = 64,
    batch: int = 8,
    config: LMConfig | None = None,
    device: torch.device | None = None,
    repeats: int = 3,
) -> list[dict]:
    """KV-cache bytes per generated token and time per generated token of a Llama-like language
    model with ``h`` (multi-head), ``h / 4`` (grouped-query) and 1 (multi-query) key/value heads.

    The model is ``config`` (by default ``LMConfig.llama_like`` at GPT-2 small's width,
    ``d_model=768``, ``h=12``, 4 layers), untrained: the cost of a decoding step does not depend on
    the weights. Bytes come from the configuration
    (:func:`~transformer_lib.model.attention.kv_cache_bytes_per_token`, fp32); the time is the
    median of ``repeats`` cached greedy generations of ``new_tokens`` tokens after a
    ``prompt_len``-token prompt, per token of one row.
    """
    device = device or pick_device()
    base = config or LMConfig.llama_like(
        1000, d_model=768, num_heads=12, d_ff=2048, num_layers=4, max_len=512
    )
    # h, h/4, 1
    kv_heads = kv_heads or tuple(dict.fromkeys((base.num_heads, max(1, base.num_heads // 4), 1)))
    prompt = torch.randint(
        0, base.vocab_size, (batch, prompt_len), generator=torch.Generator().manual_seed(0)
    )
    rows = []
    for heads in kv_heads:
        config = base.replace(n_kv_heads=heads)
        seed_everything(0)
        model = DecoderOnlyLM(config).to(device).eval()
        seconds = time_call(
            lambda m=model: generate(m, prompt.to(device), new_tokens), device, repeats, warmup=1
        )
        rows.append(
            {
                "kv_heads": heads,
                "kind": "multi-head"
                if heads == base.num_heads
                else "multi-query"
                if heads == 1
                else "grouped-query",
                "cache_bytes_per_token": kv_cache_bytes_per_token(config),
                "ms_per_token": seconds / new_tokens * 1e3,
            }
        )
    return rows


def _print_table(rows: list[dict], columns: list[tuple[str, str, str]]) -> None:
    widths = [max(len(title), 12) for _, title, _ in columns]
    widths[0] = max(widths[0], *(len(str(r[columns[0][0]])) for r in rows))
    print("  ".join(title.ljust(w) for (_, title, _), w in zip(columns, widths, strict=True)))
    for row in rows:
        cells = [format(row[key], fmt) if key in row else "-" for key, _, fmt in columns]
        print("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)))


def recipe_check(seed: int = 0) -> dict[str, float]:
    """The course's promise for its CPU recipe: ``train_task(DateTask())`` with :data:`CPU_RECIPE`
    reaches >= 99% exact match on held-out dates in about 45 s on two CPU cores. Trains once on the
    CPU and measures it: the wall time of the training steps, and exact match on the validation
    split and (read once) the test split."""
    task = DateTask(seed=seed)
    started = time.perf_counter()
    trainer = train_task(task, seed=seed, progress=False)
    seconds = time.perf_counter() - started
    model = trainer.model.eval()
    return {
        "train_s": seconds,
        "valid_exact_match": exact_match(model, task.valid_pairs, task.vocab),
        "test_exact_match": exact_match(model, task.test_pairs, task.vocab),
    }


def _translation_data(translation_pairs: int) -> tuple:
    """``(translation.CPU_RECIPE, pairs, vocab)`` of the English-French benchmarks: every 20th
    training pair up to ``translation_pairs``, and the shipped tokenizer if there is one (else one
    built on those pairs at the recipe's vocabulary size)."""
    from .applications.translation import CPU_RECIPE as TRANSLATION_RECIPE
    from .applications.translation import TOKENIZER_FILE, build_vocab, shipped_model_dir
    from .training.subwords import SubwordVocab
    from .training.translation_corpus import TatoebaCorpus

    pairs = TatoebaCorpus().train_pairs[::20][:translation_pairs]
    tokenizer = shipped_model_dir() / TOKENIZER_FILE
    vocab = (
        SubwordVocab.load(tokenizer)
        if tokenizer.is_file()
        else build_vocab(pairs, TRANSLATION_RECIPE.vocab_size)
    )
    return TRANSLATION_RECIPE, pairs, vocab


def _real_tokens(batches: Iterable[Batch]) -> int:
    """Source + target tokens of ``batches``, padding not counted."""
    return sum(int((b.src != b.pad_id).sum() + (b.tgt_out != b.pad_id).sum()) for b in batches)


def training_throughput(
    device: torch.device, steps: int = 5, translation_pairs: int = 8000
) -> list[dict]:
    """Training tokens per second (real source + target tokens, padding not counted) of the course's
    two CPU recipes: the date task (``train.CPU_RECIPE``, ``cpu_tiny``, 64 pairs a batch) and
    English-French translation (``translation.CPU_RECIPE``, batches by length within its token
    budget, on every 20th training pair up to ``translation_pairs``; the shipped tokenizer if there
    is one). One step warms up, then ``steps`` are timed."""
    from .applications.translation import model_config
    from .training.length_batching import LengthBatches
    from .training.train import adam_with_warmup, make_trainer

    date = DateTask(seed=0)
    translation, pairs, vocab = _translation_data(translation_pairs)
    date_config = TransformerConfig.cpu_tiny(len(date.vocab))
    cases = [
        (
            "date task (cpu_tiny)",
            date_config,
            lambda step: date.train_batch(step, CPU_RECIPE.batch_size),
            f"{CPU_RECIPE.batch_size} pairs",
            CPU_RECIPE,
        ),
        (
            "English-French (translation.CPU_RECIPE)",
            model_config(translation, len(vocab), vocab.pad_id),
            LengthBatches(pairs, vocab, translation.max_tokens),
            f"<= {translation.max_tokens} tokens",
            translation,
        ),
    ]
    rows = []
    for name, config, get_batch, batch, recipe in cases:
        # the recipe's label smoothing; a short warm-up and decay fit to the few steps timed
        trainer = make_trainer(
            config,
            recipe,
            device=device,
            optimizer=lambda m: adam_with_warmup(m, 1e-3, 1, steps + 2),
        )
        trainer.fit(get_batch, 1, progress=False)  # warm-up step: allocations, kernel choice
        tokens = _real_tokens(map(get_batch, range(1, steps + 1)))
        started = time.perf_counter()
        trainer.fit(get_batch, steps + 1, progress=False)
        _sync(device)
        seconds = time.perf_counter() - started
        rows.append(
            {
                "task": name,
                "batch": batch,
                "tokens_per_s": tokens / seconds,
                "s_per_step": seconds / steps,
            }
        )
    return rows


def _random_batch(vocab_size: int, batch: int, length: int, device: torch.device) -> Batch:
    """A batch of random ids in ``[4, vocab_size)`` (no padding, so every position counts),
    ``src`` and ``tgt_in`` both ``(batch, length)``."""
    from .model.masks import causal_mask, padding_mask

    generator = torch.Generator().manual_seed(0)
    src, tgt = (
        torch.randint(4, vocab_size, (batch, length + 1), generator=generator) for _ in "st"
    )
    src, tgt_in, tgt_out = src[:, :-1], tgt[:, :-1], tgt[:, 1:]  # (B, T) each
    tgt_mask = padding_mask(tgt_in, 0) & causal_mask(length)  # (B, 1, T, T)
    return Batch(src, tgt_in, tgt_out, padding_mask(src, 0), tgt_mask, pad_id=0).to(device)


def _precision_cases(device: torch.device) -> list[tuple[str, TransformerConfig, Callable]]:
    """What :func:`mixed_precision_steps` times by default: the launch-bound ``cpu_small`` step on
    a batch of dates (256 on a GPU, 32 on a CPU), and a wider model whose step does several times
    its matrix-multiply work (on a CPU 9.0 GFLOP against 3.4 per training step, 2.7 times, as
    ``torch.utils.flop_counter`` counts them), large enough for 16-bit matrix products to matter on
    ``device``; on a CPU that emulates bfloat16 the two stay affordable (seconds)."""
    date = DateTask(num_test=10)
    # a CPU without bfloat16 matrix instructions emulates them, ten times slower or worse: smaller
    # batches there keep the measurement to seconds
    dates = 256 if device.type == "cuda" else 32
    small = (
        f"cpu_small, {dates} dates",
        TransformerConfig.cpu_small(len(date.vocab)),
        lambda: date.train_batch(0, dates).to(device),
    )
    if device.type == "cuda":  # the paper's big model's widths, 64 x 128 tokens a side
        config = TransformerConfig(8000, 8000, d_model=1024, num_heads=16, d_ff=4096, max_len=256)
        label, shape = "d_model 1024, N=6, 64 x 128 tokens", (64, 128)
    else:  # one layer of the base model's widths: 2.7 times the small step's FLOPs
        config = TransformerConfig(1000, 1000, d_model=512, num_heads=8, d_ff=2048, num_layers=1)
        label, shape = "d_model 512, N=1, 6 x 32 tokens", (6, 32)
    large = (label, config, lambda: _random_batch(config.src_vocab_size, *shape, device))
    return [small, large]


def mixed_precision_steps(
    device: torch.device | None = None,
    repeats: int = 5,
    cases: list[tuple[str, TransformerConfig, Callable]] | None = None,
    precisions: tuple[str, ...] | None = None,
) -> list[dict]:
    """Median milliseconds of one :class:`~transformer_lib.training.train.Trainer` step (forward,
    label-smoothed loss, backward, clipping, Adam) in each ``precision`` (the Trainer's option:
    autocast to bfloat16 or float16, float16 with its gradient scaler), for each case
    ``(label, config, make_batch)``; by default a small, launch-bound model and a larger one
    (:func:`_precision_cases`). ``speedup`` is float32's time over this one's, in the same case. A
    precision the device lacks gets ``ms_per_step=None`` and its reason. ``precisions`` defaults to
    all three on a GPU and to float32 and bfloat16 on a CPU (whose float16 matrix products, where it
    has them at all, are emulated and slow)."""
    from .training.train import make_trainer

    def adam(model: nn.Module) -> tuple:
        return torch.optim.Adam(model.parameters(), lr=1e-4), None  # constant rate: no schedule

    device = device or pick_device()
    if precisions is None:
        precisions = ("fp32", "bf16") if device.type == "cpu" else ("fp32", "bf16", "fp16")
    rows = []
    for label, config, make in cases if cases is not None else _precision_cases(device):
        batch, reference = make(), None
        for precision in precisions:
            row = {"case": label, "precision": precision, "ms_per_step": None, "speedup": None}
            try:  # CPU_RECIPE's label smoothing, 0.1
                trainer = make_trainer(
                    config, CPU_RECIPE, 0, device, optimizer=adam, precision=precision
                )
            except ValueError as exc:
                rows.append({**row, "unsupported": str(exc)})
                continue
            seconds = time_call(lambda t=trainer, b=batch: t.train_step(b), device, repeats, 1)
            reference = reference or seconds
            rows.append({**row, "ms_per_step": seconds * 1e3, "speedup": reference / seconds})
    return rows


def sdpa_backends(
    device: torch.device, length: int = 4096, batch: int = 4, heads: int = 16, repeats: int = 10
) -> list[dict]:
    """CUDA only: milliseconds and extra memory (MiB above the inputs) of causal
    ``F.scaled_dot_product_attention`` in float16 at ``(batch, heads, length, 64)`` with each
    backend forced: the math path (stores the weights), memory-efficient, FlashAttention."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if device.type != "cuda":
        raise ValueError(f"sdpa_backends compares CUDA kernels, got device {device}")
    q, k, v = (
        torch.randn(batch, heads, length, 64, device=device, dtype=torch.float16) for _ in "qkv"
    )
    rows = []
    for backend in (SDPBackend.MATH, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.FLASH_ATTENTION):

        def run() -> torch.Tensor:
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

        with sdpa_kernel(backend):
            rows.append(
                {
                    "backend": backend.name,
                    "ms": time_call(run, device, repeats) * 1e3,
                    "extra_MiB": peak_memory_MiB(run, device),
                }
            )
    return rows


def _default_gemm_sizes(device: torch.device) -> tuple[int, ...]:
    """Square sizes for :func:`gemm_rate`: 256-2048 on a CPU, 1024-8192 on a GPU (which reaches its
    peak only on large matrices)."""
    return (256, 512, 1024, 2048) if device.type == "cpu" else (1024, 2048, 4096, 8192)


def _square_gemm(n: int, device: torch.device, dtype: torch.dtype) -> Callable[[], torch.Tensor]:
    """One ``(n, n) @ (n, n)`` product in ``dtype`` (``2 n^3`` FLOPs), ready to time."""
    a, b = (torch.randn(n, n, device=device).to(dtype) for _ in "ab")  # (n, n) each
    return lambda: a @ b


def gemm_rate(
    device: torch.device,
    dtype: torch.dtype = torch.float32,
    sizes: tuple[int, ...] | None = None,
    repeats: int = 5,
) -> float:
    """The best rate, in FLOP/s, of square matrix products ``(n, n) @ (n, n)`` (``2 n^3`` FLOPs)
    over ``sizes`` (default :func:`_default_gemm_sizes`), in ``dtype``: the machine's practical
    ceiling for dense arithmetic."""
    return max(_gemm_rates(device, dtype, sizes, repeats).values())


def _gemm_rates(
    device: torch.device, dtype: torch.dtype, sizes: tuple[int, ...] | None, repeats: int
) -> dict[int, float]:
    """FLOP/s of each square size's product (best of ``repeats``)."""
    rates = {}
    for n in sizes or _default_gemm_sizes(device):
        seconds = time_call(_square_gemm(n, device, dtype), device, repeats, 2, min)
        rates[n] = 2 * n**3 / seconds
    return rates


def attention_gemm_share(
    device: torch.device | None = None,
    dtype: torch.dtype = torch.float32,
    batch: int = 30,
    length: int = 200,
    d_model: int = 512,
    num_heads: int = 8,
    repeats: int = 10,
    rounds: int = 5,
    gemm_sizes: tuple[int, ...] | None = None,
) -> list[dict]:
    """Self-attention's forward FLOP rate as a share of the square-GEMM rate (same device, same
    dtype): how close the whole layer (four projections, the scores, softmax, the weighted sum)
    comes to the best a plain matrix product reaches. FLOPs counted: ``8 B T d^2`` for the
    projections and ``4 B T^2 d`` for ``Q K^T`` and ``weights V``. Ours (fast path) and
    ``nn.MultiheadAttention``, under ``torch.autocast`` for a 16-bit ``dtype``; and one of the
    layer's projections alone (``2 B T d^2`` FLOPs), the product the layer spends most of its time
    in: the share the layer could reach if its scores and softmax were free.

    The fastest size of ``gemm_sizes`` (see :func:`gemm_rate`) is picked once; then, ``rounds``
    times, that product and each attention are timed in turn (best of ``repeats`` each), and the
    share is the median over the rounds of attention's rate over the product's rate in the same
    round. Pairing them in time keeps a shared machine's changing load out of the ratio: timed
    apart, one CPU gave shares from 79% to 170% on the same code."""
    device = device or pick_device()
    seed_everything(0)
    ours, theirs = _paired_modules(d_model, num_heads, device)
    x = torch.randn(batch, length, d_model, device=device)  # (B, T, d_model)
    flops = 8 * batch * length * d_model**2 + 4 * batch * length**2 * d_model
    rates = _gemm_rates(device, dtype, gemm_sizes, 2)
    n = max(rates, key=rates.get)
    gemm = _square_gemm(n, device, dtype)
    autocast = (
        torch.autocast(device.type, dtype=dtype)
        if dtype != torch.float32
        else contextlib.nullcontext()
    )
    projection = ours.w_q  # one of the layer's four (d_model, d_model) projections
    variants = {
        "ours, fast path": (lambda: ours(x, x, x)[0], flops),
        "nn.MultiheadAttention": (lambda: theirs(x, x, x, need_weights=False)[0], flops),
        # the layer's own matrix product, alone: the practical ceiling of its projections
        "one projection (B*T, d) @ (d, d)": (
            lambda: projection(x),  # (B, T, d_model)
            2 * batch * length * d_model**2,
        ),
    }
    measured: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    for _ in range(rounds):
        gemm_per_s = 2 * n**3 / time_call(gemm, device, repeats, 1, min)
        for name, (run, work) in variants.items():
            with torch.no_grad(), autocast:
                seconds = time_call(run, device, repeats, 1, min)
            measured[name].append((work / seconds, gemm_per_s))
    return [
        {
            "variant": name,
            "dtype": str(dtype).removeprefix("torch."),
            "GFLOP_per_s": statistics.median(rate for rate, _ in pairs) / 1e9,
            "gemm_GFLOP_per_s": statistics.median(ceiling for _, ceiling in pairs) / 1e9,
            "gemm_size": n,
            "share": statistics.median(rate / ceiling for rate, ceiling in pairs),
            "rounds": rounds,
        }
        for name, pairs in measured.items()
    ]


class _TorchTransformerMT(nn.Module):
    """The stock-PyTorch model of :func:`versus_torch_transformer`: one shared embedding (scaled by
    sqrt(d_model)), the paper's sinusoidal positions, ``nn.Transformer`` and an output projection
    tied to the embedding, the same sizes and dropout as our :class:`Transformer`."""

    def __init__(self, config: TransformerConfig):
        from .model.layers import sinusoidal_encoding

        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.src_vocab_size, config.d_model, padding_idx=config.pad_id)
        table = sinusoidal_encoding(config.d_model, config.max_len)  # (max_len, d_model)
        self.register_buffer("positions", table, persistent=False)
        self.dropout = nn.Dropout(config.dropout)
        self.core = nn.Transformer(
            config.d_model,
            config.num_heads,
            config.num_layers,
            config.num_layers,
            config.d_ff,
            config.dropout,
            batch_first=True,
        )

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids) * self.config.d_model**0.5 + self.positions[: ids.size(1)]
        return self.dropout(x)  # (B, T, d_model)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        pad = self.config.pad_id
        length = tgt_in.size(1)
        # bool, True = may NOT attend (PyTorch's convention), like the padding masks below
        causal = torch.ones(length, length, dtype=torch.bool, device=src.device).triu(1)
        out = self.core(
            self._embed(src),
            self._embed(tgt_in),
            tgt_mask=causal,
            src_key_padding_mask=src == pad,
            tgt_key_padding_mask=tgt_in == pad,
            memory_key_padding_mask=src == pad,
            tgt_is_causal=True,
        )  # (B, T, d_model)
        return out @ self.embed.weight.T  # (B, T, V)


def _stock_training_step(
    model: _TorchTransformerMT,
    optimizer: torch.optim.Optimizer,
    schedule: torch.optim.lr_scheduler.LRScheduler,
    eps_ls: float,
) -> Callable[[Batch], float]:
    """The training step a PyTorch user writes for ``model``: ``F.cross_entropy`` with label
    smoothing ``eps_ls`` (``<pad>`` targets ignored), backward, gradients clipped at 1, an
    optimiser and a schedule step. Returns ``step(batch) -> loss``."""

    def step(batch: Batch) -> float:
        logits = model(batch.src, batch.tgt_in)  # (B, T, V)
        loss = torch.nn.functional.cross_entropy(
            logits.flatten(0, 1),
            batch.tgt_out.flatten(),
            ignore_index=model.config.pad_id,
            label_smoothing=eps_ls,
        )
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        return loss.item()

    return step


def _time_in_turns(
    runs: dict[str, Callable[[Batch], object]], batches: list[Batch], device: torch.device
) -> dict[str, list[float]]:
    """Seconds of each of ``runs`` on each batch but the first (which warms up), the runs taking
    turns batch by batch so that a load on the machine weighs on all alike."""
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for step, batch in enumerate(batches):
        for name, run in runs.items():
            started = time.perf_counter()
            run(batch)
            _sync(device)
            if step:  # step 0 warms up
                seconds[name].append(time.perf_counter() - started)
    return seconds


def versus_torch_transformer(
    device: torch.device | None = None,
    steps: int = 20,
    translation_pairs: int = 8000,
    config: TransformerConfig | None = None,
    max_tokens: int | None = None,
) -> list[dict]:
    """Training tokens per second of ours against a stock ``torch.nn.Transformer`` loop: same
    sizes, same batches, same optimiser. English-French at the CPU recipe's size
    (``translation.CPU_RECIPE``: d_model 128, N=2, h=4, d_ff 512, batches of <= 2,500 tokens,
    label smoothing 0.1, the paper's Adam and schedule, gradients clipped at 1). Ours is the
    library's ``Trainer`` as :func:`~transformer_lib.training.train.make_trainer` builds it;
    theirs is the loop a PyTorch user writes (``F.cross_entropy(label_smoothing=0.1)``). One step
    warms up each, then ``steps`` are timed, the two loops taking turns step by step so that a load
    on the machine weighs on both alike. Real (not padding) source + target tokens are counted.
    ``ratio``: the median over the steps of the stock step's time over ours on the same batch (a
    load that comes and goes moves a median of pairs less than a ratio of sums)."""
    from .applications.translation import model_config
    from .training.length_batching import LengthBatches
    from .training.train import make_trainer, paper_optimizer

    device = device or pick_device()
    recipe, pairs, vocab = _translation_data(translation_pairs)
    config = config or model_config(recipe, len(vocab), vocab.pad_id)
    batches = LengthBatches(pairs, vocab, max_tokens or recipe.max_tokens)
    prepared = [batches.batch(step).to(device) for step in range(steps + 1)]

    def adam(model: nn.Module) -> tuple:
        return paper_optimizer(model, recipe.d_model, recipe.warmup, recipe.lr_factor)

    ours = make_trainer(config, recipe, seed=0, device=device, optimizer=adam)
    seed_everything(0)
    theirs = _TorchTransformerMT(config).to(device).train()
    their_step = _stock_training_step(theirs, *adam(theirs), recipe.eps_ls)
    seconds = _time_in_turns({"ours": ours.train_step, "theirs": their_step}, prepared, device)
    tokens = _real_tokens(prepared[1:])
    paired = statistics.median(t / o for o, t in zip(*seconds.values(), strict=True))
    return [
        {
            "loop": "ours (Trainer, library Transformer)",
            "tokens_per_s": tokens / sum(seconds["ours"]),
            "parameters": sum(p.numel() for p in ours.model.parameters()),
            "ratio": paired,
        },
        {
            "loop": "stock torch.nn.Transformer",
            "tokens_per_s": tokens / sum(seconds["theirs"]),
            "parameters": sum(p.numel() for p in theirs.parameters()),
            "ratio": 1.0,
        },
    ]


def _show_attention(device: torch.device, repeats: int) -> None:
    print(
        "Self-attention, B=30, T=200, d_model=512, h=8 (median seconds; ratio to "
        "nn.MultiheadAttention)"
    )
    _print_table(
        compare_attention(device=device, repeats=repeats),
        [
            ("variant", "variant", "s"),
            ("forward_s", "forward", ".4f"),
            ("forward_ratio", "x", ".2f"),
            ("forward_backward_s", "fwd+bwd", ".4f"),
            ("forward_backward_ratio", "x", ".2f"),
        ],
    )


def _show_growth(device: torch.device, repeats: int) -> None:
    print("\nGrowth with T, B=4, d_model=256, h=4 (forward, median seconds)")
    _print_table(
        attention_growth(device=device, repeats=max(3, repeats // 2)),
        [
            ("T", "T", "d"),
            ("weights_MiB", "weights MiB", ".1f"),
            ("fast_s", "fast", ".4f"),
            ("explicit_s", "explicit", ".4f"),
        ],
    )


def _show_memory(device: torch.device, repeats: int) -> None:
    print(
        "\nPeak memory of one forward above its inputs, B=4, d_model=256, h=4 (MiB, "
        f"measured on {device.type})"
    )
    _print_table(
        attention_memory(device=device),
        [
            ("T", "T", "d"),
            ("weights_MiB", "weights MiB", ".1f"),
            ("fast_peak_MiB", "fast peak", ".1f"),
            ("explicit_peak_MiB", "explicit peak", ".1f"),
        ],
    )


def _show_beam(device: torch.device, repeats: int) -> None:
    speed = beam_search_speed(device=device, repeats=max(1, repeats // 3))
    print(
        "\nBeam search, W=4, max_len=11, 64 date sources, untrained cpu_small model "
        f"(median seconds; both modes return the same outputs: {speed[0]['same_outputs']})"
    )
    _print_table(
        speed,
        [
            ("mode", "mode", "s"),
            ("seconds", "seconds", ".3f"),
            ("sentences_per_s", "sentences/s", ".1f"),
            ("speedup", "x", ".1f"),
        ],
    )


def _show_gqa(device: torch.device, repeats: int) -> None:
    print(
        "\nGrouped-query attention: Llama-like LM, d_model=768, h=12, 4 layers, untrained; "
        "cached greedy generation of 64 tokens after 16, batch 8 (KV-cache bytes per token in "
        "fp32; median ms per generated token)"
    )
    _print_table(
        grouped_query_decoding(device=device, repeats=max(1, repeats // 3)),
        [
            ("kind", "key/value heads", "s"),
            ("kv_heads", "h_kv", "d"),
            ("cache_bytes_per_token", "cache bytes/token", ",d"),
            ("ms_per_token", "ms/token", ".2f"),
        ],
    )


def _show_throughput(device: torch.device, repeats: int) -> None:
    print(
        f"\nTraining throughput on {device.type}, threads: {torch.get_num_threads()} (source + "
        "target tokens per second, padding not counted; a few steps, so a rough figure)"
    )
    _print_table(
        training_throughput(device=device),
        [
            ("task", "task", "s"),
            ("batch", "batch", "s"),
            ("tokens_per_s", "tokens/s", ".0f"),
            ("s_per_step", "s/step", ".3f"),
        ],
    )


def _show_precision(device: torch.device, repeats: int) -> None:
    print(
        f"\nMixed precision on {device_name(device)}: one Trainer step (forward, loss, "
        "backward, Adam) in each precision (median ms; speed-up over float32 in the same case)"
    )
    for row in mixed_precision_steps(device=device, repeats=max(3, repeats // 2)):
        if row["ms_per_step"] is None:
            print(f"  {row['case']:36s} {row['precision']:5s} not run: {row['unsupported']}")
        else:
            print(
                f"  {row['case']:36s} {row['precision']:5s} {row['ms_per_step']:9.2f} ms   "
                f"x{row['speedup']:.2f}"
            )


def _show_sdpa(device: torch.device, repeats: int) -> None:
    if device.type != "cuda":
        return
    print("\nFused attention backends, causal, B=4, h=16, T=4096, d_k=64, float16")
    _print_table(
        sdpa_backends(device, repeats=repeats),
        [("backend", "backend", "s"), ("ms", "ms", ".2f"), ("extra_MiB", "extra MiB", ".1f")],
    )


def _show_share(device: torch.device, repeats: int) -> None:
    print(
        "\nSelf-attention forward (B=30, T=200, d_model=512, h=8) as a share of the best "
        f"square-GEMM rate on {device_name(device)}, same dtype (share: the median over rounds of "
        "attention's rate over the GEMM's rate timed beside it; GFLOP/s: medians)"
    )
    for dtype in [torch.float32] + ([torch.bfloat16] if device.type == "cuda" else []):
        _print_table(
            attention_gemm_share(device=device, dtype=dtype, repeats=repeats),
            [
                ("variant", "variant", "s"),
                ("dtype", "dtype", "s"),
                ("GFLOP_per_s", "GFLOP/s", ".1f"),
                ("gemm_GFLOP_per_s", "GEMM GFLOP/s", ".1f"),
                ("gemm_size", "GEMM n", "d"),
                ("share", "share", ".0%"),
            ],
        )


def _show_versus(device: torch.device, repeats: int) -> None:
    print(
        f"\nTraining step, ours against a stock torch.nn.Transformer loop on "
        f"{device_name(device)}, threads: {torch.get_num_threads()}: English-French at the CPU "
        "recipe's size, the same batches (tokens per second, padding not counted; x stock: the "
        "median over the steps of the stock step's time over ours on the same batch)"
    )
    _print_table(
        versus_torch_transformer(device=device, steps=max(5, 2 * repeats)),
        [
            ("loop", "loop", "s"),
            ("parameters", "parameters", ",d"),
            ("tokens_per_s", "tokens/s", ".0f"),
            ("ratio", "x stock", ".2f"),
        ],
    )


# Each part of the benchmark, in the order it prints: name -> what prints it, given the device and
# --repeats.
_SHOW: dict[str, Callable[[torch.device, int], None]] = {
    "attention": _show_attention,
    "growth": _show_growth,
    "memory": _show_memory,
    "beam": _show_beam,
    "gqa": _show_gqa,
    "throughput": _show_throughput,
    "precision": _show_precision,
    "sdpa": _show_sdpa,
    "share": _show_share,
    "versus": _show_versus,
}
PARTS = tuple(_SHOW)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--device", default=None, help="cpu, cuda or mps (default: the best available)"
    )
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument(
        "--parts",
        default=",".join(PARTS),
        help=f"comma-separated parts to run, of {','.join(PARTS)} (default: all)",
    )
    parser.add_argument(
        "--recipe",
        action="store_true",
        help="only train the date task with CPU_RECIPE on the CPU and time it",
    )
    return parser


def _show_recipe() -> None:
    print(f"CPU_RECIPE {CPU_RECIPE} on the date task, CPU, threads: {torch.get_num_threads()}")
    result = recipe_check()
    print(
        f"trained in {result['train_s']:.1f} s; exact match: validation "
        f"{result['valid_exact_match']:.3f}, test {result['test_exact_match']:.3f} (target: >= "
        "0.99 in about 45 s on 2 cores)"
    )


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.recipe:
        _show_recipe()
        return
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"--parts takes names from {','.join(PARTS)}, got {','.join(unknown)}")
    device = pick_device(args.device)
    print(
        f"device: {device_name(device)}   torch {torch.__version__}   threads: "
        f"{torch.get_num_threads()}\n"
    )
    for name, show in _SHOW.items():
        if name in parts:
            show(device, args.repeats)


if __name__ == "__main__":
    main()
