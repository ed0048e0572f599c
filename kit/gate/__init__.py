"""One gate run: preflight, the executors (local, Ray), the papermill runner with timeouts, resume, the run
lock, and the run's artifacts (result, evidence, JUnit, summary).
"""
