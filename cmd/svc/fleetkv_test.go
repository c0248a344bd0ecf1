package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/svcdev/svc/cloudapi"
)

// TestModelsGetShowsEachReplicasKVState: a model reading its replicas' KV events (kvEvents listen)
// shows, per replica, in GET /v1/models/{id} (`svc models get --json`) and in `svc models get`'s
// table, the state the events gave it and the blocks they say it holds: a replica that published a
// batch of two stored blocks reads exact with 2 blocks, one that published nothing quiet with 0.
func TestModelsGetShowsEachReplicasKVState(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	var addrs, urls []string
	for range 2 {
		addr := freeAddr(t)
		startReplica(t, addr)
		addrs, urls = append(addrs, addr), append(urls, "http://"+addr+"/v1")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "tcp://" + ln.Addr().String()
	ln.Close()
	models := filepath.Join(home, "models.yaml")
	if err := os.WriteFile(models, []byte("models:\n  - name: fleet\n    runtime: openai\n    upstreamModel: fake-model\n    public: true\n    replicas: ["+
		strings.Join(urls, ", ")+"]\n    kvEvents:\n      listen: "+endpoint+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := svcEnv(home)
	_, base := startProcess(t, dir, env, apiLine, "server", "--addr", "127.0.0.1:0", "--data", filepath.Join(home, "data"), "--models", models)
	api := "--api=" + base
	if r := runSvc(t, dir, env, "login", "--anonymous", api); r.code != 0 {
		t.Fatalf("login: %s", r.stderr)
	}

	// The first replica publishes, as llm-d-inference-sim does: a PUB that connects to svc's SUB, topic
	// kv@host:port@model, an 8-byte sequence (1: its first batch) and a msgpack batch of one
	// BlockStored of two 16-token blocks.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pub := zmq4.NewPub(ctx)
	defer pub.Close()
	if err := pub.Dial(endpoint); err != nil {
		t.Fatal(err)
	}
	toks := make([]any, 32)
	for i := range toks {
		toks[i] = uint32(i + 1)
	}
	ev, err := msgpack.Marshal([]any{"BlockStored", []any{uint64(101), uint64(102)}, nil, toks, 16, nil, "GPU", nil})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := msgpack.Marshal([]any{1.5, []msgpack.RawMessage{ev}, 0})
	if err != nil {
		t.Fatal(err)
	}
	seq := []byte{0, 0, 0, 0, 0, 0, 0, 1}
	topic := []byte("kv@" + addrs[0] + "@fake-model")

	var m cloudapi.Model
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		// A SUB learns of its peer asynchronously: publish until the batch shows (the same batch
		// again is ignored: its sequence is not new).
		if err := pub.Send(zmq4.NewMsgFrom(topic, seq, batch)); err != nil {
			t.Fatal(err)
		}
		r := runSvc(t, dir, env, "models", "get", "fleet", "--json", api)
		if r.code != 0 {
			t.Fatalf("models get --json: %d %s", r.code, r.stderr)
		}
		m = cloudapi.Model{}
		if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
			t.Fatalf("models get --json: %v\n%s", err, r.stdout)
		}
		if m.Fleet == nil || len(m.Fleet.Replicas) != 2 {
			t.Fatalf("no fleet of two replicas in %s", r.stdout)
		}
		if kv := m.Fleet.Replicas[0].KV; kv != nil && kv.State == "exact" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first replica's KV state never read exact:\n%s", r.stdout)
		}
	}
	if m.Fleet.CacheSignal != "kv-events" {
		t.Errorf("cacheSignal %q, want kv-events", m.Fleet.CacheSignal)
	}
	for i, want := range []cloudapi.ReplicaKV{{State: "exact", Blocks: 2}, {State: "quiet", Blocks: 0}} {
		if got := m.Fleet.Replicas[i].KV; got == nil || *got != want {
			t.Errorf("replica %s: kv %+v, want %+v", m.Fleet.Replicas[i].Addr, got, want)
		}
	}

	r := runSvc(t, dir, env, "models", "get", "fleet", api)
	if r.code != 0 {
		t.Fatalf("models get: %d %s", r.code, r.stderr)
	}
	t.Logf("svc models get fleet:\n%s", r.stdout)
	for i, want := range []string{"exact, 2 blocks", "quiet, 0 blocks"} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(addrs[i]) + `\s+healthy\s.*\s` + regexp.QuoteMeta(want) + `\s*$`).MatchString(r.stdout) {
			t.Errorf("replica %s's row does not end %q in:\n%s", addrs[i], want, r.stdout)
		}
	}
}
