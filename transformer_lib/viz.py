"""Pictures of what the course computes: pure matplotlib functions that take tensors and return a Figure.

They never show or save anything themselves, so notebooks display them inline (end the line with ``;``),
widgets turn them into PNGs, and tests call them directly. Model code never imports this module.
"""

import io
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

__all__ = [
    "figure_to_png",
    "plot_attention",
    "plot_heads",
    "plot_mask",
    "plot_positional_encoding",
    "plot_encoding_curves",
    "plot_schedule",
    "plot_label_smoothing",
    "plot_history",
    "plot_split_combine",
    "plot_shape_flow",
    "plot_softmax_temperature",
    "plot_attention_growth",
]

HEAD_COLORS = plt.get_cmap("tab10").colors


def figure_to_png(fig: Figure, dpi: int = 80) -> bytes:
    """The figure as PNG bytes (what widgets display)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    return buffer.getvalue()


def _matrix(x: torch.Tensor | np.ndarray, name: str, dims: int = 2) -> np.ndarray:
    array = x.detach().float().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x, dtype=float)
    if array.ndim != dims:
        raise ValueError(f"{name} must have {dims} dimensions, got shape {tuple(array.shape)}")
    return array


def _label_axes(ax, query_labels: Sequence[str] | None, key_labels: Sequence[str] | None) -> None:
    if key_labels is not None:
        ax.set_xticks(range(len(key_labels)), [str(k) for k in key_labels], rotation=90 if len(key_labels) > 8 else 0)
    if query_labels is not None:
        ax.set_yticks(range(len(query_labels)), [str(q) for q in query_labels])
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")


def plot_attention(
    weights: torch.Tensor,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    title: str | None = None,
    highlight_query: int | None = None,
    annotate: bool | None = None,
    ax=None,
) -> Figure:
    """Heatmap of one head's ``(T_q, T_k)`` weights: row ``i`` is where query ``i`` looks. Small maps show
    their numbers; ``highlight_query`` outlines one row."""
    w = _matrix(weights, "weights")
    if ax is None:
        fig, ax = plt.subplots(figsize=(1.2 + 0.42 * w.shape[1], 1.0 + 0.38 * w.shape[0]))
    fig = ax.figure
    ax.imshow(w, cmap="Blues", vmin=0, vmax=max(1e-9, float(w.max())), aspect="auto")
    _label_axes(ax, query_labels, key_labels)
    if annotate if annotate is not None else w.size <= 64:
        for (i, j), value in np.ndenumerate(w):
            ax.text(
                j,
                i,
                f"{value:.2f}",
                ha="center",
                va="center",
                fontsize=8,
                color="white" if value > 0.6 * w.max() else "black",
            )
    if highlight_query is not None:
        ax.add_patch(Rectangle((-0.5, highlight_query - 0.5), w.shape[1], 1, fill=False, lw=2, ec="crimson"))
    if title:
        ax.set_title(title)
    return fig


def plot_heads(
    weights: torch.Tensor,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    title: str | None = None,
    ncols: int = 4,
) -> Figure:
    """All heads of one layer side by side: ``weights (h, T_q, T_k)``."""
    w = _matrix(weights, "weights", dims=3)
    heads = w.shape[0]
    ncols = min(ncols, heads)
    nrows = -(-heads // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(2.4 * ncols, 2.3 * nrows), squeeze=False)
    for head, ax in enumerate(axes.flat):
        if head >= heads:
            ax.axis("off")
            continue
        ax.imshow(w[head], cmap="Blues", vmin=0, vmax=float(w.max()), aspect="auto")  # one scale for all heads
        ax.set_title(f"head {head}", color=HEAD_COLORS[head % 10], fontsize=10)
        ax.set_xticks(range(w.shape[2]), key_labels if key_labels is not None else [""] * w.shape[2], fontsize=7)
        ax.set_yticks(range(w.shape[1]), query_labels if query_labels is not None else [""] * w.shape[1], fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_mask(
    mask: torch.Tensor,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    title: str | None = None,
    ax=None,
) -> Figure:
    """A bool ``(T_q, T_k)`` mask: dark = may attend (True), light = masked out (False)."""
    m = _matrix(mask, "mask")
    if ax is None:
        fig, ax = plt.subplots(figsize=(1.2 + 0.4 * m.shape[1], 1.0 + 0.36 * m.shape[0]))
    ax.imshow(m, cmap="Greens", vmin=-0.3, vmax=1, aspect="auto")
    for (i, j), value in np.ndenumerate(m):
        ax.text(j, i, "✓" if value else "·", ha="center", va="center", fontsize=9, color="white" if value else "gray")
    _label_axes(ax, query_labels, key_labels)
    ax.set_title(title or "mask (✓ = may attend)")
    return ax.figure


def plot_positional_encoding(pe: torch.Tensor, title: str = "sinusoidal positional encoding") -> Figure:
    """Heatmap of ``PE (T, d_model)``: positions down, features across; fast turns at the left."""
    p = _matrix(pe, "pe")
    fig, ax = plt.subplots(figsize=(7, 3.2))
    image = ax.imshow(p, cmap="RdBu", vmin=-1, vmax=1, aspect="auto", interpolation="nearest")
    ax.set_xlabel("feature (2i = sin, 2i+1 = cos)")
    ax.set_ylabel("position")
    ax.set_title(title)
    fig.colorbar(image, ax=ax, fraction=0.03)
    return fig


def plot_encoding_curves(
    pe: torch.Tensor, features: Sequence[int] = (0, 1, 4, 5, 10), title: str | None = None
) -> Figure:
    """Chosen features of ``PE (T, d_model)`` as curves over position."""
    p = _matrix(pe, "pe")
    fig, ax = plt.subplots(figsize=(7, 2.6))
    for f in features:
        ax.plot(p[:, f], label=f"feature {f} ({'sin' if f % 2 == 0 else 'cos'}, pair {f // 2})")
    ax.set_xlabel("position")
    ax.set_ylim(-1.1, 1.1)
    ax.legend(fontsize=7, loc="upper right", ncols=2)
    ax.set_title(title or "each feature pair turns at its own frequency")
    return fig


def plot_schedule(curves: Mapping[str, Sequence[float]], title: str = "learning-rate schedule") -> Figure:
    """Learning rate against step (steps count from 1), one line per schedule, with each peak marked."""
    fig, ax = plt.subplots(figsize=(6.5, 2.8))
    for label, values in curves.items():
        values = np.asarray(values)
        steps = np.arange(1, len(values) + 1)
        (line,) = ax.plot(steps, values, label=label)
        peak = int(values.argmax())
        ax.plot(steps[peak], values[peak], "o", color=line.get_color())
    ax.set_xlabel("step")
    ax.set_ylabel("learning rate")
    ax.legend(fontsize=8)
    ax.set_title(title)
    return fig


def plot_label_smoothing(
    dist: torch.Tensor, token_labels: Sequence[str] | None = None, title: str = "smoothed targets"
) -> Figure:
    """Target distributions ``(N, V)``: one row per target position."""
    d = _matrix(dist, "dist")
    fig, ax = plt.subplots(figsize=(min(10.0, 1.5 + 0.3 * d.shape[1]), 0.9 + 0.35 * d.shape[0]))
    ax.imshow(d, cmap="Purples", vmin=0, vmax=1, aspect="auto")
    if token_labels is not None:
        ax.set_xticks(range(len(token_labels)), token_labels, rotation=90, fontsize=6)
    ax.set_xlabel("vocabulary")
    ax.set_ylabel("target position")
    ax.set_title(title)
    return fig


def _moving_average(values: Sequence[float], window: int) -> np.ndarray:
    values = np.asarray(values, dtype=float)
    window = max(1, min(window, len(values)))
    return np.convolve(values, np.ones(window) / window, mode="valid")


def plot_history(history, window: int = 20, title: str = "training") -> Figure:
    """Loss (log scale) and teacher-forced token accuracy from a :class:`~transformer_lib.History`,
    smoothed over ``window`` steps."""
    fig, (loss_ax, acc_ax) = plt.subplots(1, 2, figsize=(8, 2.6))
    loss_ax.plot(history.loss, alpha=0.3, color="C0")
    loss_ax.plot(
        np.arange(window - 1, len(history.loss)) if len(history.loss) >= window else [],
        _moving_average(history.loss, window) if len(history.loss) >= window else [],
        color="C0",
    )
    loss_ax.set_yscale("log")
    loss_ax.set_xlabel("step")
    loss_ax.set_title("loss")
    acc_ax.plot(history.token_accuracy, color="C2")
    acc_ax.set_ylim(0, 1.02)
    acc_ax.set_xlabel("step")
    acc_ax.set_title("token accuracy (teacher forcing)")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_split_combine(num_tokens: int = 4, d_model: int = 8, num_heads: int = 2) -> Figure:
    """How ``split_heads`` moves features, each cell numbered by its feature and coloured by the head that owns
    it: ``(T, d_model) -> (T, h, d_k) -> (h, T, d_k)``; ``combine_heads`` walks the same way back."""
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_k = d_model // num_heads
    grouped_width = num_heads * (d_k + 1) - 1  # heads side by side with a one-cell gap
    stacked_height = num_heads * (num_tokens + 1) - 1  # heads one above the other
    fig, axes = plt.subplots(
        1,
        3,
        figsize=(2 + 0.45 * (d_model + grouped_width + d_k + 3), 0.3 * stacked_height + 1.4),
        gridspec_kw={"width_ratios": [d_model + 1, grouped_width + 1, d_k + 3]},
    )

    def cell(ax, x, y, feature):
        ax.add_patch(Rectangle((x, y), 1, 1, fc=HEAD_COLORS[(feature // d_k) % 10], ec="white", alpha=0.85))
        ax.text(x + 0.5, y + 0.5, str(feature), ha="center", va="center", fontsize=7, color="white")

    top = stacked_height - num_tokens  # rows of the first two panels, aligned with the top of the third
    for t in range(num_tokens):
        for ax in axes[:2]:
            ax.text(-0.3, top + num_tokens - 1 - t + 0.5, f"t{t}", ha="right", va="center", fontsize=8)
        for f in range(d_model):
            head, k = divmod(f, d_k)
            cell(axes[0], f, top + num_tokens - 1 - t, f)  # (T, d_model)
            cell(axes[1], head * (d_k + 1) + k, top + num_tokens - 1 - t, f)  # (T, h, d_k): a view, same memory
            block = (num_heads - 1 - head) * (num_tokens + 1)  # (h, T, d_k): one (T, d_k) block per head
            cell(axes[2], k, block + num_tokens - 1 - t, f)
            if k == 0:
                axes[2].text(-0.3, block + num_tokens - 1 - t + 0.5, f"t{t}", ha="right", va="center", fontsize=7)
    for head in range(num_heads):
        axes[2].text(
            d_k + 0.3,
            (num_heads - 1 - head) * (num_tokens + 1) + num_tokens / 2,
            f"head {head}",
            va="center",
            fontsize=8,
            color=HEAD_COLORS[head % 10],
        )
    titles = [
        f"x: (T, d_model) = ({num_tokens}, {d_model})",
        f".view: (T, h, d_k) = ({num_tokens}, {num_heads}, {d_k})",
        f".transpose(1, 2):\n(h, T, d_k) = ({num_heads}, {num_tokens}, {d_k})",
    ]
    for ax, width, title in zip(axes, (d_model, grouped_width, d_k + 2.5), titles, strict=True):
        ax.set_xlim(-1.2, width + 0.2)
        ax.set_ylim(-0.2, stacked_height + 0.2)
        ax.set_aspect("equal")
        ax.axis("off")
        ax.set_title(title, fontsize=9)
    fig.text(
        0.5,
        0.02,
        "split_heads runs left to right; combine_heads runs right to left (transpose back, then "
        "reshape). Numbers are feature indices; colours are heads.",
        ha="center",
        fontsize=8,
    )
    return fig


def plot_shape_flow(trace, max_depth: int = 1, title: str = "shapes through the model") -> Figure:
    """One box per module call of a :class:`~transformer_lib.ShapeTrace`, top to bottom, with its output shape."""
    records = [r for r in trace.records if r.depth <= max_depth]
    if not records:
        raise ValueError("the trace recorded no module calls: run the model inside `with tl.trace_shapes(model)`")
    fig, ax = plt.subplots(figsize=(7.5, 0.42 * len(records) + 0.6))
    for i, r in enumerate(records):
        y = len(records) - 1 - i
        ax.add_patch(Rectangle((r.depth * 0.6, y + 0.1), 4.2, 0.8, fc=HEAD_COLORS[r.depth % 10], alpha=0.25))
        ax.text(r.depth * 0.6 + 0.1, y + 0.5, f"{r.name or '(model)'}  [{r.module_type}]", va="center", fontsize=8)
        ax.text(6.0, y + 0.5, f"-> {r.output}", va="center", fontsize=8, family="monospace")
    ax.set_xlim(0, 9.5)
    ax.set_ylim(0, len(records))
    ax.axis("off")
    ax.set_title(title)
    return fig


def plot_softmax_temperature(scores: torch.Tensor, temperature: float, labels: Sequence[str] | None = None) -> Figure:
    """``softmax(scores / temperature)`` as bars: low temperature -> one-hot, high -> uniform."""
    s = _matrix(scores, "scores", dims=1)
    probs = torch.softmax(torch.tensor(s) / temperature, dim=0).numpy()
    fig, ax = plt.subplots(figsize=(5, 2.4))
    ax.bar(range(len(s)), probs, color="C0")
    ax.set_xticks(range(len(s)), labels if labels is not None else [str(i) for i in range(len(s))])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("weight")
    ax.set_title(f"softmax(scores / {temperature:.2f})")
    return fig


def plot_attention_growth(rows: Sequence[Mapping[str, float]], title: str = "attention as T grows") -> Figure:
    """Rows of :func:`transformer_lib.bench.attention_growth`: time of both paths and the weights' size."""
    lengths = [r["T"] for r in rows]
    fig, (time_ax, mem_ax) = plt.subplots(1, 2, figsize=(8.5, 2.8))
    time_ax.plot(lengths, [r["fast_s"] * 1e3 for r in rows], "o-", label="fast (fused)")
    time_ax.plot(lengths, [r["explicit_s"] * 1e3 for r in rows], "s-", label="explicit (weights)")
    time_ax.set_xscale("log", base=2)
    time_ax.set_yscale("log")
    time_ax.set_xlabel("T")
    time_ax.set_ylabel("ms per forward")
    time_ax.legend(fontsize=8)
    mem_ax.plot(lengths, [r["weights_MiB"] for r in rows], "o-", color="C3")
    mem_ax.set_xscale("log", base=2)
    mem_ax.set_yscale("log")
    mem_ax.set_xlabel("T")
    mem_ax.set_ylabel("MiB")
    mem_ax.set_title("(B, h, T, T) weights: x4 per doubling")
    fig.suptitle(title)
    fig.tight_layout()
    return fig
