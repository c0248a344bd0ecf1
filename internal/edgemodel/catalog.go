package edgemodel

import "time"

// ModelInfo is one base model of the catalog.
type ModelInfo struct {
	ID               string
	Public           bool // served on multi-model endpoints
	Default          bool // the multi-model default
	SupportsMessages bool // served on /v1/messages
	Runtime          string
	Simulated        bool
	Adapters         bool // can serve LoRA adapters (final_adapter and checkpoint targets)
}

// Catalog lists the base models registered for inference. internal/inference implements it from the
// models file (or the built-in simulated catalog).
type Catalog interface {
	Model(id string) (ModelInfo, bool)
	Models() []ModelInfo // stable order
}

// Fleet is a model's replicas as the process serving the model sees them (docs/API.md, "A model's
// replicas"): how it routes, what it knows of their caches, and each replica's state.
type Fleet struct {
	Routing string // affinity, least-loaded or round-robin
	// CacheSignal names what the picker knows of the replicas' prefix caches: "routed" (the prompts
	// this process sent each one, an approximation) or "kv-events" (the replicas' own).
	CacheSignal string
	MaxLoras    int // the replicas' --max-loras; 0: no LoRA slots
	Replicas    []Replica
}

// Replica is one replica of a Fleet.
type Replica struct {
	Addr    string // host:port, as runs name it
	Healthy bool
	// Out says why a replica that is not healthy was taken out; OutUntil is when it is next probed.
	Out      string
	OutUntil time.Time
	// InFlight counts this process's calls on it; Waiting and Running are its own, as last scraped.
	InFlight, Waiting, Running int
	Ejections                  uint64
	// MeanCall is the moving mean of its calls' time from here; Pace that over the fastest replica's
	// (1 the fastest, 0 before a call ended well).
	MeanCall time.Duration
	Pace     float64
	Adapters []string // the adapters running on it, as far as this process knows
	Resident []string // adapters with no call running still in one of its slots (no load to use them)
	Unready  []string // adapters svc is loading on it or its listing lacks (their calls go elsewhere)
	// KVState is what the replica's KV events told ("quiet", "exact", "partial", "unknown"; "" when
	// the model reads none) and KVBlocks the blocks they say it holds.
	KVState  string
	KVBlocks int
}

// Fleets is what a Catalog whose models may have replicas answers as well: the fleet of model id,
// false when it has none (one upstream, the simulator, or no such model).
type Fleets interface {
	Fleet(id string) (Fleet, bool)
}
