package core

import "github.com/svcdev/svc/internal/edgemodel"

// ModelInfo is one base model of the catalog.
type ModelInfo = edgemodel.ModelInfo

// Catalog lists the base models registered for inference (internal/inference implements it).
type Catalog = edgemodel.Catalog
