package inference

import (
	"bytes"

	"github.com/svcdev/svc/internal/jsonx"
)

// Shorthands that only the tests use.

// RewriteModel returns b, a JSON object, with the string value of its top-level "model" field replaced
// by model (already JSON-encoded, quotes included). Objects without one come back unchanged. It is a
// single pass over the bytes, cheap enough to run on every streamed chunk.
func RewriteModel(b []byte, model []byte) []byte {
	start, end := jsonx.TopLevelString(b, "model")
	if start < 0 {
		return b
	}
	if bytes.Equal(b[start:end], model) {
		return b
	}
	return spliceModel(make([]byte, 0, len(b)-(end-start)+len(model)), b, [2]int{start, end}, model)
}

// NewRegistry is NewRegistryWith with default Options.
func NewRegistry(models []ModelConfig) (*Registry, error) { return NewRegistryWith(models, Options{}) }

// Load is LoadWith with default Options.
func Load(path string) (*Registry, error) { return LoadWith(path, Options{}) }
