#!/usr/bin/env bash
# A check by hand of svc's fleet routing against a real vLLM simulator (docs/LORA.md, "Fleets"): four
# llm-d-inference-sim replicas with prefix caches on loopback, two behind a model routed by affinity and
# two behind one routed round-robin, the same six growing sessions sent to each; prints each endpoint's
# usage (its "Prompt cache" line is the cached share) and the picks by reason. Not in CI: the simulator
# takes minutes to build (../shared/TOOLCHAIN.md has the recipe). Usage:
#   LLMD_SIM=/path/to/llm-d-inference-sim scripts/fleet-check.sh
set -u
SIM=${LLMD_SIM:?set LLMD_SIM to the llm-d-inference-sim binary}
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d)
trap 'pkill -f "$SIM" 2>/dev/null; rm -rf "$WORK"' EXIT
cd "$WORK"
go build -C "$REPO" -o "$WORK/svc" ./cmd/svc || exit 1
for p in 8101 8102 8103 8104; do
  POD_IP=127.0.0.1 "$SIM" --port $p --model meta-llama/Llama-3.1-8B-Instruct --force-dummy-tokenizer \
    --mode echo --enable-kvcache --kv-cache-size 4000 --block-size 16 --prefill-time-per-token 500us --prefill-overhead 5ms \
    --inter-token-latency 2ms --max-num-seqs 4 --max-model-len 8192 > sim-$p.log 2>&1 &
done
sleep 3
cat > models.yaml <<YAML
models:
  - name: llmd-affinity
    runtime: openai
    public: true
    default: true
    upstreamModel: meta-llama/Llama-3.1-8B-Instruct
    replicas: [http://127.0.0.1:8101/v1, http://127.0.0.1:8102/v1]
    routing: affinity
  - name: llmd-rr
    runtime: openai
    public: true
    upstreamModel: meta-llama/Llama-3.1-8B-Instruct
    replicas: [http://127.0.0.1:8103/v1, http://127.0.0.1:8104/v1]
    routing: round-robin
YAML
./svc server --addr 127.0.0.1:8190 --data ./data --models models.yaml > svc.log 2>&1 &
SVC=$!
sleep 3
export HOME=$WORK/home SVC_API=http://localhost:8190; mkdir -p $HOME
field() { sed -n -E "s/.*\"$1\": *\"([^\"]*)\".*/\1/p" | head -n 1; }
./svc login --anonymous >/dev/null
for m in affinity rr; do
  ./svc deployments create --slug fleet-$m --target base:llmd-$m --auth none --retention days:7 >/dev/null || ./svc deployments create --slug fleet-$m --target base:llmd-$m --auth none >/dev/null
done
SYS="You are a coding agent."
for m in affinity rr; do
  URL=$(./svc deployments get fleet-$m --json | field url)
  for s in 1 2 3 4 5 6; do
    HIST=""
    for turn in 1 2 3 4 5; do
      HIST="$HIST session $s turn $turn: $(python3 -c "import sys; print(' '.join(f'line{i}-s$s-t$turn' for i in range(120)))") "
      python3 - "$SYS" "$HIST" > body.json <<'PY'
import json,sys
print(json.dumps({"max_tokens":8,"messages":[{"role":"system","content":sys.argv[1]},{"role":"user","content":sys.argv[2]}]}))
PY
      curl -s $URL/v1/chat/completions -H "Content-Type: application/json" -d @body.json > /dev/null
    done
  done
done
sleep 2
for m in affinity rr; do echo "== $m"; ./svc usage fleet-$m | tail -3; done
curl -s http://localhost:8190/metrics | grep svc_fleet_picks_total | grep -v " 0$"
kill $SVC
