package inference

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/svcdev/svc/internal/fleet"
	"github.com/svcdev/svc/internal/kvindex"
)

// KVEvents, on a model with replicas, says where the replicas publish their KV-cache events (vLLM's
// --kv-events-config, llm-d-inference-sim's --zmq-endpoint): svc then places a conversation's next
// turn on the replica holding most of its last prompt, from the replicas' own state (docs/LORA.md,
// "Exact cache state from KV events"). One of Listen or Port.
type KVEvents struct {
	// Listen is the ZMQ endpoint svc binds (tcp://host:port); the replicas connect to it.
	Listen string `yaml:"listen"`
	// Port is where each replica's own publisher binds: svc connects to every replica's host there.
	Port int `yaml:"port"`
	// BlockSize is the replicas' --block-size in tokens (default 16).
	BlockSize int `yaml:"blockSize"`
}

func validateKVEvents(m *ModelConfig) error {
	k := m.KVEvents
	if k == nil {
		return nil
	}
	if m.Replicas == nil {
		return errors.New("kvEvents is only for a model with replicas")
	}
	if m.Routing != fleet.Affinity.String() {
		return fmt.Errorf("kvEvents needs routing %s (it is %s)", fleet.Affinity, m.Routing)
	}
	if (k.Listen == "") == (k.Port == 0) {
		return errors.New("kvEvents: set listen (svc binds, the replicas connect) or port (svc connects to each replica), one of them")
	}
	if k.Listen != "" {
		u, err := url.Parse(k.Listen)
		if err != nil || u.Scheme != "tcp" || u.Port() == "" {
			return fmt.Errorf("kvEvents: listen %q is not tcp://host:port", k.Listen)
		}
	}
	if k.Port < 0 || k.Port > 65535 {
		return fmt.Errorf("kvEvents: port %d is not a port", k.Port)
	}
	if k.BlockSize < 0 || k.BlockSize > 1024 {
		return fmt.Errorf("kvEvents: blockSize %d is not the replicas' --block-size (tokens, default 16)", k.BlockSize)
	}
	return nil
}

// Tokenizing a conversation's prompt, off the request path: at most this many at once per model (a
// call whose answer began while they are busy is not tokenized: best effort), each within this time.
const (
	tokenizeConcurrency = 2
	tokenizeTimeout     = 5 * time.Second
	maxTokenizeAnswer   = 8 << 20
)

// kvFollower is a model's KV-event index, its subscriber and the tokenizing of prompts.
type kvFollower struct {
	x       *kvindex.Index
	slotted bool // the model has maxLoras: its adapters' calls go by their slots, not by the events
	slots   chan struct{}
	log     *slog.Logger
}

// tokenizePoster posts a body to a replica's /tokenize (openAI.postTokenize).
type tokenizePoster interface {
	postTokenize(ctx context.Context, root string, body []byte, limit int64) (int, []byte, error)
}

// newKVFollower makes a model's KV-event index; start subscribes.
func newKVFollower(k *KVEvents, maxLoras int, log *slog.Logger) *kvFollower {
	if log == nil {
		log = slog.Default()
	}
	return &kvFollower{x: kvindex.New(k.BlockSize), slotted: maxLoras > 0, slots: make(chan struct{}, tokenizeConcurrency), log: log}
}

// start runs the subscriber of f's replicas' events through run (a WaitGroup's Go) until ctx ends:
// bound at listen, or connected to each replica's host at port.
func (kf *kvFollower) start(ctx context.Context, k *KVEvents, f *fleet.Fleet, run func(func())) {
	if k.Listen != "" {
		run(func() { kvindex.Subscribe(ctx, k.Listen, false, kf.x, kf.log, nil) })
		return
	}
	run(func() {
		kvindex.Follow(ctx, kf.x, k.Port, func() []string {
			var out []string
			for _, r := range f.Replicas() {
				out = append(out, r.Addr)
			}
			return out
		}, kf.log)
	})
}

// remember tokenizes a conversation's call through the replica that answers it (POST /tokenize with
// the call's own body, through p: the engine renders it as it did the call) and keeps its token blocks
// under the conversation's key, in the background: the next turn repeats them. Nothing for a call of no
// conversation, for an adapter's call where adapter slots place it (maxLoras), or when
// tokenizeConcurrency calls are being tokenized already.
func (kf *kvFollower) remember(r *fleet.Replica, req fleet.Request, path string, body []byte, p tokenizePoster) {
	if kf == nil || req.Session == 0 || path != "/chat/completions" || req.Adapter != "" && kf.slotted {
		return
	}
	select {
	case kf.slots <- struct{}{}:
	default:
		return
	}
	go func() {
		defer func() { <-kf.slots }()
		toks, err := kf.tokenize(p, r.Root(), body)
		if err != nil {
			kf.log.Debug("kv events: tokenize failed", "replica", r.Addr, "err", err)
			return
		}
		kf.x.Remember(req.Session, req.Adapter, toks, len(body))
	}()
}

// tokenize asks the replica at root for body's tokens, within tokenizeTimeout.
func (kf *kvFollower) tokenize(p tokenizePoster, root string, body []byte) ([]uint32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), tokenizeTimeout)
	defer cancel()
	status, b, err := p.postTokenize(ctx, root, body, maxTokenizeAnswer)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
			return nil, errors.New("timed out")
		}
		return nil, errors.New("unreachable")
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("answered %d", status)
	}
	var out struct {
		Tokens []uint32 `json:"tokens"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out.Tokens, nil
}
