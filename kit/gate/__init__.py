"""One gate run: preflight, the executors (local, Ray), resume, and the run's artifacts (result, evidence, JUnit,
summary). What it runs on (the papermill runner, the stop on a signal, the GPUs, the run lock) is kit.run's.
"""
