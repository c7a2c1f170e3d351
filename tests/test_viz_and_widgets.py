"""Pictures and widgets, without a browser: each widget is driven by setting a control's ``.value``."""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

import transformer_lib as tl  # noqa: E402
from transformer_lib import viz, widgets  # noqa: E402


def test_every_plot_returns_a_figure():
    weights = torch.softmax(torch.randn(4, 5, 6), -1)
    task = tl.CopyTask(num_test=5)
    trainer_history = tl.History(loss=[3.0, 2.0, 1.0] * 10, token_accuracy=[0.1, 0.5, 0.9] * 10, lr=[1e-3] * 30)
    mha, x = tl.MultiHeadAttention(8, 2), torch.randn(1, 3, 8)
    with tl.trace_shapes(mha) as trace:
        mha(x, x, x)
    figures = [
        viz.plot_attention(weights[0], list("abcde"), list("uvwxyz"), title="t", highlight_query=1),
        viz.plot_heads(weights),
        viz.plot_mask(tl.causal_mask(4)[0, 0]),
        viz.plot_positional_encoding(tl.sinusoidal_encoding(d_model=16, max_len=20)),
        viz.plot_encoding_curves(tl.sinusoidal_encoding(d_model=16, max_len=20)),
        viz.plot_schedule({"a": [tl.noam_lr(s, 64, 10) for s in range(1, 50)]}),
        viz.plot_label_smoothing(tl.smoothed_targets(torch.tensor([4, 5]), len(task.vocab), 0.1), task.vocab.itos),
        viz.plot_history(trainer_history, window=5),
        viz.plot_split_combine(3, 6, 3),
        viz.plot_shape_flow(trace),
        viz.plot_softmax_temperature(torch.tensor([1.0, 2.0, 0.5]), 0.5),
        viz.plot_attention_growth(
            [
                {"T": 8, "fast_s": 0.1, "explicit_s": 0.2, "weights_MiB": 1.0},
                {"T": 16, "fast_s": 0.2, "explicit_s": 0.5, "weights_MiB": 4.0},
            ]
        ),
    ]
    for fig in figures:
        assert isinstance(fig, Figure)
        assert viz.figure_to_png(fig).startswith(b"\x89PNG")
    matplotlib.pyplot.close("all")


def test_plots_name_the_shape_they_expected():
    with pytest.raises(ValueError, match=r"weights must have 3 dimensions, got shape \(5, 5\)"):
        viz.plot_heads(torch.rand(5, 5))
    with pytest.raises(ValueError, match="d_model=10 is not divisible by num_heads=3"):
        viz.plot_split_combine(2, 10, 3)
    with pytest.raises(ValueError, match="the trace recorded no module calls"):
        viz.plot_shape_flow(tl.ShapeTrace())


def changed(widget, control, value):
    """Set one control and report whether the picture was redrawn to something new."""
    before, count = widget.png, widget.draw_count
    widget.controls[control].value = value
    return widget.draw_count > count and widget.png != before


def test_temperature_explorer():
    explorer = widgets.TemperatureExplorer(torch.tensor([2.0, 1.0, 0.1]))
    assert changed(explorer, "temperature", 0.1)
    assert explorer.state["probabilities"][0] > 0.99  # near argmax
    explorer.controls["temperature"].value = 30.0
    assert explorer.state["probabilities"].max() < 0.4  # near uniform
    assert explorer.controls["temperature"].value <= 10**1.5  # the slider keeps it in bounds


def test_head_explorer_bounds_come_from_the_weights():
    weights = torch.softmax(torch.randn(3, 4, 4), -1)
    explorer = widgets.HeadExplorer(weights)
    assert explorer.controls["head"].max == 2
    assert changed(explorer, "head", 2)
    assert torch.equal(explorer.state["weights"], weights[2])
    explorer.controls["head"].value = 7
    assert explorer.state["head"] == 2


def test_head_count_explorer_changes_d_k():
    explorer = widgets.HeadCountExplorer(torch.randn(5, 8))
    assert list(explorer.controls["num_heads"].options) == [1, 2, 4, 8]
    assert changed(explorer, "num_heads", 4)
    assert explorer.state["d_k"] == 2 and explorer.state["weights"].shape == (4, 5, 5)


def test_mask_builder_toggles():
    builder = widgets.MaskBuilder(["I", "am", "<pad>"])
    assert builder.state["mask"][:, 2].sum() == 0  # nobody attends to the padding
    assert changed(builder, "causal", True)
    assert builder.state["mask"].tolist() == [[True, False, False], [True, True, False], [True, True, False]]
    assert changed(builder, "padding", False)
    assert builder.state["mask"][2, 2]
    torch.testing.assert_close(builder.state["weights"].sum(-1), torch.ones(3))


def test_positional_encoding_explorer_keeps_the_pair_in_bounds():
    explorer = widgets.PositionalEncodingExplorer(max_len=50, d_model=64)
    assert changed(explorer, "pair", 10)
    assert explorer.state["wavelength"] > 2 * 3.14
    explorer.controls["d_model"].value = 16
    assert explorer.controls["pair"].max == 7 and explorer.state["pair"] <= 7


def test_schedule_explorer_peak_follows_warmup():
    explorer = widgets.ScheduleExplorer(steps=3000)
    assert changed(explorer, "warmup", 1000)
    assert explorer.state["peak_step"] == 1000


@pytest.fixture(scope="module")
def date_model():
    tl.seed_everything(0)
    task = tl.DateTask(num_test=10)
    return tl.Transformer(tl.TransformerConfig.cpu_small(len(task.vocab))).eval(), task.vocab


def test_attention_explorer_follows_text_kind_layer_head_and_query(date_model):
    model, vocab = date_model
    explorer = widgets.AttentionExplorer(model, vocab, "3 march 1987", max_len=12)
    assert explorer.controls["layer"].max == 1 and explorer.controls["head"].max == 3
    assert explorer.state["weights"].shape[1] == len("3 march 1987")  # cross: keys are source characters
    for control, value in (("head", 3), ("layer", 1), ("query", 2), ("kind", "encoder self")):
        assert changed(explorer, control, value), control
    assert explorer.controls["query"].max == len("3 march 1987") - 1
    assert changed(explorer, "text", "1 may 2001")
    assert explorer.state["weights"].shape == (len("1 may 2001"), len("1 may 2001"))
    assert explorer.controls["query"].max == len("1 may 2001") - 1


def test_decoding_explorer_steps_through_the_output(date_model):
    model, vocab = date_model
    explorer = widgets.DecodingExplorer(model, vocab, "3 march 1987", max_len=6)
    assert explorer.controls["step"].max == len(explorer.tokens) == explorer.rows.size(0)
    assert changed(explorer, "step", 3)
    assert explorer.state["written"] == "".join(explorer.tokens[:3])
    torch.testing.assert_close(explorer.state["row"].sum(), torch.tensor(1.0))


def test_display_shows_controls_then_a_picture_updated_in_place():
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.display import display
    from IPython.utils.capture import capture_output

    InteractiveShell.instance()  # display() publishes through a shell
    explorer = widgets.HeadExplorer(torch.softmax(torch.randn(3, 4, 4), -1))
    with capture_output() as shown:
        display(explorer)
        explorer.controls["head"].value = 2
    controls, picture, update = shown.outputs
    assert "application/vnd.jupyter.widget-view+json" in controls.data
    assert controls.data["text/plain"] == "[controls: head = 0; run the notebook to move them]"
    assert picture.data["image/png"] and not picture.update
    assert update.update and update.transient["display_id"] == picture.transient["display_id"]
    assert update.data["image/png"] != picture.data["image/png"]
