"""MLflow: the store and its client, one job's run, and the spool that keeps runs through outages."""
