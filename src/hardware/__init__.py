"""The machine: NVML, device selection by gpu profile, environment capture, telemetry sampling."""
