package translate

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"io"
	"sync"
)

// Reasoning, both ways, for both surfaces (docs/API.md, "Reasoning").
//
// Requests: Messages' thinking and output_config.effort, and Responses' reasoning.effort, become the
// upstream's reasoning controls as the catalog says (Options.Reasoning): OpenAI's reasoning_effort, or
// chat_template_kwargs.enable_thinking for templates that switch thinking on and off, or nothing.
//
// Answers: the upstream's reasoning_content (or reasoning) becomes Messages thinking blocks or
// Responses reasoning items. A thinking block carries a signature, an HMAC of its text under the
// server's secret, so that svc gives back to the upstream, as the assistant's reasoning, only
// thinking that it produced itself.

// reasoningEffort is the effort the upstream is asked for ("" for its default). vLLM takes low,
// medium and high only: the levels above are high, "minimal" is low; "none" asks for no reasoning.
func reasoningEffort(effort string) string {
	switch effort {
	case "minimal", "low":
		return "low"
	case "medium":
		return "medium"
	case "high", "xhigh", "max":
		return "high"
	}
	return ""
}

// effortOfBudget maps Messages' thinking.budget_tokens to an effort.
func effortOfBudget(budget int) string {
	switch {
	case budget < 4096:
		return "low"
	case budget < 16384:
		return "medium"
	}
	return "high"
}

// applyReasoning writes the reasoning controls. on is whether thinking was asked for (nil: not said);
// effort is the surface's effort word ("" for none given).
func applyReasoning(out *chatRequest, mode string, on *bool, effort string) {
	switch mode {
	case ReasoningNone:
		return
	case ReasoningChatTemplate:
		enable := on
		if effort == "none" {
			no := false
			enable = &no
		} else if enable == nil && effort != "" {
			yes := true
			enable = &yes
		}
		if enable != nil {
			out.ChatTemplateKwargs = map[string]bool{"enable_thinking": *enable}
		}
	default:
		out.ReasoningEffort = reasoningEffort(effort)
	}
}

// signatureVersion starts every signature, so that a later scheme can tell its own apart.
const signatureVersion = "svc1"

// signThinking returns the signature of a thinking block's text.
func signThinking(secret []byte, text string) string {
	k := signers.Get().(*signer)
	if k.mac == nil || !bytes.Equal(k.secret, secret) {
		k.secret, k.mac = bytes.Clone(secret), hmac.New(sha256.New, secret)
	} else {
		k.mac.Reset()
	}
	k.mac.Write([]byte("svc thinking\x00"))
	io.WriteString(k.mac, text)
	k.sum = k.mac.Sum(k.sum[:0])
	sig := signatureVersion + base64.StdEncoding.EncodeToString(k.sum)
	signers.Put(k)
	return sig
}

// signers keeps HMACs keyed with the secret (one per process, in practice) from one signature to the
// next: an agent's request carries its earlier turns' reasoning, each verified, and keying an HMAC
// costs two SHA-256 blocks and its allocations.
var signers = sync.Pool{New: func() any { return new(signer) }}

type signer struct {
	secret []byte
	mac    hash.Hash
	sum    []byte
}

// verifyThinking reports whether signature is svc's signature of text.
func verifyThinking(secret []byte, text, signature string) bool {
	return hmac.Equal([]byte(signThinking(secret, text)), []byte(signature))
}
