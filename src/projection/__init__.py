"""Projection: what a measured point would do on a GPU you do not have (docs/compare.md#projection).

model.py: the arithmetic (each class of step time scaled by the ratio that governs it); choose.py:
which measured point stands for a card (its own largest batch, or the same batch); sentences.py:
what a projected ratio is made of; cards.py: the spec sheets read. Compare's section that feeds it
runs and shows its points: src/compare/projection.py.
"""
