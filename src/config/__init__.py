"""The config: schema (dataclasses Hydra types every group against), finalising, validation.

Imported by the job process and by the ranks; imports only the leaves (errors, paths, credentials).
"""
