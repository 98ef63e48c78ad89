#!/usr/bin/env bash
# Idempotent setup for a fresh machine: a Python 3.11 venv with optigate and its dev extras, and
# the Node tooling (Node 22 and the CDK CLI) installed locally from package-lock.json.
# Source it: `. scripts/setup.sh` leaves the venv active and node_modules/.bin on PATH.
# OPTIGATE_SETUP=pipeline (what the promotion pipelines' synth steps set): optigate with the `check` extra (cfn-lint,
# for `optigate check`) and the Node tooling only: no test kit, no fmeval environment; the pipelines run no tests.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate

mode="${OPTIGATE_SETUP:-dev}"
case "$mode" in
  dev) extras="dev" ;;
  pipeline) extras="check" ;;
  *) echo "optigate setup: OPTIGATE_SETUP=$mode: expected dev (the default) or pipeline" >&2; return 2 2>/dev/null || exit 2 ;;
esac
# Reinstall only when the dependency declarations (or the mode) change.
stamp=".venv/.optigate-installed"
wanted="$( (echo "$mode"; cat pyproject.toml package-lock.json) | sha256sum | cut -d' ' -f1)"
# A first-time setup takes minutes: say so, and say each step as it starts (also in a CI log).
setup_step() { echo "optigate setup: $* ($(date +%H:%M:%S))" >&2; }
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$wanted" ] || [ ! -x node_modules/.bin/cdk ]; then
  setup_step "first-time setup (or changed dependencies): about 5 minutes on two cores with pip's cache warm, 4 GB on disk"
  setup_step "1/3 Python packages into .venv (about 1.8 GB)"
  python -m pip install --quiet --upgrade pip
  python -m pip install --quiet -e ".[$extras]"
  setup_step "2/3 Node 22 and the AWS CDK CLI into node_modules (npm ci, about 0.2 GB)"
  npm ci --no-audit --no-fund --loglevel=error
  echo "$wanted" > "$stamp"
fi

# fmeval lives in its own environment (see optigate/containers/evaluate/requirements.txt for why); the tests use it.
eval_stamp=".venv-eval/.optigate-installed"
eval_wanted="$(cat optigate/containers/evaluate/requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)"
if [ "$mode" = dev ] && { [ ! -f "$eval_stamp" ] || [ "$(cat "$eval_stamp")" != "$eval_wanted" ]; }; then
  setup_step "3/3 fmeval and its CPU-only torch into .venv-eval (about 2.1 GB)"
  [ -x .venv-eval/bin/python ] || "$PYTHON" -m venv .venv-eval
  .venv-eval/bin/python -m pip install --quiet --upgrade pip
  .venv-eval/bin/python -m pip install --quiet -r optigate/containers/evaluate/requirements.txt
  .venv-eval/bin/python -m pip install --quiet --no-deps -e .
  echo "$eval_wanted" > "$eval_stamp"
fi
export OPTIGATE_EVAL_PYTHON="$PWD/.venv-eval/bin/python"

export PATH="$PWD/node_modules/.bin:$PATH"
# Offline and quiet: no instance-metadata probing, no notices or telemetry calls from the CDK CLI.
export AWS_EC2_METADATA_DISABLED=true
export CDK_DISABLE_CLI_TELEMETRY=true
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION=1
set +eu
