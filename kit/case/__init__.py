"""What runs inside a case kernel: resolve the case, observe with the backend, judge, write the result.

Kernel-safe like kit.core: no pydantic, rich, ray or papermill.
"""
