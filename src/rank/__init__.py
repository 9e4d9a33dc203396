"""Inside the processes that train: the elastic agent, each rank's timed loop, precision, batch search.

Started as processes by src/run/launch.py, never imported by the job process.
"""
