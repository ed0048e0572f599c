"""Kernel-safe foundations (stdlib + numpy only), one package per concern, each importable inside a case kernel.

- ``records``: the kit's files and what passes between its processes: the typed records, canonical JSON, the
  fixture, the resolved case, a run directory and what it holds, the executor-notebook contract;
- ``model``: a model folder: its digest, its config, its safetensors, a fault copy's provenance;
- ``baselines``: what a case is judged against: goldens, runtime keys, the kinds of baseline, their lineage;
- ``noise``: a case's measured noise and what it lets the gate see: calibration records and their rule, decode
  steps, drift, the false-failure budget, power, where a candidate leaves the noise, the vocabulary covered;
- ``verdict``: every judgment: the rules, scoring, decode, coverage, borrowed bounds, triage, diagnosis;
- here, the root every package shares: the kit's exceptions (``errors``), the kinds of error a case can end
  with (``outcomes``) and the exit codes (``exitcodes``).

Every kernel imports these, Levanter's on pydantic 1 included; the import rules keep them light.
"""
