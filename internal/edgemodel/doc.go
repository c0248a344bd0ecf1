// Package edgemodel holds the types the data plane reads (a deployment as the edge serves it, its keys, limits and retention, the model catalog, the error codes) with their pure rules, so that the edge links no database; internal/core returns them.
package edgemodel
