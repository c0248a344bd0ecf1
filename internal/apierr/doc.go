// Package apierr writes the error envelopes of every surface of svc, one place per envelope: the
// management API's, which the internal API of edges and the listener's own answers share (api.go),
// OpenAI's and Anthropic's for the edge (openai.go, anthropic.go).
package apierr
