# The two commands of the README. Both create .venv/ on first use and reuse it after.
.PHONY: env gate test bench

env:
	@scripts/ensure-env.sh

gate: env
	.venv/bin/parity-kit gate $(DESCRIPTOR)

test: env
	@scripts/ensure-chromium.sh
	.venv/bin/python -m pytest $(PYTEST_ARGS)

bench: env
	.venv/bin/python benchmarks/gate_overhead.py
