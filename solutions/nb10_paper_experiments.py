"""Notebook 10 · The paper's experiments: a Table 3 row of one's own, predicted before it is run."""

from transformer_lib.applications.experiments import Row


def my_table3_row():
    """A row the CPU grid lacks: no dropout *and* no label smoothing. Predicted "lower", because
    each of the two changes on its own gave a lower dev perplexity than the base in the committed
    grid (rows D P_drop=0.0 and D eps_ls=0.0): label smoothing keeps probability on wrong tokens,
    which perplexity counts against it, and (the notebook's hypothesis, not tested by the grid)
    at 200 steps there is no over-fitting for dropout to prevent."""
    return Row("D P_drop=0.0 eps_ls=0.0", "D", {"dropout": 0.0, "eps_ls": 0.0}), "lower"


ANSWERS = {
    "2": (
        "Dropout fights over-fitting. The paper trains for 100K steps on about 4.5M sentence pairs "
        "(WMT 2014 English-German); without dropout its dev perplexity rises from 4.92 to 5.77. "
        "Our grid trains for 200 steps on pairs drawn afresh (section 2 counts them: 6398 of 6400 "
        "distinct), and switching dropout off lowers our dev perplexity (3.275 to 2.765 in the "
        "committed grid). The hypothesis: our model is still under-fitting, has nothing to "
        "memorise yet, and dropout only hides part of each step's information. To test it, make "
        "over-fitting possible: train on a small fixed training set (a few thousand pairs) for "
        "many passes, and record the training loss next to the dev loss for P_drop = 0 and 0.1, "
        "several seeds each. Support for the hypothesis: without dropout the training loss keeps "
        "falling while the dev loss turns up (a growing train/dev gap), and P_drop = 0.1 ends with "
        "the lower dev perplexity, by a difference that a paired test over the seeds supports; if "
        "P_drop = 0 still wins with no gap, "
        "the hypothesis is wrong."
    ),
}

# A typical wrong answer to each exercise, and words that the hint its check gives must contain
# (tests/test_solutions.py feeds each to the check).
WRONG_ANSWERS = {
    "my_table3_row": (lambda: (Row("base again", "C", {"d_model": 64}), "same"), "changes nothing")
}
