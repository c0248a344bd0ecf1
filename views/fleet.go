package views

// FleetPage is the #/fleet view: the catalog's models that are served by replicas, as the server's
// edge sees them (docs/API.md, "A model's replicas").
type FleetPage struct {
	Models []FleetModel
}

// FleetModel is one model with replicas.
type FleetModel struct {
	ID          string
	Routing     string
	CacheSignal string // "routed" or "kv-events"
	MaxLoras    int
	Healthy     int // replicas healthy, of len(Replicas)
	Replicas    []FleetReplica
}

// FleetReplica is one row of a model's replica table.
type FleetReplica struct {
	Addr      string
	Healthy   bool
	OutReason string
	OutUntil  string // "15:04:05" UTC, when it is next probed
	InFlight  int
	Waiting   int
	Ejections int64
	Pace      string // "1.0×" or "" before a call ended
	MeanCall  string // "840 ms"
	Adapters  []string
	Resident  []string // in a slot with no call running
	Unready   []string // being loaded there (or missing): their calls go elsewhere
	// KV is what its KV-cache events say ("exact, 1200 blocks"; "" when the model reads none).
	KV string
}

// cacheSignalText says in words what the router knows of the replicas' prefix caches.
func cacheSignalText(signal string) string {
	switch signal {
	case "kv-events":
		return "the replicas' own KV-cache events (exact)"
	case "routed":
		return "the prompts svc sent each replica (an approximation)"
	}
	return signal
}

// replicaTitle says which replica answered a run, and the one it was retried from.
func replicaTitle(r Run) string {
	if r.RetriedFrom != "" {
		return "Answered by " + r.Replica + " after " + r.RetriedFrom + " failed before answering"
	}
	return "Answered by " + r.Replica
}
