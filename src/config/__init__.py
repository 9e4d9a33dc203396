"""The config: each group's schema and checks (groups/), the root schema, finalising, validation.

Imported by the job process and by the ranks; imports only the leaves (errors, paths,
tracking/credentials.py, results/).
"""
