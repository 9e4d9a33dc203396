"""Published results: Lambda's tables read (tables.py), what a store already holds of a published
source (imported.py), and the import itself, `python -m src.published` (__main__.py).
"""
