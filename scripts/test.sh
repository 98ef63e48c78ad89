#!/usr/bin/env bash
# Set up from scratch if needed and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
set -euo pipefail

# Two workers: the gate and benchmark tests mostly wait on emulated endpoints.
python -m pytest -q -n 2 --dist loadfile "$@"
