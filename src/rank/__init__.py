"""Inside the processes that train: the elastic agent, each rank's timed loop, precision, batch search,
the step profile after the window (step_profiler.py) and a ceilings job's probes (ceiling_probes.py).

Started as processes by src/run/launch.py, never imported by the job process.
"""
