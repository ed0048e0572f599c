# The two commands of the README. Both create .venv/ on first use and reuse it after.
.PHONY: env gate test test-unit test-slow bench

# Python's bytecode, cached in one folder of the checkout for every process these commands start (kernels, engines,
# Ray's workers, the CLI). Where PYTHONDONTWRITEBYTECODE is set, as some images set it, and the environments are
# installed without byte-compiling (scripts/ensure-env.sh: most of their modules are never imported), each process
# compiled every module it imported again: importing torch and transformers' Llama took 7.4 s of CPU, 3.2 s from
# the cache; vllm 6.5 s against 2.7 s; the gate command 1.9 s against 0.7 s (benchmarks/kernel_imports.py
# --bytecode, docs/figures.md). A prefix of one's own is kept.
export PYTHONPYCACHEPREFIX ?= $(CURDIR)/.cache/pycache
unexport PYTHONDONTWRITEBYTECODE

env:
	@scripts/ensure-env.sh

gate: env
	.venv/bin/parity-kit gate $(DESCRIPTOR)

# Two workers, one test module each at a time: most e2e time is kernels and engines starting, which
# overlaps well on 2 cores (29 min against about 50 serially, measured in docs/figures.md).
# --no-loadscope-reorder: the modules in the order tests/conftest.py gives them (the longest first), not
# pytest-xdist's own (most tests first, which started the longest module last). Every run ends with its 30
# slowest tests and (tests/conftest.py) its slowest modules: where the suite's time goes, on the host that ran it.
test: env
	@scripts/ensure-chromium.sh
	.venv/bin/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder -m "not slow" --durations=30 $(PYTEST_ARGS)

# The statistical checks too slow for every change: 20 clean runs of every semantic case of the embedded
# descriptor (the vLLM ones as fresh launches) must give 0 false failures, and every fault of the catalogue
# fails vllm-pp1 at 3 x the noise: 41 minutes on 2 cores (docs/calibration.md). Also the long runs whose property
# `make test` keeps with fewer cases: the clean variants' further launches and levanter-unpadded, and the
# embedded gate's other four cases on Ray (docs/figures.md, The suite under 15 minutes).
test-slow: env
	.venv/bin/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder -m slow $(PYTEST_ARGS)

# The unit tier alone (no kernels, no engines): the quick loop while editing. About 6 minutes of CPU on 2 cores;
# PYTEST_ARGS="-n 2" runs it on two workers in about 3.
test-unit: env
	.venv/bin/python -m pytest tests/unit $(PYTEST_ARGS)

bench: env
	.venv/bin/python benchmarks/gate_overhead.py
