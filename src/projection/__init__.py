"""Projection: what a measured point would do on a GPU you do not have (docs/compare.md#projection).

cards.py: a target's spec sheet; model.py: the arithmetic (each class of step time scaled by the
ratio that governs it); choose.py: which measured run stands for a target (its own largest batch,
or the same batch); runs.py: the inputs read back from MLflow; sentences.py: what a ratio is made of.
"""
