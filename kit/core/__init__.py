"""Kernel-safe foundations (stdlib + numpy only), one package per concern, each importable inside a case kernel.

Top to bottom, each importing only those below it (the core-layers contract of .importlinter):

- ``verdict``: every judgment: scoring, decode, a case judged from its evidence, coverage, borrowed bounds,
  triage, the paired comparison, diagnosis;
- ``baselines``: what a case is judged against: goldens, the kinds of baseline, their lineage;
- ``noise``: a case's measured noise and what it lets the gate see: calibration records and their rule, decode
  steps, drift, the false-failure budget, power, where a candidate leaves the noise, the vocabulary covered;
- ``model`` and ``host``, side by side: a model folder (its digest, its config, its safetensors, a fault copy, a
  fixture made with its tokenizer), and the host a result's bits depend on (its fingerprint, runtime keys, the
  portable result);
- ``records``: the kit's files and what passes between its processes: the typed records, canonical JSON, the
  fixture, the resolved case, a run directory and what it holds, the executor-notebook contract;
- ``rules``: each rule of the verdict as a function of numbers, the failure it makes, and every figure derived
  from a bound (headroom, severity, margin);
- here, the root every package shares: the kit's exceptions (``errors``), the exit codes (``exitcodes``) and the
  kinds of error a case can end with (``outcomes``).

Every kernel imports these, Levanter's on pydantic 1 included; the import rules keep them light.
"""
