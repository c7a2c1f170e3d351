"""Notebook 10 · The paper's experiments: a Table 3 row of one's own, predicted before it is run."""

from transformer_lib.training.experiments import Row


def my_table3_row():
    """A row the CPU grid lacks: no dropout *and* no label smoothing. Predicted "lower", because
    each of the two changes on its own gave a lower dev perplexity than the base in the committed
    grid (rows D P_drop=0.0 and D eps_ls=0.0), and at 200 steps neither regulariser has any
    over-fitting to prevent."""
    return Row("D P_drop=0.0 eps_ls=0.0", "D", {"dropout": 0.0, "eps_ls": 0.0}), "lower"


ANSWERS = {
    "2": (
        "Dropout fights over-fitting. The paper trains for 100K steps on about 4.5M sentence "
        "pairs, long enough to "
        "start memorising its training data; without dropout its dev perplexity rises from 4.92 to "
        "5.77. Our "
        "grid trains for 200 steps on pairs drawn afresh from a huge space (section 2 counts them: "
        "nearly all "
        "distinct), so the model is still under-fitting: it has nothing to memorise yet, and "
        "dropout only hides "
        "part of each step's information and slows learning. Switching it off therefore lowers our "
        "dev "
        "perplexity (3.47 to 2.83 in the committed grid). To see the paper's direction, train on a "
        "small fixed "
        "training set (a few thousand pairs) for many passes: once the training loss keeps falling "
        "while the dev "
        "loss rises, P_drop = 0.1 should beat P_drop = 0."
    ),
}

# A typical wrong answer to each exercise, and words that the hint its check gives must contain
# (tests/test_solutions.py feeds each to the check).
WRONG_ANSWERS = {
    "my_table3_row": (lambda: (Row("base again", "C", {"d_model": 64}), "same"), "changes nothing")
}
