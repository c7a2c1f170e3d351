"""Tasks and training: vocabularies, tasks and corpora, batches, the trainer, experiments.

Modules: ``data``, ``train``, ``experiments``, ``runtime``, ``parallel``, ``subwords``,
``length_batching``, ``translation_corpus``.
"""
