"""Pictures of what the course computes: pure matplotlib functions, tensors in, a Figure out.

They never show or save: a notebook cell ends with ``plt.show()``, widgets turn the Figure into a
PNG, tests call them directly; model code never imports this module. Token labels are plain text
(``$`` never starts mathtext), heat maps have a colour bar, and inline figures in a Jupyter kernel
are retina PNGs.
"""

import io
import math
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

__all__ = [
    "crisp_inline_figures",
    "figure_to_png",
    "plain",
    "plot_attention",
    "plot_heads",
    "plot_mask",
    "plot_mask_and_weights",
    "plot_positional_encoding",
    "plot_encoding_curves",
    "plot_encoding_pair",
    "encoding_wavelength",
    "plot_schedule",
    "plot_label_smoothing",
    "plot_history",
    "plot_shape_flow",
    "plot_softmax_temperature",
    "plot_attention_growth",
    "plot_rotary_pair",
]

HEAD_COLORS = plt.get_cmap("tab10").colors
# widgets show their PNG at half its pixel size (retina): 80 px per inch on screen, sharp on HiDPI
WIDGET_DPI = 160


def crisp_inline_figures() -> None:
    """In a Jupyter kernel, show inline figures as retina PNGs: same size on screen, twice the
    pixels. Importing this module does it; a notebook that draws with matplotlib alone calls it
    once."""
    try:
        from IPython import get_ipython
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None and "IPKernelApp" in shell.config:
        set_matplotlib_formats("retina")


crisp_inline_figures()


def figure_to_png(fig: Figure, dpi: int = WIDGET_DPI) -> bytes:
    """The figure as PNG bytes (what widgets display, at half the pixel size: see
    ``WIDGET_DPI``)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    return buffer.getvalue()


def plain(text: object) -> str:
    """``text`` escaped for matplotlib, so a token such as ``$`` is drawn as itself and never starts
    mathtext."""
    return str(text).replace("$", r"\$")


def _matrix(x: torch.Tensor | np.ndarray, name: str, dims: int = 2) -> np.ndarray:
    array = (
        x.detach().float().cpu().numpy()
        if isinstance(x, torch.Tensor)
        else np.asarray(x, dtype=float)
    )
    if array.ndim != dims:
        raise ValueError(f"{name} must have {dims} dimensions, got shape {tuple(array.shape)}")
    return array


def _ticks(
    ax, axis: str, labels: Sequence[str] | None, count: int, fontsize: float | None = None
) -> None:
    """Token labels on one axis, escaped; the key axis turns them upright when there are many."""
    if labels is None:
        return
    texts = [plain(label) for label in labels]
    if axis == "x":
        ax.set_xticks(range(count), texts, rotation=90 if count > 8 else 0, fontsize=fontsize)
    else:
        ax.set_yticks(range(count), texts, fontsize=fontsize)


def _label_axes(
    ax, query_labels: Sequence[str] | None, key_labels: Sequence[str] | None, shape
) -> None:
    _ticks(ax, "x", key_labels, shape[1])
    _ticks(ax, "y", query_labels, shape[0])
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
    vmax: float | None = None,
    colorbar: bool = False,
) -> Figure:
    """Heatmap of one head's ``(T_q, T_k)`` weights: row ``i`` is where query ``i`` looks. Small
    maps show their numbers; ``highlight_query`` outlines one row.

    The colour scale runs from 0 to ``vmax``: this map's largest weight by default, or a value
    shared by several maps (``vmax=1.0``: probabilities, so a flat map looks flat).
    """
    w = _matrix(weights, "weights")
    if ax is None:
        fig, ax = plt.subplots(
            figsize=(1.2 + 0.6 * colorbar + 0.42 * w.shape[1], 1.0 + 0.38 * w.shape[0])
        )
    fig = ax.figure
    top = max(1e-9, float(w.max()) if vmax is None else vmax)
    image = ax.imshow(w, cmap="Blues", vmin=0, vmax=top, aspect="auto")
    _label_axes(ax, query_labels, key_labels, w.shape)
    if annotate if annotate is not None else w.size <= 64:
        for (i, j), value in np.ndenumerate(w):
            color = "white" if value > 0.6 * top else "black"
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=8, color=color)
    if highlight_query is not None:
        ax.add_patch(
            Rectangle((-0.5, highlight_query - 0.5), w.shape[1], 1, fill=False, lw=2, ec="crimson")
        )
    if colorbar:
        fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02, label="weight")
    if title:
        ax.set_title(title)
    return fig


def plot_heads(
    weights: torch.Tensor,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    title: str | None = None,
    ncols: int = 4,
    vmax: float | None = None,
) -> Figure:
    """All heads of one layer side by side: ``weights (h, T_q, T_k)``.

    One colour scale for all heads, from 0 to ``vmax`` (default: the largest weight of any head),
    with one colour bar; ``vmax="own"`` gives every head its own scale and its own colour bar.
    """
    w = _matrix(weights, "weights", dims=3)
    heads = w.shape[0]
    ncols = min(ncols, heads)
    nrows = -(-heads // ncols)
    own = vmax == "own"
    fig, axes = plt.subplots(nrows, ncols, figsize=(2.6 * ncols + 0.8, 2.5 * nrows), squeeze=False)
    image = None
    for head, ax in enumerate(axes.flat):
        if head >= heads:
            ax.axis("off")
            continue
        top = float(w[head].max()) if own else float(w.max()) if vmax is None else vmax
        image = ax.imshow(w[head], cmap="Blues", vmin=0, vmax=max(1e-9, top), aspect="auto")
        ax.set_title(f"head {head}", color=HEAD_COLORS[head % 10], fontsize=10)
        _ticks(ax, "x", key_labels, w.shape[2], fontsize=8)
        _ticks(ax, "y", query_labels, w.shape[1], fontsize=8)
        if key_labels is None:
            ax.set_xticks([])
        if query_labels is None:
            ax.set_yticks([])
        if own:
            fig.colorbar(image, ax=ax, fraction=0.05, pad=0.02)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    if not own:
        fig.colorbar(image, ax=axes.ravel().tolist(), fraction=0.02, pad=0.02, label="weight")
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
        ax.text(
            j,
            i,
            "✓" if value else "·",
            ha="center",
            va="center",
            fontsize=9,
            color="white" if value else "gray",
        )
    _label_axes(ax, query_labels, key_labels, m.shape)
    ax.set_title(title or "mask (✓ = may attend)")
    return ax.figure


def plot_mask_and_weights(
    mask: torch.Tensor,
    weights: torch.Tensor,
    labels: Sequence[str] | None = None,
    title: str | None = None,
) -> Figure:
    """A mask ``(T, T)`` and the attention weights it leaves after the softmax, side by side."""
    t = _matrix(mask, "mask").shape[1]
    fig, (left, right) = plt.subplots(1, 2, figsize=(3.6 + 0.85 * t, 1.0 + 0.4 * t))
    plot_mask(mask, labels, labels, ax=left)
    plot_attention(
        weights,
        labels,
        labels,
        title="weights after softmax",
        annotate=False,
        vmax=1.0,
        colorbar=True,
        ax=right,
    )
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_positional_encoding(
    pe: torch.Tensor,
    title: str = "sinusoidal positional encoding",
    pair: int | None = None,
    ax=None,
) -> Figure:
    """Heatmap of ``PE (T, d_model)``: positions down, features across; fast turns at the left.

    ``pair`` outlines the columns ``2i`` and ``2i+1`` of one feature pair. Wide tables are resampled
    smoothly (no moiré when there are more features than pixels).
    """
    p = _matrix(pe, "pe")
    if ax is None:
        fig, ax = plt.subplots(figsize=(7, 3.2))
    image = ax.imshow(p, cmap="RdBu", vmin=-1, vmax=1, aspect="auto", interpolation="antialiased")
    if pair is not None:
        ax.add_patch(
            Rectangle(
                (2 * pair - 0.5, -0.5), 2, p.shape[0], fill=False, lw=1.5, ec="black", clip_on=False
            )
        )
        ax.annotate(
            f"pair {pair}",
            (2 * pair + 0.5, -0.5),
            xytext=(0, 4),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=8,
            annotation_clip=False,
            arrowprops={"arrowstyle": "-"},
        )
    ax.set_xlabel("feature (2i = sin, 2i+1 = cos)")
    ax.set_ylabel("position")
    ax.set_title(title, pad=14 if pair is not None else 6)
    ax.figure.colorbar(image, ax=ax, fraction=0.04, pad=0.02)
    return ax.figure


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
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(title or "each feature pair turns at its own frequency")
    return fig


def encoding_wavelength(pair: int, d_model: int) -> float:
    """Positions per full turn of feature pair ``i``: ``2 pi / w_i`` with
    ``w_i = 10000^(-2i/d_model)``."""
    return 2 * math.pi * 10000 ** (2 * pair / d_model)


def plot_encoding_pair(pe: torch.Tensor, pair: int) -> Figure:
    """The table ``PE (T, d_model)`` with pair ``i`` outlined, and that pair's sin and cos over
    position: dots at whole positions, lines on a fine grid (fast pairs read as waves, not zigzags).
    """
    p = _matrix(pe, "pe")
    max_len, d_model = p.shape
    if not 0 <= pair < d_model // 2:
        raise ValueError(f"pair must be in 0..{d_model // 2 - 1} for d_model={d_model}, got {pair}")
    frequency = 2 * math.pi / encoding_wavelength(pair, d_model)
    fig, (heat, curves) = plt.subplots(
        1, 2, figsize=(11, 3.0), gridspec_kw={"width_ratios": [1, 1.15]}
    )
    plot_positional_encoding(p, title=f"PE, d_model = {d_model}", pair=pair, ax=heat)
    fine = np.linspace(0, max_len - 1, 20 * max_len)
    positions = np.arange(max_len)
    curves.plot(fine, np.sin(fine * frequency), color="C0", lw=1, label=f"sin, feature {2 * pair}")
    curves.plot(
        fine, np.cos(fine * frequency), color="C1", lw=1, label=f"cos, feature {2 * pair + 1}"
    )
    curves.plot(positions, p[:, 2 * pair], ".", color="C0", ms=3)
    curves.plot(positions, p[:, 2 * pair + 1], ".", color="C1", ms=3)
    curves.set_xlabel("position (dots: the table's values)")
    curves.set_ylim(-1.1, 1.1)
    curves.set_title(
        f"pair {pair}: one turn every {encoding_wavelength(pair, d_model):.1f} positions"
    )
    curves.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


def plot_schedule(
    curves: Mapping[str, Sequence[float]], title: str = "learning-rate schedule"
) -> Figure:
    """Learning rate against step (steps count from 1), one line per schedule, with each peak
    marked."""
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
        ax.set_xticks(
            range(len(token_labels)), [plain(t) for t in token_labels], rotation=90, fontsize=7
        )
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


def plot_shape_flow(trace, max_depth: int = 1, title: str = "shapes through the model") -> Figure:
    """One box per module call of a :class:`~transformer_lib.ShapeTrace`, top to bottom, with its
    output shape."""
    records = [r for r in trace.records if r.depth <= max_depth]
    if not records:
        raise ValueError(
            "the trace recorded no module calls: run the model inside `with tl.trace_shapes(model)`"
        )
    fig, ax = plt.subplots(figsize=(7.5, 0.42 * len(records) + 0.6))
    for i, r in enumerate(records):
        y = len(records) - 1 - i
        ax.add_patch(
            Rectangle((r.depth * 0.6, y + 0.1), 4.2, 0.8, fc=HEAD_COLORS[r.depth % 10], alpha=0.25)
        )
        ax.text(
            r.depth * 0.6 + 0.1,
            y + 0.5,
            f"{r.name or '(model)'}  [{r.module_type}]",
            va="center",
            fontsize=8,
        )
        ax.text(6.0, y + 0.5, f"-> {r.output}", va="center", fontsize=8, family="monospace")
    ax.set_xlim(0, 9.5)
    ax.set_ylim(0, len(records))
    ax.axis("off")
    ax.set_title(title)
    return fig


def plot_softmax_temperature(
    scores: torch.Tensor, temperature: float, labels: Sequence[str] | None = None
) -> Figure:
    """``softmax(scores / temperature)`` as bars: low temperature -> one-hot, high -> uniform."""
    s = _matrix(scores, "scores", dims=1)
    probs = torch.softmax(torch.tensor(s) / temperature, dim=0).numpy()
    fig, ax = plt.subplots(figsize=(5, 2.4))
    ax.bar(range(len(s)), probs, color="C0")
    ax.set_xticks(
        range(len(s)),
        [plain(t) for t in labels] if labels is not None else [str(i) for i in range(len(s))],
    )
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("weight")
    # the slider's readout: 0.0316 and 0.0355 differ
    ax.set_title(f"softmax(scores / {temperature:.3g})")
    return fig


def plot_attention_growth(
    rows: Sequence[Mapping[str, float]], title: str = "attention as T grows"
) -> Figure:
    """Rows of :func:`transformer_lib.bench.attention_growth`: time of both paths and the weights'
    size."""
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


def plot_rotary_pair(
    vector: torch.Tensor,
    pair: int,
    positions: Sequence[int],
    theta: float = 10000.0,
    key_position: int | None = None,
    ax=None,
) -> Figure:
    """Pair ``(2i, 2i+1)`` of a query ``vector (d_k,)`` rotated by RoPE (interleaved pairs, as
    :func:`transformer_lib.apply_rope`) to each of ``positions``: one arrow per position.

    With ``key_position``, the same pair as a key there is drawn in red; the title gives the
    angle and the pair's share of the score, ``|pair|^2 cos((m - n) w_i)``: offset ``m - n`` only.
    """
    v = vector.detach().float()
    d_k = v.numel()
    if v.dim() != 1 or d_k % 2:
        raise ValueError(
            f"vector must be 1-D with an even width d_k, got shape {tuple(vector.shape)}"
        )
    if not 0 <= pair < d_k // 2:
        raise ValueError(f"pair must be in 0..{d_k // 2 - 1} for d_k={d_k}, got {pair}")
    fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(4.2, 4.2))
    w = theta ** (-2 * pair / d_k)
    x0, y0 = v[2 * pair].item(), v[2 * pair + 1].item()
    radius = math.hypot(x0, y0)

    def turned(m: int) -> tuple[float, float]:
        return x0 * math.cos(m * w) - y0 * math.sin(m * w), x0 * math.sin(m * w) + y0 * math.cos(
            m * w
        )

    circle = np.linspace(0, 2 * math.pi, 100)
    ax.plot(radius * np.cos(circle), radius * np.sin(circle), color="0.85")
    last = max(8, max(positions, default=0) + 1)
    for m in positions:
        x, y = turned(m)
        ax.annotate(
            "", (x, y), (0, 0), arrowprops=dict(arrowstyle="->", color=plt.cm.viridis(m / last))
        )
        ax.text(1.1 * x, 1.1 * y, str(m), fontsize=8, ha="center", va="center")
    title = f"pair {pair}: w = {w:.3g} rad per position"
    if key_position is not None:
        x, y = turned(key_position)
        ax.annotate("", (x, y), (0, 0), arrowprops=dict(arrowstyle="->", color="tab:red", lw=2))
        if len(positions) == 1:
            offset = positions[0] - key_position
            score = radius**2 * math.cos(offset * w)
            title += (
                f"\nquery at {positions[0]}, key (red) at {key_position}: angle {offset * w:.3g} "
                f"rad, score {score:.3g}"
            )
    ax.set_aspect("equal")
    ax.set_xlim(-1.35 * radius, 1.35 * radius)
    ax.set_ylim(-1.35 * radius, 1.35 * radius)
    ax.set_title(title, fontsize=9)
    return fig
