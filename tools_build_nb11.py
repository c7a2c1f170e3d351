"""Writes notebooks/11_gpt_and_bert.ipynb (sources only; `make notebooks` or nbconvert executes it)."""

import nbformat as nbf

cells = []


def md(text):
    cells.append(nbf.v4.new_markdown_cell(text.strip("\n")))


def code(text):
    cells.append(nbf.v4.new_code_cell(text.strip("\n")))


md(r"""
# 11 · GPT and BERT from the same blocks

The paper built an encoder-decoder for translation. The models most people use today keep only one half:
**decoder-only** models such as GPT (Radford et al. 2018, "Improving Language Understanding by Generative
Pre-Training"; Radford et al. 2019, "Language Models are Unsupervised Multitask Learners") and **encoder-only**
models such as BERT (Devlin et al. 2019, "BERT: Pre-training of Deep Bidirectional Transformers for Language
Understanding"). Both are stacks of the encoder layer you built in 04. What differs is the **mask** and the
**objective**.

**You will learn to**
1. say, for each of the three families, which block it stacks, which mask it uses and what it is trained to predict;
2. turn `tl.EncoderLayer` into a GPT block with one argument (the causal mask), and prove it cannot see the future;
3. train a character-level GPT on real text (the Python standard library's own source) on a CPU, measure its
   validation perplexity, and generate from it, with and without the KV cache;
4. write BERT's 80/10/10 masking recipe and train a masked language model that fills in hidden characters;
5. count the parameters of GPT-2 small and BERT-base with the library and account for every difference from
   the published figures.

**Notation** ([NOTATION.md](../NOTATION.md)): `B` batch, `T` length, `V` vocabulary size, `d_model`, `h` heads,
`d_ff`, `N` layers; token ids `(B, T)`, hidden states `(B, T, d_model)`, logits `(B, T, V)`.
""")

code(r"""
import time

import matplotlib.pyplot as plt
import torch

import transformer_lib as tl
from transformer_lib import lm, viz, widgets

tl.seed_everything(0)
torch.set_printoptions(precision=4, sci_mode=False)
""")

md(r"""
## 1. Three families, one block

| family | example | block it stacks | self-attention mask | trained to predict |
| --- | --- | --- | --- | --- |
| encoder-decoder | the paper (2017) | encoder layers + decoder layers (with cross-attention) | source: padding; target: causal & padding | the next target token, given the source and the target so far |
| decoder-only | GPT | the **encoder layer**, with a causal mask | causal | the next token, given the tokens so far |
| encoder-only | BERT | the **encoder layer** | padding only (bidirectional) | the tokens hidden by masking, given everything else |

A decoder-only model needs no cross-attention (there is no source to read), so its "decoder layer" is exactly
an encoder layer whose self-attention gets the causal mask. The pictures below are the masks of a 6-token
input (True = may attend, as everywhere in this course).
""")

code(r"""
T = 6
labels = [str(t) for t in range(T)]
masks = {
    "encoder-only (BERT): all pairs": torch.ones(T, T, dtype=torch.bool),
    "decoder-only (GPT): causal": tl.causal_mask(T)[0, 0],
}
fig, axes = plt.subplots(1, 2, figsize=(7, 3.2))
for ax, (title, mask) in zip(axes, masks.items()):
    viz.plot_mask(mask, labels, labels, title=title, ax=ax)
fig.tight_layout()
plt.show()
""")

md(r"""
**A GPT block is an encoder layer with a causal mask.** Below, one `tl.EncoderLayer` runs twice on 8 token
vectors; the second time, every vector after position 3 is replaced. With the causal mask, outputs 0-3 do not
move at all; without it, every output changes, because every position read the future.
""")

code(r"""
torch.manual_seed(0)
layer = tl.EncoderLayer(d_model=32, num_heads=4, d_ff=64, dropout=0.0).eval()
x = torch.randn(1, 8, 32)  # (B, T, d_model)
x_changed = x.clone()
x_changed[:, 4:] = torch.randn(1, 4, 32)  # positions 4-7 differ
causal = tl.causal_mask(8)  # (1, 1, T, T)
with torch.no_grad():
    gpt_change = (layer(x, causal) - layer(x_changed, causal))[:, :4].abs().max().item()
    bert_change = (layer(x) - layer(x_changed))[:, :4].abs().max().item()
print(f"largest change of outputs 0-3, causal mask:  {gpt_change:.4f}")
print(f"largest change of outputs 0-3, no mask:      {bert_change:.4f}")
assert gpt_change == 0.0 and bert_change > 0.1
""")

md(r"""
`tl.DecoderOnlyLM` and `tl.MaskedLM` (in `transformer_lib/lm.py`) are nothing more than this: token embeddings,
positions, a `tl.Encoder` stack, and the output projection tied to the embedding (paper §3.4). The decoder-only
model passes the causal mask to every layer; the masked model passes the padding mask. There is no second
attention or layer implementation.

## 2. Real text, no download: the standard library's source

Every machine that runs this notebook has a few megabytes of real, carefully written text: the `*.py` files of
Python's own standard library. `tl.PythonSourceCorpus` finds them through `sysconfig`, reads them as
characters, and splits them into train, validation and test **by file**: a file's split depends only on a hash
of its name, so no function seen in training reappears, cut into lines, in the validation text. (Splitting by
line would let the model be scored on the second half of a function whose first half it trained on.)

The numbers below depend on your Python version, which decides which files exist.
""")

code(r"""
# NBVAL_IGNORE_OUTPUT
corpus = tl.PythonSourceCorpus()
print(f"standard library: {corpus.root.name}, {sum(len(f) for f in corpus.files.values())} top-level .py files")
for split in corpus.SPLITS:
    print(f"  {split:5s}: {len(corpus.files[split]):3d} files, {len(corpus.text[split]):>9,} characters")
print(f"vocabulary: {len(corpus.vocab)} tokens (4 specials, <mask>, {len(corpus.vocab) - 5} characters)")
names = {split: {p.name for p in paths} for split, paths in corpus.files.items()}
assert not names["train"] & names["valid"] and not names["train"] & names["test"] and not names["valid"] & names["test"]
assert len(corpus.text["train"]) > 1_000_000
""")

md(r"""
**Why characters?** The vocabulary is about a hundred symbols, every string can be encoded, and the model is
small. The price is length: a context of `T` characters covers only `T` characters. GPT-2 uses byte-pair
encoding (BPE; Sennrich et al. 2016, "Neural Machine Translation of Rare Words with Subword Units"): 50,257
tokens that are frequent character sequences, so one token carries several characters, the same `T` reaches
several times further back, and the embedding table grows to 50,257 rows (section 6 counts them). Characters
seen fewer than 20 times in the training files (a few accented letters and symbols) become `<unk>`.

A training batch is `B` random windows of `T + 1` characters: the model reads the first `T` and must predict
each next one, so the target is the input shifted left by one.
""")

code(r"""
inputs, targets = corpus.batch("train", step=0, batch_size=2, length=40)
print("inputs ", tuple(inputs.shape), repr(corpus.vocab.decode(inputs[0])))
print("targets", tuple(targets.shape), repr(corpus.vocab.decode(targets[0])))
assert torch.equal(inputs[:, 1:], targets[:, :-1])
""")

md(r"""
## 3. GPT: a decoder-only language model

`tl.LMConfig.cpu_char` is a small pre-LN model (like GPT-2: the LayerNorm before each sublayer, and a final
LayerNorm after the stack) with learned position vectors, sized to train on two CPU cores in about a minute.
Before training it writes noise.
""")

code(r"""
tl.seed_everything(0)
config = tl.LMConfig.cpu_char(len(corpus.vocab))
gpt = tl.DecoderOnlyLM(config)
print(config)
print(tl.count_parameters(gpt))

prompt = torch.tensor([corpus.vocab.encode("def ")])  # (1, 4)


def sample(model, prompt, n=160, seed=0, temperature=0.8):
    choose = tl.decode.sampler(temperature=temperature, generator=torch.Generator().manual_seed(seed))
    return corpus.vocab.decode(lm.generate(model, prompt, n, choose=choose)[0])


print(sample(gpt, prompt))
""")

md(r"""
**Training.** The same `Trainer` as notebook 06 runs the steps (`lm.LanguageModelTrainer` only changes what a
batch is and which loss scores it: cross-entropy of every next character), with Adam and the warm-up then
linear decay of the CPU recipe. We measure **validation perplexity**: `exp` of the mean per-character loss on
the validation files, the number of equally likely characters the model is, in effect, choosing between. A
model that knew nothing would score the vocabulary size (about 100); the one above, untrained, scores worse than
that, because its random logits are confidently wrong. The figure quoted in the text is checked by the cell's
`assert`; training time depends on the machine (this notebook's budget is 180 s on 2 CPU cores).
""")

code(r"""
# NBVAL_IGNORE_OUTPUT
GPT_STEPS, BATCH, LENGTH = 1500, 16, 64
valid_batches = [corpus.batch("valid", step, 32, LENGTH) for step in range(8)]  # fixed validation windows
ppl_before = lm.perplexity(gpt, valid_batches)

tl.seed_everything(0)
optimizer, scheduler = tl.adam_with_warmup(gpt, lr=3e-3, warmup=100, total_steps=GPT_STEPS)
trainer = lm.LanguageModelTrainer(gpt, optimizer, scheduler)
started = time.perf_counter()
trainer.fit(lambda step: corpus.batch("train", step, BATCH, LENGTH), GPT_STEPS)
gpt_seconds = time.perf_counter() - started
ppl_after = lm.perplexity(gpt, valid_batches)
print(f"validation perplexity: {ppl_before:.1f} before, {ppl_after:.2f} after {GPT_STEPS} steps "
      f"({GPT_STEPS * BATCH * LENGTH:,} training characters, {gpt_seconds:.0f} s)")
assert ppl_after < 5.0
""")

code(r"""
fig = viz.plot_history(trainer.history, window=50, title="decoder-only LM: training loss")
plt.show()
""")

md(r"""
After training, the same prompt and the same random draws produce text with Python's shape: keywords,
indentation, names with underscores, balanced-looking brackets. It is not correct code (a 3-layer character
model sees only the last 64 characters), but every one of those habits was learned from the training files.
""")

code(r"""
# NBVAL_IGNORE_OUTPUT
print(sample(gpt, prompt))
print("-" * 60)
print(sample(gpt, torch.tensor([corpus.vocab.encode("class ")]), seed=1))
""")

md(r"""
**The KV cache.** Generation feeds one new character at a time. Without a cache, each step runs the whole
sequence so far through the model again; with `tl.KVCache` (the same class the translation decoder of 07 uses),
each layer keeps the keys and values of earlier positions and the step runs only the newest character. The tokens
must be the same either way; the time per step no longer grows with the length of the model's whole input, only
the attention over the cache does.
""")

code(r"""
# NBVAL_IGNORE_OUTPUT
prompts = torch.tensor([corpus.vocab.encode("import "), corpus.vocab.encode("    def")])  # (2, 7)
timings = {}
for use_cache in (True, False):
    started = time.perf_counter()
    out = lm.generate(gpt, prompts, 200, use_cache=use_cache)  # greedy
    timings[use_cache] = (out, time.perf_counter() - started)
same = torch.equal(timings[True][0], timings[False][0])
print(f"cached == uncached: {same}; 200 new characters: {timings[True][1]:.2f} s cached, "
      f"{timings[False][1]:.2f} s uncached ({timings[False][1] / timings[True][1]:.1f}x)")
assert same
""")

md(r"""
## 4. BERT: an encoder-only masked language model

A bidirectional encoder cannot be trained to predict the next token: every position sees it. BERT hides some
tokens and asks for them back. Devlin et al. pick 15% of the positions; of those, 80% are replaced by `<mask>`,
10% by a random token, and 10% are left as they are, and the loss counts **only the picked positions**. The
random and unchanged 10%s exist because `<mask>` never appears when the trained model is used: the model must
produce a good representation of every token it sees, not only of `<mask>`.

`lm.mask_tokens` implements the recipe (exercise 2 asks you to write it). Below, on a line of code: `█` is
`<mask>`, and the second line marks with `^` the picked positions, the only ones the loss looks at.
""")

code(r"""
line = "    return sorted(items, key=lambda item: item[1])"
ids = torch.tensor([corpus.vocab.encode(line)])  # (1, T)
specials = (corpus.vocab.pad_id, corpus.vocab.bos_id, corpus.vocab.eos_id, corpus.vocab.unk_id)
masked, picked_targets = lm.mask_tokens(ids, corpus.mask_id, len(corpus.vocab), specials, rate=0.15,
                                        generator=torch.Generator().manual_seed(3))
shown = "".join("█" if i == corpus.mask_id else corpus.vocab.itos[i] for i in masked[0].tolist())
print(line)
print(shown)
print("".join("^" if t != lm.IGNORE_INDEX else " " for t in picked_targets[0].tolist()))
""")

md(r"""
**Training the masked model.** Same corpus, same trainer, same sizes but post-LN (as BERT); each batch is
masked afresh. We measure how often the model's top guess at a `<mask>` position is the hidden character,
against the best guess that ignores the context (always the most frequent character in the training text,
the space).
""")

code(r"""
# NBVAL_IGNORE_OUTPUT
MLM_STEPS = 600
tl.seed_everything(0)
bert = tl.MaskedLM(tl.LMConfig.cpu_char(len(corpus.vocab), norm_first=False))


def masked_batch(split, step, batch_size=BATCH, length=LENGTH):
    text, _ = corpus.batch(split, step, batch_size, length)
    generator = torch.Generator().manual_seed(10_000 * (split == "valid") + step)
    return lm.mask_tokens(text, corpus.mask_id, len(corpus.vocab), specials, generator=generator)


optimizer, scheduler = tl.adam_with_warmup(bert, lr=3e-3, warmup=100, total_steps=MLM_STEPS)
mlm_trainer = lm.LanguageModelTrainer(bert, optimizer, scheduler)
mlm_trainer.fit(lambda step: masked_batch("train", step), MLM_STEPS)

bert.eval()
hits = total = baseline_hits = 0
space = corpus.vocab.stoi[" "]
with torch.no_grad():
    for step in range(8):
        inputs, targets = masked_batch("valid", step, 32)
        at_mask = inputs == corpus.mask_id  # judge the <mask> positions
        guess = bert(inputs).argmax(-1)
        hits += (guess[at_mask] == targets[at_mask]).sum().item()
        baseline_hits += (targets[at_mask] == space).sum().item()
        total += at_mask.sum().item()
mlm_accuracy, baseline = hits / total, baseline_hits / total
print(f"{total} masked validation characters: the model recovers {mlm_accuracy:.1%}, "
      f"always guessing the space recovers {baseline:.1%}")
assert mlm_accuracy > 2 * baseline
""")

md(r"""
Below, the masked model fills in a line from a validation file: the hidden characters are chosen by the model
from both sides of the gap (look at which ones it gets right, and which context it needed).
""")

code(r"""
# NBVAL_IGNORE_OUTPUT
source = corpus.text["valid"]
start = source.index("    def ", 2000)
snippet = source[start : start + LENGTH]
ids = torch.tensor([corpus.vocab.encode(snippet)])
hidden, _ = lm.mask_tokens(ids, corpus.mask_id, len(corpus.vocab), specials, rate=0.2,
                           generator=torch.Generator().manual_seed(0))
hidden[ids != hidden] = corpus.mask_id  # show every picked character as <mask> (no random swaps here)
with torch.no_grad():
    filled = torch.where(hidden == corpus.mask_id, bert(hidden).argmax(-1), hidden)
show = lambda row: "".join("█" if i == corpus.mask_id else corpus.vocab.itos[i] for i in row.tolist())
print("original:", repr(snippet))
print("masked:  ", repr(show(hidden[0])))
print("filled:  ", repr(show(filled[0])))
right = ((filled == ids) & (hidden == corpus.mask_id)).sum().item()
print(f"{right} of {(hidden == corpus.mask_id).sum().item()} masked characters recovered")
""")

md(r"""
## 5. Causal and bidirectional attention, side by side

`tl.capture_attention` records every layer's weights (07 used it on the translator). Pick a layer and head of
either model on the same line of code: every GPT map is zero above the diagonal (no position reads a later
one), while BERT's maps may use both sides. Labels: `·` is a space, `⏎` a newline. As in the earlier
notebooks, a map shows where a head's weights go, not *why* the model predicts what it does: attention weights
are not by themselves an explanation (Jain & Wallace 2019, "Attention is not Explanation"; Wiegreffe & Pinter
2019, "Attention is not not Explanation").
""")

code(r"""
text = "for key, value in items:"
ids = torch.tensor([corpus.vocab.encode(text)])
char_labels = [{" ": "·", "\n": "⏎"}.get(ch, ch) for ch in text]
maps = {}
for name, model in (("GPT", gpt), ("BERT", bert)):
    model.eval()
    with tl.capture_attention(model) as captured, torch.no_grad():
        model(ids)
    for i, (layer_name, weights) in enumerate((n, captured[n]) for n in captured.names):
        maps[f"{name} · layer {i}"] = weights[0]  # (h, T, T)
above_diagonal = torch.ones(len(text), len(text), dtype=torch.bool).triu(1)
gpt_future = max(w[:, above_diagonal].abs().max().item() for k, w in maps.items() if k.startswith("GPT"))
bert_future = min(w[:, above_diagonal].sum(-1).mean().item() for k, w in maps.items() if k.startswith("BERT"))
print(f"largest GPT weight on a later position: {gpt_future:.4f}")
print(f"BERT: smallest mean weight, over a layer's heads, that a query puts on later positions: {bert_future:.4f}")
assert gpt_future == 0.0 and bert_future > 0.05
explorer = widgets.LayerHeadExplorer(maps, char_labels, char_labels)
explorer
""")

md(r"""
## 6. GPT-2 small and BERT-base, counted

The library's configs for the published sizes are presets (`tl.LMConfig.gpt2_small()`, `tl.LMConfig.bert_base()`).
Building them on PyTorch's `meta` device allocates no memory, so we can count 124M parameters on any laptop.
""")

code(r"""
with torch.device("meta"):
    counted = {"GPT-2 small": tl.DecoderOnlyLM(tl.LMConfig.gpt2_small()),
               "BERT-base": tl.MaskedLM(tl.LMConfig.bert_base())}
for name, model in counted.items():
    parts = tl.count_parameters(model)
    print(f"{name}: {parts['total']:,} parameters")
    for part, n in parts.items():
        if part != "total":
            print(f"    {part:15s} {n:>12,}")
gpt2_total = tl.count_parameters(counted["GPT-2 small"])["total"]
bert_total = tl.count_parameters(counted["BERT-base"])["total"]
assert gpt2_total == 124_439_808
""")

md(r"""
**GPT-2 small: 124,439,808, exactly the released model.** Token embeddings 50,257 × 768 = 38,597,376; learned
positions 1,024 × 768 = 786,432; 12 blocks of 7,087,872 (attention 4 × (768 × 768 + 768), feed-forward
768 × 3,072 + 3,072 + 3,072 × 768 + 768, two LayerNorms of 2 × 768); the final LayerNorm 1,536; the output
projection is the embedding, counted once. (The GPT-2 paper's table lists its smallest model as 117M; the
released checkpoint, and everyone since, counts 124M.) GPT-2's feed-forward uses GELU where ours uses ReLU,
which changes no count.
""")

code(r"""
d, V_bert, max_pos = 768, 30522, 512
ours = bert_total
bert_model_published = 109_482_240  # BertModel (Hugging Face's bert-base-uncased): what "110M" counts
token_types, embedding_norm, pooler = 2 * d, 2 * d, d * d + d  # in BertModel, not in ours
mlm_head = d * d + d + 2 * d + V_bert  # dense, LayerNorm, output bias: ours has it, BertModel does not
print(f"ours (MaskedLM, bert_base):                 {ours:>12,}")
print(f"  + token-type embeddings (2 x 768)         {token_types:>12,}")
print(f"  + LayerNorm after the embeddings           {embedding_norm:>12,}")
print(f"  + pooler for the [CLS] token (768x768+768) {pooler:>12,}")
print(f"  - masked-LM head (dense, LayerNorm, bias)  {-mlm_head:>12,}")
reconciled = ours + token_types + embedding_norm + pooler - mlm_head
print(f"  = BertModel                                {reconciled:>12,}  (published: {bert_model_published:,})")
assert reconciled == bert_model_published
""")

md(r"""
**BERT-base: "110M" counts the encoder, not the masked-LM head.** The 12 layers are the same 7,087,872 each as
GPT-2's (BERT is post-LN, which moves the LayerNorms but adds none), and the embedding is 30,522 WordPiece
tokens × 768 plus 512 learned positions. Four pieces differ, and the cell above adds them up to the released
`BertModel`'s 109,482,240 exactly: BERT has token-type ("segment") embeddings for its sentence-pair task and
a LayerNorm right after the embeddings (our encoder starts from the scaled embeddings as the paper's does), and
a pooler layer for its next-sentence objective, which we do not train; we have the masked-LM head, which
`BertModel` leaves out of its count.

## Exercises

Each exercise has a check that compares your code with the library and names what is wrong.
Replace `raise NotImplementedError` and run the cell.

**1.** Turn an encoder layer into a GPT block: `my_gpt_block(layer, x)` gets a `tl.EncoderLayer` and token
vectors `x (B, T, d_model)`, and returns the layer's output when no position may read a later one.
""")

code(r"""
def my_gpt_block(layer, x):
    raise NotImplementedError

tl.checks.check_gpt_block(my_gpt_block)
""")

md(r"""
**2.** BERT's masking recipe: `my_mask_tokens(tokens, mask_id, vocab_size, special_ids, rate, generator)`
returns `(inputs, targets)`, both `(B, T)`: pick each position that is not a special token with probability
`rate`; of the picked ones, 80% become `mask_id`, 10% a random token (never a special token nor `mask_id`),
10% stay; `targets` holds the original token at picked positions and `lm.IGNORE_INDEX` (-100) elsewhere. Draw
all randomness from `generator`. The check runs your function on 100,000 tokens and compares the proportions.
""")

code(r"""
def my_mask_tokens(tokens, mask_id, vocab_size, special_ids, rate, generator):
    raise NotImplementedError

tl.checks.check_mask_tokens(my_mask_tokens)
""")

md(r"""
**3.** Predict the parameter count: `my_parameter_count(config)` gets an `lm.LMConfig` and returns the number
of parameters of `tl.DecoderOnlyLM(config)`, computed from the config's numbers alone (token embedding tied to
the output, learned or sinusoidal positions, `N` blocks, the final LayerNorm of a pre-LN stack). The check
tries several configs.
""")

code(r"""
def my_parameter_count(config):
    raise NotImplementedError

tl.checks.check_lm_parameter_count(my_parameter_count)
""")

md(r"""
**4.** (Think) The masked model above recovers far more hidden characters than the always-a-space guess, yet
BERT is not used to *generate* text. Why is a masked language model awkward for writing text left to right,
and what would you have to do to sample a whole line from it?

## Summary

- One block, three families: the encoder layer with a padding mask (BERT), the same layer with a causal mask
  (GPT), and encoder + decoder with cross-attention (the paper).
- A decoder-only model predicts every next token of a window at once and generates one token at a time; the KV
  cache gives the same tokens while each step runs only the newest one.
- A masked language model hides 15% of the tokens (80% `<mask>`, 10% random, 10% unchanged) and is scored only
  there; it reads both directions.
- Parameter counts follow from the config: GPT-2 small is exactly 124,439,808 in our blocks; BERT-base's 110M
  is its encoder with token types, an embedding LayerNorm and a pooler.

**Next, 10 · the paper's experiments:** which of the architecture's choices matter, measured.
""")

nb = nbf.v4.new_notebook()
nb.cells = cells
nb.metadata = {
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
}
nbf.write(nb, "notebooks/11_gpt_and_bert.ipynb")
print(f"wrote {len(cells)} cells")
