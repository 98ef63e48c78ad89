#!/usr/bin/env bash
# The main job, offline: validate every config file, plan each team (what fits, how fast it can
# be, what it costs), show what would be deployed, and synthesize
# every team's stack for every environment with the CDK CLI (cdk-nag runs inside the synth) and the
# promotion pipelines (one per team) with their stages, then benchmark an emulated baseline and candidate endpoint,
# write the comparison report, and rehearse the gates (chat; research with its shadow rollout; support, whose
# LoRA adapters the gate stages as inference components).
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
step="setup"
# The last line says how the demo ended, whatever ended it.
finish() {
  code=${1:-$?}
  elapsed=$((SECONDS - started))
  if [ "$code" -eq 0 ]; then
    echo "demo passed in $((elapsed / 60))m$((elapsed % 60))s"
  else
    echo "demo FAILED: $step (exit $code, after $((elapsed / 60))m$((elapsed % 60))s)"
  fi
}
trap 'finish $?' EXIT
. scripts/setup.sh
set -euo pipefail

step="validate"
optigate validate config
step="plan"
for team in config/teams/*.yaml; do
  optigate plan "$team"
done
optigate plan --model llama-3.1-8b --compare --max-model-len 8192 --tpot-ms 30
step="summary"
optigate summary
step="cdk synth"
cdk synth --quiet --no-notices --output cdk.out
echo "Synthesized $(ls cdk.out/*.template.json | wc -l) stacks into cdk.out/ (no AWS call, no credentials)."
step="cdk synth -c pipeline=true"
cdk synth --quiet --no-notices -c pipeline=true --output cdk.out.pipeline
echo "Synthesized the promotion pipelines into cdk.out.pipeline/: $(ls cdk.out.pipeline/optigate-pipeline-*.template.json | wc -l) team pipelines and the platform's, $(ls -d cdk.out.pipeline/assembly-* | wc -l) environment stages in all."

# Benchmark two emulated endpoints (the chat team's baseline and a faster candidate) on loopback
# and compare them with bootstrap confidence intervals.
step="benchmark"
out=out/bench
rm -rf "$out" && mkdir -p "$out"
optigate emulate --port 0 --port-file "$out/baseline.port" --config examples/emulator/baseline.yaml 2>/dev/null &
baseline_pid=$!
optigate emulate --port 0 --port-file "$out/candidate.port" --config examples/emulator/candidate.yaml 2>/dev/null &
candidate_pid=$!
trap 'code=$?; kill $baseline_pid $candidate_pid 2>/dev/null || true; finish $code' EXIT
for _ in $(seq 100); do [ -s "$out/baseline.port" ] && [ -s "$out/candidate.port" ] && break; sleep 0.1; done
for name in baseline candidate; do
  optigate bench --endpoint chat-dev --endpoint-url "http://127.0.0.1:$(cat "$out/$name.port")" \
    --concurrency 1,8,32 --duration 8 --prompt-tokens 512 --max-new-tokens 64 --json "$out/$name.json"
done
optigate bench compare "$out/baseline.json" "$out/candidate.json" --report "$out/report"
echo "Benchmark report: $out/report/index.html"

# The chat team's gate, executed offline for a passing and a failing candidate; then research's,
# whose candidate mirrors live traffic as a shadow before the live endpoint is restored.
step="rehearse chat"
optigate rehearse --team chat --candidate both
step="rehearse research"
optigate rehearse --team research --candidate faster
# The support team's adapters: twin and candidate serve the base and every adapter as inference components, the
# benchmark follows its adapter mix; a faster FP8 base is approved, and rejected when one adapter loses quality.
step="rehearse support"
optigate rehearse --team support --candidate both
