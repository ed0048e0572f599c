# The two commands of the README. Both create .venv/ on first use and reuse it after.
.PHONY: env gate test test-unit test-slow bench

env:
	@scripts/ensure-env.sh

gate: env
	.venv/bin/parity-kit gate $(DESCRIPTOR)

# Two workers, one test module each at a time: most e2e time is kernels and engines starting, which
# overlaps well on 2 cores (29 min against about 50 serially, measured in docs/figures.md).
# --no-loadscope-reorder: the modules in the order tests/conftest.py gives them (the longest first), not
# pytest-xdist's own (most tests first, which started the longest module last).
test: env
	@scripts/ensure-chromium.sh
	.venv/bin/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder -m "not slow" $(PYTEST_ARGS)

# The statistical checks too slow for every change: 20 clean runs of every semantic case of the embedded
# descriptor (the vLLM ones as fresh launches) must give 0 false failures, and every fault of the catalogue
# fails vllm-pp1 at 3 x the noise: 41 minutes on 2 cores (docs/calibration.md).
test-slow: env
	.venv/bin/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder -m slow $(PYTEST_ARGS)

# The unit tier alone (no kernels, no engines; under a minute on 2 cores): the quick loop while editing.
test-unit: env
	.venv/bin/python -m pytest tests/unit $(PYTEST_ARGS)

bench: env
	.venv/bin/python benchmarks/gate_overhead.py
