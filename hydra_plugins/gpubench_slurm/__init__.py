"""gpubench's Hydra launcher plugin: `hydra/launcher=slurm` (see launcher.py)."""
