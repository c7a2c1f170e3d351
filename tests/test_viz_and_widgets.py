"""Pictures and widgets, without a browser: each widget is driven by setting a control's
``.value``."""

import matplotlib

matplotlib.use("Agg")

import copy
import json

import pytest
import torch
from matplotlib.figure import Figure

import transformer_lib as tl
from transformer_lib import viz, widgets


def test_every_plot_returns_a_figure():
    weights = torch.softmax(torch.randn(4, 5, 6), -1)
    task = tl.CopyTask(num_test=5)
    trainer_history = tl.train.History(
        loss=[3.0, 2.0, 1.0] * 10, token_accuracy=[0.1, 0.5, 0.9] * 10, lr=[1e-3] * 30
    )
    mha, x = tl.MultiHeadAttention(8, 2), torch.randn(1, 3, 8)
    with tl.trace_shapes(mha) as trace:
        mha(x, x, x)
    figures = [
        viz.plot_attention(weights[0], list("abcde"), list("uvwxyz"), title="t", highlight_query=1),
        viz.plot_heads(weights),
        viz.plot_mask(tl.causal_mask(4)[0, 0]),
        viz.plot_positional_encoding(tl.sinusoidal_encoding(d_model=16, max_len=20), pair=0),
        viz.plot_encoding_curves(tl.sinusoidal_encoding(d_model=16, max_len=20)),
        viz.plot_encoding_pair(tl.sinusoidal_encoding(d_model=16, max_len=20), pair=3),
        viz.plot_mask_and_weights(tl.causal_mask(3)[0, 0], torch.eye(3), ["a", "b", "c"]),
        viz.plot_heads(weights, vmax="own"),
        viz.plot_schedule({"a": [tl.noam_lr(s, 64, 10) for s in range(1, 50)]}),
        viz.plot_label_smoothing(
            tl.smoothed_targets(torch.tensor([4, 5]), len(task.vocab), 0.1), task.vocab.itos
        ),
        viz.plot_history(trainer_history, window=5),
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
    with pytest.raises(ValueError, match=r"pair must be in 0..7 for d_model=16, got 8"):
        viz.plot_encoding_pair(tl.sinusoidal_encoding(d_model=16, max_len=20), pair=8)


def drawn_texts(fig) -> list[str]:
    """Every piece of text on a figure: titles, tick labels, annotations."""
    return [t.get_text() for t in fig.findobj(matplotlib.text.Text)]


def test_token_labels_never_start_mathtext():
    title = viz.plain("wrote '$' so far '29$'")
    fig = viz.plot_attention(torch.eye(3), ["^", "$", "a"], ["x$", "$y", "$"], title=title)
    fig.canvas.draw()  # mathtext would parse "$', so far '29$" as math and render it in italics
    rendered = drawn_texts(fig)
    assert r"\$" in rendered and "wrote '\\$' so far '29\\$'" in rendered
    for text in fig.findobj(matplotlib.text.Text):
        if "$" in text.get_text():
            assert not text._preprocess_math(text.get_text())[1], (
                text.get_text()
            )  # drawn as plain text
    matplotlib.pyplot.close("all")


def test_heat_maps_have_a_colour_bar_and_a_shared_or_own_scale():
    weights = torch.full((4, 4), 0.25)  # a perfectly flat map
    shared = viz.plot_attention(weights, vmax=1.0, colorbar=True)
    own = viz.plot_attention(weights, colorbar=True)
    assert len(shared.axes) == 2 and len(own.axes) == 2  # the map and its colour bar
    assert shared.axes[0].images[0].get_clim() == (0, 1.0)  # flat looks flat on the shared scale
    assert own.axes[0].images[0].get_clim() == (0, 0.25)
    grid = viz.plot_heads(torch.rand(8, 5, 5), vmax=1.0)
    assert len(grid.axes) == 8 + 1  # one colour bar for the whole grid
    assert len(viz.plot_heads(torch.rand(8, 5, 5), vmax="own").axes) == 8 + 8
    matplotlib.pyplot.close("all")


def test_widget_pictures_are_retina_pngs():
    explorer = widgets.HeadExplorer(torch.softmax(torch.randn(2, 4, 4), -1))
    image = explorer._image()
    pixel_width = int.from_bytes(explorer.png[16:20], "big")  # from the PNG header
    assert image.width == pixel_width // 2  # shown at half its pixel width: sharp on a HiDPI screen
    with pytest.raises(ValueError, match="the trace recorded no module calls"):
        viz.plot_shape_flow(tl.inspection.ShapeTrace())


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
    assert changed(explorer, "scale", "own")
    assert torch.equal(explorer.state["weights"], weights[2])
    explorer.controls["head"].value = 7
    assert explorer.state["head"] == 2


def test_head_count_explorer_changes_d_k():
    explorer = widgets.HeadCountExplorer(torch.randn(5, 8))
    assert list(explorer.controls["num_heads"].options) == [1, 2, 4, 8]
    assert changed(explorer, "num_heads", 4)
    assert explorer.state["d_k"] == 2 and explorer.state["weights"].shape == (4, 5, 5)


def test_a_control_with_one_possible_value_is_hidden():
    one_head = widgets.HeadExplorer(torch.softmax(torch.randn(1, 4, 4), -1))
    assert one_head.controls["head"].layout.display == "none"
    assert one_head.controls["scale"].layout.display is None
    one_layer = widgets.LayerHeadExplorer({"layers.0": torch.softmax(torch.randn(2, 3, 3), -1)})
    assert (
        one_layer.controls["layer"].layout.display == "none"
        and one_layer.controls["head"].layout.display is None
    )


def test_labels_are_never_truncated():
    explorer = widgets.TemperatureExplorer(torch.tensor([1.0, 0.0]))
    assert explorer.controls["temperature"].style.description_width == "initial"


def test_mask_builder_toggles():
    builder = widgets.MaskBuilder(["I", "am", "<pad>"])
    assert builder.state["mask"][:, 2].sum() == 0  # nobody attends to the padding
    assert changed(builder, "causal", True)
    assert builder.state["mask"].tolist() == [
        [True, False, False],
        [True, True, False],
        [True, True, False],
    ]
    assert changed(builder, "padding", False)
    assert builder.state["mask"][2, 2]
    torch.testing.assert_close(builder.state["weights"].sum(-1), torch.ones(3))
    _, expected = tl.scaled_dot_product_attention(
        builder.q, builder.k, builder.k, builder.state["mask"]
    )
    torch.testing.assert_close(
        builder.state["weights"], expected
    )  # the library's weights, not a copy


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
    assert list(explorer.KINDS) == [
        "self",
        "masked self",
        "cross",
    ]  # tl.inspection.attention_kind's names
    assert explorer.controls["layer"].max == 1 and explorer.controls["head"].max == 3
    assert explorer.state["weights"].shape[1] == len(
        "3 march 1987"
    )  # cross: keys are source characters
    for control, value in (
        ("head", 3),
        ("layer", 1),
        ("query", 2),
        ("scale", "own"),
        ("kind", "self"),
    ):
        assert changed(explorer, control, value), control
    assert explorer.controls["query"].max == len("3 march 1987") - 1
    assert changed(explorer, "text", "1 may 2001")
    assert explorer.state["weights"].shape == (len("1 may 2001"), len("1 may 2001"))
    assert explorer.controls["query"].max == len("1 may 2001") - 1


def test_attention_explorer_says_what_is_wrong_with_a_source_and_stays_alive(date_model):
    model, vocab = date_model
    explorer = widgets.AttentionExplorer(model, vocab, "3 march 1987", max_len=8)
    picture = explorer.png
    explorer.controls["text"].value = ""
    assert (
        explorer.error.startswith("the source is empty")
        and "the source is empty" in explorer.message.value
    )
    assert explorer.png == picture  # the last good picture stays
    explorer.controls["text"].value = "3 march 1987 @"
    assert "'@'" in explorer.error and "Cannot draw this" in explorer.message.value
    assert changed(explorer, "head", 1)  # the controls still work, on the last good text
    assert changed(explorer, "text", "4 may 1999")
    assert explorer.error is None and explorer.message.value == ""
    with pytest.raises(ValueError, match="kind must be one of"):
        widgets.AttentionExplorer(model, vocab, "3 may 1999", kind="encoder self")


def test_decoding_widgets_label_decoder_rows_by_one_rule(date_model):
    model, vocab = date_model
    attention = widgets.AttentionExplorer(
        model, vocab, "3 march 1987", kind="masked self", max_len=6
    )
    decoding = widgets.DecodingExplorer(model, vocab, "3 march 1987", max_len=6)
    rows = attention.draw().axes[0].get_yticklabels()
    assert [t.get_text() for t in rows][: len(decoding.row_labels)] == [
        viz.plain(r) for r in decoding.row_labels
    ]
    assert decoding.row_labels[0].startswith("^→")
    matplotlib.pyplot.close("all")


def test_decoding_explorer_steps_through_the_output(date_model):
    model, vocab = date_model
    explorer = widgets.DecodingExplorer(model, vocab, "3 march 1987", max_len=6)
    assert explorer.controls["step"].max == len(explorer.tokens) == explorer.rows.size(0)
    assert explorer.state["labels"][1:] == [""] * (
        len(explorer.tokens) - 1
    )  # rows not written are unlabelled
    assert changed(explorer, "step", 3)
    assert explorer.state["written"] == "".join(explorer.tokens[:3])
    assert (
        explorer.state["labels"][:3] == explorer.row_labels[:3]
        and explorer.state["labels"][3] == ""
    )
    torch.testing.assert_close(explorer.state["row"].sum(), torch.tensor(1.0))


# --- Devices: a widget that runs a model builds its inputs where the model is (GUIDE §10)


def guard_devices(model: torch.nn.Module) -> list:
    """Forward pre-hooks on every submodule of ``model`` that raise when a tensor argument is not
    on the device of the model's parameters: a clear AssertionError at the first call that mixes
    devices. Returns the hook handles (remove them after)."""
    device = next(model.parameters()).device

    def check(module, args, kwargs):
        for value in (*args, *kwargs.values()):
            if isinstance(value, torch.Tensor):
                assert value.device == device, (
                    f"{type(module).__name__} got a tensor on {value.device}; the model is on "
                    f"{device}"
                )

    return [m.register_forward_pre_hook(check, with_kwargs=True) for m in model.modules()]


def attention_explorer_reading_a_new_source(model, vocab) -> widgets.FigureWidget:
    explorer = widgets.AttentionExplorer(model, vocab, "3 march 1987", max_len=6)
    assert changed(explorer, "text", "1 may 2001")  # a new source: the fault a reader found
    assert all(m.device.type == "cpu" for maps in explorer._maps.values() for m in maps)
    return explorer


def decoding_explorer_stepping(model, vocab) -> widgets.FigureWidget:
    explorer = widgets.DecodingExplorer(model, vocab, "3 march 1987", max_len=6)
    assert changed(explorer, "step", 2) and explorer.rows.device.type == "cpu"
    return explorer


def head_count_explorer_changing_h(model, vocab) -> widgets.FigureWidget:
    x = torch.randn(5, 8, device=next(model.parameters()).device)  # (T, d_model), as a model's
    explorer = widgets.HeadCountExplorer(x)
    assert changed(explorer, "num_heads", 4)  # its own attention, built beside x
    return explorer


DRIVERS = [
    attention_explorer_reading_a_new_source,
    decoding_explorer_stepping,
    head_count_explorer_changing_h,
]


def assert_drawn_from_cpu_tensors(explorer: widgets.FigureWidget) -> None:
    assert explorer.error is None and explorer.png
    tensors = [v for v in explorer.state.values() if isinstance(v, torch.Tensor)]
    assert tensors and all(t.device.type == "cpu" for t in tensors), explorer.state


@pytest.mark.parametrize("drive", DRIVERS)
def test_model_widgets_build_their_inputs_on_the_models_device_not_the_default(
    tiny_date_model, drive
):
    """A learner's model may be on cuda or mps while torch's default device is the CPU; a widget
    that built its inputs on the default device would hand the model CPU tensors. This machine has
    one real device, so the test turns the case around: the model stays on the CPU and the default
    device becomes ``meta`` (tensors with no data), so a tensor that a widget makes without naming
    the model's device lands on ``meta``, and the guard, or torch itself, raises. What the
    picture is drawn from is on the CPU, ready for matplotlib and for a snapshot."""
    model, vocab = tiny_date_model
    handles = guard_devices(model)
    try:
        with torch.device("meta"):
            explorer = drive(model, vocab)
    finally:
        for handle in handles:
            handle.remove()
    assert_drawn_from_cpu_tensors(explorer)


@pytest.mark.skipif(tl.pick_device().type == "cpu", reason="needs a second device: cuda or mps")
@pytest.mark.parametrize("drive", DRIVERS)
def test_model_widgets_run_a_model_on_cuda_or_mps(tiny_date_model, drive):
    """The case itself, where there is a GPU or a Mac: the model on ``tl.pick_device()``, torch's
    default device the CPU."""
    model, vocab = tiny_date_model
    assert_drawn_from_cpu_tensors(drive(copy.deepcopy(model).to(tl.pick_device()), vocab))


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


# --- The static site: every widget enumerates its own frames, and travels in the notebook as a JSON


@pytest.fixture(scope="module")
def tiny_date_model():
    """One layer, two heads: few enough frames for a quick enumeration."""
    tl.seed_everything(0)
    task = tl.DateTask(num_test=10)
    config = tl.TransformerConfig.cpu_tiny(len(task.vocab)).replace(num_heads=2)
    return tl.Transformer(config).eval(), task.vocab


def site_widgets(model, vocab) -> dict:
    """One of each widget class, small, with the number of frames the site must get from it."""
    pe = widgets.PositionalEncodingExplorer(max_len=20, d_model=16)
    pe.SITE_D_MODELS = (16, 32)  # pair i: 8 values at d_model 16, 16 (of 16) at d_model 32
    schedule = widgets.ScheduleExplorer(steps=300)
    schedule.SITE = {
        "d_model": (64, 128),
        "warmup": (100, 200),
    }  # and the current 512 and 4000: 3 x 3
    return {
        "temperature": (
            widgets.TemperatureExplorer(torch.tensor([2.0, 1.0, 0.1])),
            61,
        ),  # every value of one slider
        "head": (
            widgets.HeadExplorer(torch.softmax(torch.randn(3, 4, 4), -1)),
            3 * 2,
        ),  # heads x colour scales
        "layer_head": (
            widgets.LayerHeadExplorer(
                {f"layers.{i}": torch.softmax(torch.randn(2, 3, 3), -1) for i in range(2)}
            ),
            2 * 2 * 2,
        ),
        "head_count": (widgets.HeadCountExplorer(torch.randn(5, 8)), 4 * 2),  # h in 1, 2, 4, 8
        "mask": (widgets.MaskBuilder(["a", "b", "<pad>"]), 2 * 2),
        "positional": (pe, 8 + 16),
        "schedule": (schedule, 3 * 3),
        # the text stays, the query stays (see AttentionExplorer.site_values), one layer is one
        # value
        "attention": (widgets.AttentionExplorer(model, vocab, "3 may 1999", max_len=6), 3 * 2 * 2),
        "decoding": (
            widgets.DecodingExplorer(model, vocab, "3 may 1999", max_len=4),
            None,
        ),  # steps x 2
        "rotary": (
            widgets.RotaryPairExplorer(torch.tensor([1.0, 0.2] * 4), max_position=7),
            8 * 4,
        ),  # position x pair
    }


def set_values(widget, values: dict) -> None:
    for name, value in values.items():  # in the controls' order, as frames() sets them
        widget.controls[name].value = value


def test_every_widget_enumerates_distinct_frames_equal_to_what_it_shows(tiny_date_model):
    model, vocab = tiny_date_model
    assert {type(widget) for widget, _ in site_widgets(model, vocab).values()} == {
        getattr(widgets, name)
        for name in widgets.__all__
        if isinstance(getattr(widgets, name), type)
        and getattr(widgets, name) is not widgets.FigureWidget
    }, "a widget class without a case here"
    for case, (widget, count) in site_widgets(model, vocab).items():
        start, start_png = widget.values(), widget.png
        frames = list(widget.frames())
        if case == "decoding":
            count = len(widget.tokens) * 2
        assert len(frames) == count, case
        for scale in (
            "shared",
            "own",
        ):  # a map whose largest weight is 1 looks the same on both scales
            pictures = [png for values, png in frames if values.get("scale", "shared") == scale]
            assert len(set(pictures)) == len(pictures), f"{case}: two frames with the same picture"
        assert len({tuple(values.items()) for values, _ in frames}) == count, case
        assert widget.values() == start and widget.png == start_png, (
            f"{case}: frames() left the controls moved"
        )
        assert start in [values for values, _ in frames], (
            f"{case}: the first picture is one of the frames"
        )
        as_saved = json.loads(json.dumps(widget.snapshot(), sort_keys=True))  # nbformat sorts keys
        fresh = widgets.FigureWidget.restore(as_saved)
        for values, png in frames[:: 6 if count > 20 else 1]:
            set_values(fresh, values)
            assert fresh.png == png, f"{case}: the frame for {values} is not what the widget shows"
    matplotlib.pyplot.close("all")


def test_pair_frames_follow_the_bound_that_d_model_sets():
    explorer = widgets.PositionalEncodingExplorer(max_len=20, d_model=16)
    explorer.SITE_D_MODELS = (16, 32)
    pairs = {d: [v["pair"] for v, _ in explorer.frames() if v["d_model"] == d] for d in (16, 32)}
    assert pairs == {16: list(range(8)), 32: list(range(16))}


def test_sliders_offer_at_most_site_steps_values_with_their_ends_and_current_value():
    explorer = widgets.ScheduleExplorer(steps=100)
    assert explorer.site_values("warmup") == [100, 500, 1000, 2000, 3000, 4000, 6000, 8000, 10000]
    head = widgets.HeadExplorer(torch.softmax(torch.randn(40, 3, 3), -1))
    head.controls["head"].value = 7
    values = head.site_values("head")
    assert (
        values[0] == 0 and values[-1] == 39 and 7 in values and len(values) == head.SITE_STEPS + 1
    )
    assert (
        widgets.control_values(widgets.TemperatureExplorer(torch.zeros(2)).controls["temperature"])[
            30
        ]
        == 1.0
    )


def test_a_snapshot_is_small_json_and_restores_the_same_widget(tiny_date_model):
    model, vocab = tiny_date_model
    explorer = widgets.AttentionExplorer(
        model, vocab, "3 march 1987", kind="masked self", max_len=8
    )
    explorer.controls["head"].value = 1
    snapshot = json.loads(
        json.dumps(explorer.snapshot(), sort_keys=True)
    )  # as the notebook file holds it
    assert snapshot["class"] == "AttentionExplorer" and "model" not in snapshot["data"]
    assert len(json.dumps(snapshot)) < 100_000
    restored = widgets.FigureWidget.restore(snapshot)
    assert type(restored) is widgets.AttentionExplorer and restored.values() == explorer.values()
    assert list(restored.controls) == list(explorer.controls) and list(restored._maps) == list(
        explorer._maps
    )
    assert restored.png == explorer.png and restored.caption.value == explorer.caption.value
    torch.testing.assert_close(restored.state["weights"], explorer.state["weights"], rtol=0, atol=0)
    restored.controls["text"].value = "4 may 1999"  # needs the model, which stayed in the kernel
    assert "has no model" in restored.error and restored.png == explorer.png
    assert changed(restored, "head", 0)  # the controls stay alive
    with pytest.raises(ValueError, match="no widget class 'Image'"):
        widgets.FigureWidget.restore({**snapshot, "class": "Image"})
    with pytest.raises(ValueError, match="re-execute the notebook"):
        widgets.FigureWidget.restore({**snapshot, "version": 0})


def test_the_snapshot_rides_in_output_metadata_which_nbval_never_compares():
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.display import display
    from IPython.utils.capture import capture_output

    InteractiveShell.instance()
    builder = widgets.MaskBuilder(["a", "<pad>"])
    with capture_output() as shown:
        display(builder)
    controls, picture = shown.outputs
    assert set(controls.data) == {
        "application/vnd.jupyter.widget-view+json",
        "text/plain",
    }  # as before
    assert controls.metadata[widgets.SNAPSHOT_KEY] == builder.snapshot()
    assert widgets.SNAPSHOT_KEY not in (picture.metadata or {})


def test_head_count_explorer_leaves_the_learners_random_stream_alone():
    from transformer_lib import widgets

    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    explorer = widgets.HeadCountExplorer(torch.randn(5, 8))
    torch.manual_seed(123)
    explorer.controls["num_heads"].value = 4  # redraws with freshly seeded weights
    assert explorer.state["num_heads"] == 4
    assert torch.equal(torch.rand(3), expected)


def test_rotary_pair_score_depends_only_on_the_offset():
    vector = torch.tensor([1.0, 0.2] * 4)  # d_k = 8: four pairs
    explorer = widgets.RotaryPairExplorer(vector, key_position=2)
    explorer.controls["pair"].value = 1
    explorer.controls["position"].value = 5  # offset 3 from the key
    assert explorer.state == {"position": 5, "pair": 1}

    def score(figure):
        return figure.axes[0].get_title().split("score ")[1]

    offset_3 = viz.plot_rotary_pair(vector, 1, [5], key_position=2)
    assert score(offset_3) == score(viz.plot_rotary_pair(vector, 1, [13], key_position=10))
    assert score(offset_3) != score(viz.plot_rotary_pair(vector, 1, [6], key_position=2))
    with pytest.raises(ValueError, match="pair must be in 0..3"):
        viz.plot_rotary_pair(vector, 4, [0])
    with pytest.raises(ValueError, match="even width"):
        widgets.RotaryPairExplorer(torch.ones(7))
    matplotlib.pyplot.close("all")


def test_attention_explorer_reads_a_subword_vocab_with_readable_labels():
    """Notebook 12: the explorer on the shipped English-French model and its byte-level BPE
    vocabulary. Labels are the pieces' text with · for a leading space (never BPE's raw Ġ); bad
    sources get a message in the cell; a snapshot restores the same widget, and its frames are what
    it draws."""
    from transformer_lib.applications import translation

    model, vocab = translation.load_translator(translation.shipped_model_dir())
    explorer = widgets.AttentionExplorer(
        model, vocab, "Tom doesn’t like cats.", max_len=40
    )  # a curly apostrophe
    source = explorer._labels["source"]
    assert (
        "".join(source).replace("·", " ") == "Tom doesn't like cats."
    )  # normalised as translate() reads it
    assert "·like" in source and not any(
        "Ġ" in label for label in source + explorer._labels["decoder"]
    )
    assert (
        explorer.translation == translation.translate(model, vocab, ["Tom doesn’t like cats."])[0]
    )
    assert explorer.controls["head"].max == model.config.num_heads - 1
    explorer.controls["text"].value = "   "
    assert explorer.error.startswith("the source is empty") and "a sentence" in explorer.error
    explorer.controls["text"].value = "word " * 300
    assert "tokens; this model reads at most 256" in explorer.error
    explorer.controls[
        "text"
    ].value = "東京 and 🍕."  # unseen characters: spelled with byte tokens, drawn
    assert explorer.error is None and any(
        label.startswith("<0x") for label in explorer._labels["source"]
    )
    restored = widgets.FigureWidget.restore(json.loads(json.dumps(explorer.snapshot())))
    assert restored.values() == explorer.values() and restored.png == explorer.png
    for values, png in restored.frames():
        assert png and values["text"] == "東京 and 🍕."
