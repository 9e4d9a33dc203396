"""MLflow: the store and its client, one job's run, the spool that keeps runs through outages, and
the tracking credentials kept out of everything the project writes (credentials.py, a leaf)."""
