"""Draw the course's diagrams with matplotlib: ``python images/make_diagrams.py [OUT_DIR]`` (``make
images``).

Every picture in ``images/`` comes from this file, so a teacher can change a label or a colour and
redraw them all. The diagrams use the notation card of the course (B, T, d_model, h, d_k, d_v, d_ff,
N) and the same colour for the same kind of block everywhere:

- ``scaled_dot_product_attention.png``: softmax(Q K^T / sqrt(d_k) + mask) V with the shape of every
  tensor
- ``multi_head_attention.png``: project, split into h heads, attend, combine, project
- ``encoder_layer.png`` and ``decoder_layer.png``: the sublayers with residual connections and
  post-LN
- ``architecture.png``: the whole encoder-decoder model of the paper
- ``split_combine.png``: how ``split_heads`` moves the features of ``(T, d_model)`` into
  ``(h, T, d_k)``
"""

import sys
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Rectangle

COLORS = {
    "attention": "#fbd5a5",
    "norm": "#f3efa0",
    "ffn": "#c6e2f5",
    "embedding": "#f6c7c8",
    "linear": "#dcd3f2",
    "softmax": "#cdebcb",
    "op": "#eeeeee",
    "mask": "#ffffff",
}
EDGE = "#333333"
SHAPE_COLOR = "#1f5f99"

DIAGRAM_NAMES = (
    "scaled_dot_product_attention.png",
    "multi_head_attention.png",
    "encoder_layer.png",
    "decoder_layer.png",
    "architecture.png",
    "split_combine.png",
)
HEAD_COLORS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
)


def new_canvas(width: float, height: float, title: str):
    """A figure whose data coordinates are inches, so boxes and text keep their proportions.

    A bare ``Figure`` (no pyplot) needs no GUI backend and leaves no global state behind.
    """
    fig = Figure(figsize=(width, height))
    ax = fig.add_subplot()
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.text(width / 2, height - 0.3, title, ha="center", va="center", fontsize=13, weight="bold")
    return fig, ax


def box(ax, cx, cy, text, kind, width=2.2, height=0.5, stacked=0, dashed=False, fontsize=10):
    """A rounded box centred at (cx, cy); ``stacked`` draws that many copies behind it (one per
    head)."""
    for i in range(stacked, -1, -1):
        offset = 0.08 * i
        ax.add_patch(
            FancyBboxPatch(
                (cx - width / 2 + offset, cy - height / 2 + offset),
                width,
                height,
                boxstyle="round,pad=0.02,rounding_size=0.08",
                facecolor=COLORS[kind],
                edgecolor=EDGE,
                linewidth=1.2,
                linestyle="--" if dashed else "-",
                zorder=2 + stacked - i,
            )
        )
    ax.text(cx, cy, text, ha="center", va="center", fontsize=fontsize, zorder=10)
    return cx, cy, width, height


def top(b):
    return b[0], b[1] + b[3] / 2


def bottom(b):
    return b[0], b[1] - b[3] / 2


def left(b):
    return b[0] - b[2] / 2, b[1]


def right(b):
    return b[0] + b[2] / 2, b[1]


def arrow(ax, start, end, connection="arc3", color=EDGE):
    ax.add_patch(
        FancyArrowPatch(
            start,
            end,
            arrowstyle="-|>",
            mutation_scale=12,
            color=color,
            linewidth=1.2,
            connectionstyle=connection,
            shrinkA=0,
            shrinkB=0,
            zorder=1,
        )
    )


def polyline_arrow(ax, points, color=EDGE):
    """Straight segments through ``points`` with an arrow head at the end (for residual
    connections)."""
    xs, ys = zip(*points[:-1], strict=True)
    ax.plot(xs, ys, color=color, linewidth=1.2, zorder=1)
    arrow(ax, points[-2], points[-1], color=color)


def shape_note(ax, x, y, text, ha="left"):
    """A tensor shape in monospace; its white background keeps it readable where an arrow passes
    behind."""
    ax.text(
        x,
        y,
        text,
        ha=ha,
        va="center",
        fontsize=8.5,
        color=SHAPE_COLOR,
        family="monospace",
        zorder=11,
        bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.0},
    )


def label(ax, x, y, text, fontsize=10, **kwargs):
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, **kwargs)


def residual_sublayer(ax, cx, y_in, text, kind, inputs_from_side=None, stacked=0):
    """Draw ``LayerNorm(x + Sublayer(x))`` starting at height ``y_in``; returns the top of the Add &
    Norm box.

    ``inputs_from_side`` (cross-attention) is the point the keys and values come from.
    """
    sub = box(ax, cx, y_in + 0.75, text, kind, stacked=stacked)
    norm = box(ax, cx, y_in + 1.65, "Add & Norm", "norm", height=0.4)
    arrow(ax, (cx, y_in), bottom(sub))
    arrow(ax, top(sub), bottom(norm))
    # the residual path goes around the sublayer on the left
    x_side = cx - sub[2] / 2 - 0.35
    polyline_arrow(ax, [(cx, y_in + 0.18), (x_side, y_in + 0.18), (x_side, norm[1]), left(norm)])
    if inputs_from_side is not None:
        front_right = right(sub)[0] + 0.08 * stacked  # the right edge of the last copy drawn behind
        polyline_arrow(
            ax,
            [
                inputs_from_side,
                (front_right + 0.4, inputs_from_side[1]),
                (front_right + 0.4, sub[1]),
                (front_right, sub[1]),
            ],
        )
    return top(norm)[1]


def draw_scaled_dot_product_attention():
    fig, ax = new_canvas(7.0, 7.6, "Scaled dot-product attention")
    cx = 2.6
    q_x, k_x, v_x = 1.0, 3.2, 5.8
    y0 = 0.6
    for x, name, shape in (
        (q_x, "Q", "(B, h, T_q, d_k)"),
        (k_x, "K", "(B, h, T_k, d_k)"),
        (v_x, "V", "(B, h, T_k, d_v)"),
    ):
        label(ax, x, y0, name, weight="bold")
        shape_note(ax, x, y0 - 0.3, shape, ha="center")
    matmul1 = box(ax, cx - 0.3, 1.6, "MatMul  Q K^T", "op", width=2.0)
    arrow(ax, (q_x, y0 + 0.2), bottom(matmul1))
    arrow(ax, (k_x, y0 + 0.2), bottom(matmul1))
    scale = box(ax, cx - 0.3, 2.6, "Scale  / sqrt(d_k)", "op", width=2.0)
    mask = box(
        ax,
        cx - 0.3,
        3.6,
        "Mask (optional)\nFalse -> -inf",
        "mask",
        width=2.0,
        height=0.6,
        dashed=True,
        fontsize=9,
    )
    softmax = box(ax, cx - 0.3, 4.6, "Softmax over T_k", "softmax", width=2.0)
    matmul2 = box(ax, cx + 0.7, 5.7, "MatMul  weights V", "op", width=2.2)
    arrow(ax, top(matmul1), bottom(scale))
    arrow(ax, top(scale), bottom(mask))
    arrow(ax, top(mask), bottom(softmax))
    arrow(ax, top(softmax), (matmul2[0] - 0.5, bottom(matmul2)[1]))
    polyline_arrow(
        ax,
        [
            (v_x, y0 + 0.2),
            (v_x, 5.2),
            (matmul2[0] + 0.6, 5.2),
            (matmul2[0] + 0.6, bottom(matmul2)[1]),
        ],
    )
    shape_note(ax, right(matmul1)[0] + 0.1, 2.1, "scores (B, h, T_q, T_k)")
    shape_note(ax, right(softmax)[0] + 0.1, 4.35, "weights: rows sum to 1")
    arrow(ax, top(matmul2), (matmul2[0], 6.55))
    shape_note(ax, matmul2[0], 6.7, "output (B, h, T_q, d_v)", ha="center")
    return fig


def draw_multi_head_attention():
    fig, ax = new_canvas(7.6, 8.4, "Multi-head attention")
    xs = {"Q": 1.6, "K": 3.7, "V": 5.8}
    y0 = 0.6
    for name, x in xs.items():
        label(ax, x, y0, name, weight="bold")
        shape_note(ax, x, y0 - 0.3, "(B, T, d_model)", ha="center")
    heads = {"Q": "d_k", "K": "d_k", "V": "d_v"}
    attention = box(
        ax, 3.7, 4.3, "Scaled dot-product attention", "attention", width=4.4, height=0.6, stacked=3
    )
    for name, x in xs.items():
        proj = box(ax, x, 1.6, f"Linear  W_{name.lower()}", "linear", width=1.7)
        split = box(ax, x, 2.8, "split_heads", "op", width=1.7, height=0.45)
        arrow(ax, (x, y0 + 0.2), bottom(proj))
        arrow(ax, top(proj), bottom(split))
        arrow(ax, top(split), (x, bottom(attention)[1]))
        shape_note(ax, x, 3.35, f"(B, h, T, {heads[name]})", ha="center")
    label(ax, 6.75, 4.3, "x h heads", fontsize=9)
    combine = box(ax, 3.7, 5.6, "combine_heads  (concat)", "op", width=3.0, height=0.45)
    arrow(ax, top(attention), bottom(combine))
    shape_note(ax, right(combine)[0] + 0.1, 5.6, "(B, T, h * d_v)")
    out = box(ax, 3.7, 6.6, "Linear  W_o", "linear", width=1.9)
    arrow(ax, top(combine), bottom(out))
    arrow(ax, top(out), (3.7, 7.3))
    shape_note(ax, 3.7, 7.5, "output (B, T, d_model)", ha="center")
    return fig


def draw_encoder_layer():
    fig, ax = new_canvas(6.0, 6.0, "Encoder layer (post-LN, as in the paper)")
    cx = 2.5
    label(ax, cx, 0.35, "x  (B, T, d_model)")
    y = residual_sublayer(ax, cx, 0.6, "Multi-head\nself-attention", "attention", stacked=2)
    y = residual_sublayer(ax, cx, y, "Feed-forward (d_ff)", "ffn")
    arrow(ax, (cx, y), (cx, y + 0.45))
    label(ax, cx, y + 0.65, "out  (B, T, d_model)")
    shape_note(ax, 3.85, 2.45, "norm_first=True\n(pre-LN) moves\neach norm before\nits sublayer")
    return fig


def draw_decoder_layer():
    fig, ax = new_canvas(6.4, 7.9, "Decoder layer (post-LN, as in the paper)")
    cx = 2.6
    label(ax, cx, 0.35, "y  (B, T_tgt, d_model)")
    y = residual_sublayer(ax, cx, 0.6, "Masked multi-head\nself-attention", "attention", stacked=2)
    shape_note(ax, 4.2, 1.35, "causal mask:\nno peeking ahead")
    memory = (6.3, 3.2)
    label(ax, 5.1, 3.75, "K, V = memory from\nthe encoder\n(B, T_src, d_model)", fontsize=8.5)
    y = residual_sublayer(
        ax, cx, y, "Multi-head\ncross-attention", "attention", inputs_from_side=memory, stacked=2
    )
    y = residual_sublayer(ax, cx, y, "Feed-forward (d_ff)", "ffn")
    arrow(ax, (cx, y), (cx, y + 0.35))
    label(ax, cx, y + 0.55, "out  (B, T_tgt, d_model)")
    return fig


def stack_frame(ax, x, width, y_bottom, y_top, text, side):
    """The grey frame around one layer of a stack, labelled with how often it repeats."""
    ax.add_patch(
        FancyBboxPatch(
            (x, y_bottom),
            width,
            y_top - y_bottom,
            boxstyle="round,pad=0.02,rounding_size=0.15",
            facecolor="#f7f7f7",
            edgecolor="#888888",
            zorder=0,
        )
    )
    label_x = x - 0.25 if side == "left" else x + width + 0.25
    ax.text(
        label_x,
        (y_bottom + y_top) / 2,
        text,
        ha="right" if side == "left" else "left",
        va="center",
        fontsize=11,
        weight="bold",
    )


def draw_architecture():
    fig, ax = new_canvas(8.2, 10.2, "The Transformer (Vaswani et al., 2017)")
    enc_x, dec_x = 2.3, 5.9

    # inputs, embeddings and positions
    label(ax, enc_x, 0.35, "source tokens  (B, T_src)")
    label(ax, dec_x, 0.35, "target tokens, shifted right  (B, T_tgt)")
    enc_emb = box(ax, enc_x, 1.1, "Embedding x sqrt(d_model)", "embedding", width=2.6, fontsize=9)
    dec_emb = box(ax, dec_x, 1.1, "Embedding x sqrt(d_model)", "embedding", width=2.6, fontsize=9)
    for emb in (enc_emb, dec_emb):
        arrow(ax, (emb[0], 0.55), bottom(emb))
        plus = (emb[0], 1.85)
        ax.add_patch(Circle(plus, 0.16, facecolor="white", edgecolor=EDGE, zorder=3))
        label(ax, *plus, "+", zorder=4)
        arrow(ax, top(emb), (plus[0], plus[1] - 0.16))
    label(ax, 4.1, 1.85, "positional\nencoding", fontsize=8.5)
    arrow(ax, (3.55, 1.85), (enc_x + 0.16, 1.85))
    arrow(ax, (4.65, 1.85), (dec_x - 0.16, 1.85))

    # the encoder stack
    arrow(ax, (enc_x, 2.01), (enc_x, 2.6))
    y = residual_sublayer(ax, enc_x, 2.6, "Multi-head\nself-attention", "attention", stacked=2)
    y = residual_sublayer(ax, enc_x, y, "Feed-forward", "ffn")
    stack_frame(ax, enc_x - 1.65, 3.3, 2.35, y + 0.2, "N x", side="left")
    memory_y = y + 0.35
    ax.plot([enc_x, enc_x], [y, memory_y], color=EDGE, linewidth=1.2)

    # the decoder stack
    arrow(ax, (dec_x, 2.01), (dec_x, 2.6))
    y = residual_sublayer(
        ax, dec_x, 2.6, "Masked multi-head\nself-attention", "attention", stacked=2
    )
    cross = box(ax, dec_x, y + 0.75, "Multi-head\ncross-attention", "attention", stacked=2)
    norm = box(ax, dec_x, y + 1.65, "Add & Norm", "norm", height=0.4)
    arrow(ax, (dec_x, y), bottom(cross))
    arrow(ax, top(cross), bottom(norm))
    x_side = dec_x + cross[2] / 2 + 0.3
    polyline_arrow(ax, [(dec_x, y + 0.18), (x_side, y + 0.18), (x_side, norm[1]), right(norm)])
    # the encoder's output (memory) feeds the keys and values of every decoder layer's
    # cross-attention
    polyline_arrow(
        ax,
        [
            (enc_x, memory_y),
            (enc_x, memory_y + 0.3),
            (3.75, memory_y + 0.3),
            (3.75, cross[1]),
            left(cross),
        ],
    )
    ax.text(3.8, cross[1] + 0.2, "K, V", fontsize=8.5, color=SHAPE_COLOR)
    y = residual_sublayer(ax, dec_x, top(norm)[1], "Feed-forward", "ffn")
    stack_frame(ax, dec_x - 1.65, 3.45, 2.35, y + 0.2, "x N", side="right")

    # output head
    linear = box(ax, dec_x, 8.8, "Linear (tied to the embedding)", "linear", width=3.0, fontsize=9)
    softmax = box(ax, dec_x, 9.5, "Softmax", "softmax", width=1.6, height=0.4)
    arrow(ax, (dec_x, y), bottom(linear))
    arrow(ax, top(linear), bottom(softmax))
    label(ax, 2.6, 9.5, "next-token probabilities\n(B, T_tgt, vocab)", fontsize=9)
    return fig


def draw_split_combine(num_tokens: int = 4, d_model: int = 8, num_heads: int = 2, fig=None):
    """How ``split_heads`` moves features, each cell numbered by its feature and coloured by the
    head that owns it: ``(T, d_model) -> (T, h, d_k) -> (h, T, d_k)``; ``combine_heads`` walks the
    same way back.

    ``fig``: draw into this figure instead of a new bare one.
    """
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_k = d_model // num_heads
    grouped_width = num_heads * (d_k + 1) - 1  # heads side by side with a one-cell gap
    stacked_height = num_heads * (num_tokens + 1) - 1  # heads one above the other
    size = (2 + 0.45 * (d_model + grouped_width + d_k + 3), 0.3 * stacked_height + 1.4)
    fig = Figure(figsize=size) if fig is None else fig
    fig.set_size_inches(*size)
    axes = fig.subplots(
        1, 3, gridspec_kw={"width_ratios": [d_model + 1, grouped_width + 1, d_k + 3]}
    )

    def cell(ax, x, y, feature):
        color = HEAD_COLORS[(feature // d_k) % len(HEAD_COLORS)]
        ax.add_patch(Rectangle((x, y), 1, 1, fc=color, ec="white", alpha=0.85))
        ax.text(x + 0.5, y + 0.5, str(feature), ha="center", va="center", fontsize=7, color="white")

    # rows of the first two panels, aligned with the top of the third
    top_row = stacked_height - num_tokens
    for t in range(num_tokens):
        for ax in axes[:2]:
            ax.text(
                -0.3,
                top_row + num_tokens - 1 - t + 0.5,
                f"t{t}",
                ha="right",
                va="center",
                fontsize=8,
            )
        for f in range(d_model):
            head, k = divmod(f, d_k)
            cell(axes[0], f, top_row + num_tokens - 1 - t, f)  # (T, d_model)
            # (T, h, d_k): a view
            cell(axes[1], head * (d_k + 1) + k, top_row + num_tokens - 1 - t, f)
            # (h, T, d_k): one (T, d_k) block per head
            block = (num_heads - 1 - head) * (num_tokens + 1)
            cell(axes[2], k, block + num_tokens - 1 - t, f)
            if k == 0:
                axes[2].text(
                    -0.3,
                    block + num_tokens - 1 - t + 0.5,
                    f"t{t}",
                    ha="right",
                    va="center",
                    fontsize=7,
                )
    for head in range(num_heads):
        axes[2].text(
            d_k + 0.3,
            (num_heads - 1 - head) * (num_tokens + 1) + num_tokens / 2,
            f"head {head}",
            va="center",
            fontsize=8,
            color=HEAD_COLORS[head % len(HEAD_COLORS)],
        )
    titles = [
        f"x: (T, d_model) = ({num_tokens}, {d_model})",
        f".view: (T, h, d_k) = ({num_tokens}, {num_heads}, {d_k})",
        f".transpose(0, 1):\n(h, T, d_k) = ({num_heads}, {num_tokens}, {d_k})",
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


def draw_all(out_dir: Path) -> list[Path]:
    """Draw every diagram into ``out_dir`` and return the paths written."""
    drawers = (
        draw_scaled_dot_product_attention,
        draw_multi_head_attention,
        draw_encoder_layer,
        draw_decoder_layer,
        draw_architecture,
        draw_split_combine,
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, draw in zip(DIAGRAM_NAMES, drawers, strict=True):
        fig = draw()
        path = out_dir / name
        # no "Software" stamp, so redrawing with the same matplotlib gives the same bytes
        fig.savefig(path, dpi=110, bbox_inches="tight", metadata={"Software": None})
        written.append(path)
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent
    for path in draw_all(target):
        print(path)
