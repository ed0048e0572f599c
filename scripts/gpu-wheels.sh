#!/usr/bin/env bash
# The notebook stack as wheels for a GPU node whose Python (3.12) lacks it, for `scripts/gpu-checks.sh OUT DIR`:
# papermill, nbclient, nbconvert, ipykernel, scrapbook, pydantic, rich, psutil, fsspec and what they need, for
# CPython 3.12 on x86-64 Linux. What the node's own image holds and what the gate can do without are left out, so
# that the set travels small (about 18 MB): numpy, pandas and pyarrow (the image has them; two copies of one
# compiled package do not load), duckdb (the history's index: the gate's end-of-run trend says in one line that it
# could not read the history, and its verdict stands) and debugpy (ipykernel's optional debugger).
#
#   scripts/gpu-wheels.sh [DIR]    (default build/gpu-wheels)
set -euo pipefail
DIR=${1:-build/gpu-wheels}
mkdir -p "$DIR"
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any -d "$DIR" \
  papermill nbclient nbformat nbconvert ipykernel scrapbook==0.5.0 six "pydantic>=2.10,<3" rich psutil fsspec
rm -f "$DIR"/numpy-* "$DIR"/pandas-* "$DIR"/pyarrow-* "$DIR"/duckdb-* "$DIR"/debugpy-*
du -sh "$DIR"
