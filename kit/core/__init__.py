"""Kernel-safe foundations (stdlib + numpy only): records, fixture, golden, scoring, diagnosis, results and
verdicts, exit codes, run-directory names, the executor-notebook contract, canonical JSON, errors.

Every kernel imports these, Levanter's on pydantic 1 included; the import rules keep them light.
"""
