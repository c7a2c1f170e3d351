"""Notebook 10 · The paper's experiments: a Table 3 row of one's own, predicted before it is run."""

from transformer_lib.experiments import Row


def my_table3_row():
    """A row the CPU grid lacks, (C) ``d_ff = 512``: twice the base's feed-forward width, and the prediction
    "lower", because the grid's larger models (``d_ff = 1024``, ``d_model = 128``) reached a lower dev
    perplexity than the base within the same 200 steps."""
    return Row("C d_ff=512", "C", {"d_ff": 512}), "lower"


ANSWERS = {
    "2": (
        "The paper trains for 100K steps on 4.5M sentence pairs, long enough to over-fit: dropout is there to stop "
        "the model from memorising its training set, so without it (P_drop = 0) the dev perplexity rises from 4.92 "
        "to 5.77. Our grid draws a fresh batch of programs and strings at every step from a space far larger than "
        "the 200 x 32 pairs it sees, so it never sees a pair twice and cannot over-fit; within 200 steps the model "
        "is still under-fitting, and dropout only adds noise to the gradient and hides information from each step. "
        "Switching it off therefore helps at this budget. To see the paper's direction we would need a small, "
        "fixed training set and many passes over it (then the dev perplexity of P_drop = 0 would rise while the "
        "training loss keeps falling)."
    ),
}
