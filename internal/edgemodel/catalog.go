package edgemodel

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
