"""`python -m src.compare`: how fast each gpu trains relative to a baseline gpu, from MLflow runs."""
