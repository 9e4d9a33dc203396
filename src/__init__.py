"""gpubench. This root holds the entry points (train, doctor, sync, server; commands.py puts them on
PATH; compare's and the import's are src/compare/__main__.py and src/published/__main__.py) and the
leaves every package imports (console, errors, paths). Everything else lives in the package of its
concern; docs/architecture.md maps them."""
