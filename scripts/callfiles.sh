#!/bin/bash
# Counts the hand-written files one call executes (docs/ARCHITECTURE.md, "One reading of a conversation"
# and the exchange): svc server built with coverage counters (count mode) over a mock upstream, the same
# setup, then the call once and twice; a block whose count grows from one call to two ran for the call,
# its asynchronous recording included. Generated code (templ, sqlc) is counted apart. The pair of runs is
# made twice: a file counts when its blocks grew both times; one that grew once only (a timer, a GC
# cycle, the recorder's batching falling otherwise within the window) is listed apart, not counted.
#   scripts/callfiles.sh                                  a streamed chat completion
#   ROUTE=/v1/messages BODYFILE=body.json scripts/callfiles.sh
set -e
cd "$(dirname "$0")/.."
T=$(mktemp -d)
go build -cover -covermode=count -coverpkg=github.com/svcdev/svc/... -o $T/svc ./cmd/svc
go build -o $T/mock ./cmd/mockupstream
cat > $T/models.yaml <<'Y'
models:
  - name: up
    runtime: openai
    upstreamUrl: http://127.0.0.1:18431/v1
    upstreamModel: mock-model
    public: true
    supportsMessages: true
Y
$T/mock --addr 127.0.0.1:18431 > $T/mock.log 2>&1 &
MOCK=$!
trap "kill $MOCK; rm -rf $T" EXIT
echo '{"stream":true,"messages":[{"role":"user","content":"hi"}]}' > $T/chat.json
for rep in a b; do
for n in 1 2; do
  rm -rf $T/data$n $T/c$rep$n; mkdir -p $T/c$rep$n
  GOCOVERDIR=$T/c$rep$n $T/svc server --addr 127.0.0.1:18432 --data $T/data$n --models $T/models.yaml > $T/svc$n.log 2>&1 &
  SVC=$!
  for i in $(seq 50); do curl -s -o /dev/null http://127.0.0.1:18432/ && break; sleep 0.1; done
  TOKEN=$(curl -s -X POST http://127.0.0.1:18432/v1/auth/anonymous | python3 -c 'import sys,json; print(json.load(sys.stdin)["token"])')
  SCOPE=$(curl -s -X POST http://127.0.0.1:18432/v1/auth/anonymous/scope -H "authorization: Bearer $TOKEN")
  ORG=$(echo "$SCOPE" | python3 -c 'import sys,json; print(json.load(sys.stdin)["orgSlug"])')
  PRJ=$(echo "$SCOPE" | python3 -c 'import sys,json; print(json.load(sys.stdin)["projectSlug"])')
  curl -s -X POST http://127.0.0.1:18432/v1/orgs/$ORG/projects/$PRJ/deployments -H "authorization: Bearer $TOKEN" -H 'content-type: application/json' \
    -d '{"slug":"cov","target":{"kind":"base_model","model":"up"},"authMode":"none","runRetentionMode":"days","runRetentionDays":7}' > /dev/null
  for i in $(seq $n); do
    curl -s -N http://127.0.0.1:18432/e/cov${ROUTE:-/v1/chat/completions} -H "anthropic-version: 2023-06-01" -H 'content-type: application/json' \
      --data-binary @${BODYFILE:-$T/chat.json} > $T/out$n.txt
  done
  sleep 1.5
  kill -TERM $SVC; wait $SVC || true
done
go tool covdata textfmt -i $T/c${rep}1 -o $T/p${rep}1.txt
go tool covdata textfmt -i $T/c${rep}2 -o $T/p${rep}2.txt
done
T=$T python3 - <<'P'
def load(p):
    d={}
    for l in open(p).read().split('\n')[1:]:
        if not l: continue
        k,rest=l.rsplit(' ',2)[0], l.rsplit(' ',2)[1:]
        d[k]=d.get(k,0)+int(rest[1])
    return d
import os
T=os.environ['T']
def grew(rep):
    a=load(T+'/p'+rep+'1.txt'); b=load(T+'/p'+rep+'2.txt')
    return {k.split(':')[0] for k,v in b.items() if v>a.get(k,0)}
ga, gb = grew('a'), grew('b')
files, once = ga & gb, ga ^ gb
gen=lambda f: f.endswith('_templ.go') or '/db/dbsqlc/' in f or '/db/dbpg/' in f or f.endswith('pgquerier_gen.go')
name=lambda f: f.replace('github.com/svcdev/svc/','')
hand=sorted(name(f) for f in files if not gen(f))
print(len(hand),'hand-written files;', len([f for f in files if gen(f)]),'generated')
for f in hand: print(' ',f)
if once: print('grew in one pair of runs only, not counted:', ' '.join(sorted(name(f) for f in once)))
P
