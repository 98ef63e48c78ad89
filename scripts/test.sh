#!/usr/bin/env bash
# Set up from scratch if needed, lint and type-check, then run the whole test suite (what .ci/run runs).
# `bash scripts/test.sh --fast`: the fast tier instead, every test but the slow ones and the fuzz at a small size
# (tests/tiers.py; 5 minutes on two quiet cores). Any other argument goes to pytest too.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
set -euo pipefail

# Lint and types first: seconds, and a failure names the line.
ruff check optigate tests benchmarks scripts app.py
ruff format --check --quiet optigate tests benchmarks scripts app.py
mypy

# Two workers: the gate and benchmark tests mostly wait on emulated endpoints. worksteal: a worker that runs out of
# tests takes some of the other's, so the suite does not end on one long file.
python -m pytest -q -n 2 --dist worksteal "$@"
