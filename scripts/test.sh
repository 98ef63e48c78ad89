#!/usr/bin/env bash
# Set up from scratch if needed and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
set -euo pipefail

python -m pytest -q "$@"
