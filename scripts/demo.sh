#!/usr/bin/env bash
# The main job, offline: validate every config file, plan each team (what fits, how fast it can
# be, what it costs), show what would be deployed, and synthesize
# every team's stack for every environment with the CDK CLI (cdk-nag runs inside the synth).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
set -euo pipefail

optigate validate config
for team in config/teams/*.yaml; do
  optigate plan "$team"
done
optigate plan --model llama-3.1-8b --compare --max-model-len 8192 --tpot-ms 30
optigate summary
cdk synth --quiet --no-notices --output cdk.out
echo "Synthesized $(ls cdk.out/*.template.json | wc -l) stacks into cdk.out/ (no AWS call, no credentials)."
