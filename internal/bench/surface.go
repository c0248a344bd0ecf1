package bench

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/svcdev/svc/internal/sse"
)

// Surface is the API a row's requests speak: chat completions, relayed as they are, or the Messages or
// Responses API, which the edge translates to chat completions for an upstream that serves only chat
// (docs/OPERATIONS.md, "Overhead": a translated stream's CPU per chunk stays within 1.3× of a relayed
// chat stream's).
type Surface int

const (
	SurfaceChat Surface = iota
	SurfaceMessages
	SurfaceResponses
)

func (s Surface) String() string {
	switch s {
	case SurfaceMessages:
		return "messages"
	case SurfaceResponses:
		return "responses"
	}
	return "chat"
}

// Path is the surface's route.
func (s Surface) Path() string {
	switch s {
	case SurfaceMessages:
		return "/v1/messages"
	case SurfaceResponses:
		return "/v1/responses"
	}
	return "/v1/chat/completions"
}

// Body is the request a translated surface's row sends: the conversation of RequestBody (the same
// system text, user message and token cap) in the surface's own shape, so that the upstream is asked
// the same chat completion as the chat rows. Chat rows send RequestBody (it depends on -usage).
func (s Surface) Body(stream bool) []byte {
	var body string
	switch s {
	case SurfaceMessages:
		body = `{"model":"mock-model","max_tokens":64,"system":"You are terse.","messages":[{"role":"user","content":"Say something about foxes."}]}`
		if stream {
			body = `{"model":"mock-model","max_tokens":64,"stream":true,"system":"You are terse.","messages":[{"role":"user","content":"Say something about foxes."}]}`
		}
	case SurfaceResponses:
		body = `{"model":"mock-model","instructions":"You are terse.","input":"Say something about foxes.","max_output_tokens":64}`
		if stream {
			body = `{"model":"mock-model","instructions":"You are terse.","input":"Say something about foxes.","max_output_tokens":64,"stream":true}`
		}
	default:
		return RequestBody(stream, false)
	}
	return []byte(body)
}

// SetAuth puts a key on a request the surface's way: Messages clients send x-api-key and the API
// version, OpenAI's clients a bearer token.
func (s Surface) SetAuth(h http.Header, key string) {
	if s == SurfaceMessages {
		h.Set("Anthropic-Version", "2023-06-01")
		if key != "" {
			h.Set("X-Api-Key", key)
		}
		return
	}
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
}

// lastEvent is what a stream's last event must be: OpenAI's "data: [DONE]" for chat, the named event
// message_stop (Messages) or response.completed (Responses), after which a client stops reading.
func (s Surface) lastEvent() string {
	switch s {
	case SurfaceMessages:
		return "event: message_stop"
	case SurfaceResponses:
		return "event: response.completed"
	}
	return "data: [DONE]"
}

// ends reports whether ev is the surface's last event.
func (s Surface) ends(ev sse.Event) bool {
	switch s {
	case SurfaceMessages:
		return string(ev.Name) == "message_stop"
	case SurfaceResponses:
		return string(ev.Name) == "response.completed"
	}
	return ev.Done()
}

// ReadStream reads a streamed answer of the surface to its end and counts its events (chat's
// "data: [DONE]" is one). The answer must end with the surface's last event, nothing after it, and not
// stop inside an event: a cut stream, an error event or a failed response is an error. last is a
// buffer for the name of the latest event (for the error), reused from one call to the next.
func (s Surface) ReadStream(r io.Reader, last []byte) (events int, err error) {
	rd := sse.NewReader(r)
	defer rd.Release()
	ended := false
	last = last[:0]
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return events, fmt.Errorf("streamed %s answer: %w after %d events", s, err, events)
		}
		events++
		ended = s.ends(ev)
		if !ended {
			if ev.Name != nil {
				last = append(append(last[:0], "event: "...), ev.Name...)
			} else {
				last = append(append(last[:0], "data: "...), ev.Data[:min(len(ev.Data), 40)]...)
			}
		}
	}
	if !ended {
		if events == 0 {
			return 0, fmt.Errorf("streamed %s answer has no events; want one ending with %s", s, s.lastEvent())
		}
		return events, fmt.Errorf("streamed %s answer does not end with %s (its last is %s)", s, s.lastEvent(), last)
	}
	return events, nil
}
