package inference

import (
	"bytes"
	"net/http"

	"github.com/svcdev/svc/internal/jsonx"
)

// Anthropic Messages answers of upstreams that serve the API themselves, read as they pass through:
// renamed for the served model, with their usage, stop reason and deltas read for the edge.

// messagesEvent reads one Messages stream event into s.chunk; it reports an error event.
//
//	message_start        {"message": {..., "model", "usage": {"input_tokens"}}}: the model renamed
//	content_block_delta  one piece of generated content
//	message_delta        {"delta": {"stop_reason"}, "usage": {"output_tokens"}}
//	message_stop         the last event
//	error                {"error": {"type", "message"}}: ends the stream with the upstream's error
//
// An event that is not one of the API's (no type, or a message_start without its message) ends the
// stream: relayed as it came, it would leave the client guessing.
func (s *upstreamStream) messagesEvent(data []byte) error {
	s.chunk = Chunk{}
	failed := false
	typ, msg := [2]int{-1, -1}, [2]int{-1, -1}
	var usage *Usage
	var finish string
	c := jsonx.NewCursor(data)
	c.Object(func(member []byte) {
		switch string(member) {
		case "type":
			if typ[0] < 0 && c.Kind() == '"' {
				typ[0], typ[1] = c.Span()
			}
		case "message":
			if msg[0] < 0 && c.Kind() == '{' {
				msg[0], msg[1] = c.Span()
			}
		case "usage":
			if u, ok := readUsage(c, &anthropicUsage); ok {
				usage = &u
			}
		case "delta":
			c.Object(func(member []byte) {
				if string(member) == "stop_reason" {
					finish = c.String()
				}
			})
		case "error":
			failed = failed || c.Kind() != 'n'
		}
	})
	if c.Bad() || typ[0] < 0 {
		return s.o.badAnswer("sent an invalid event")
	}
	t := data[typ[0]+1 : typ[1]-1] // as written: an escaped type is no type of the API
	if !eventName(t) {
		return s.o.badAnswer("sent an invalid event")
	}
	// The event is named for its type, as Anthropic names every event: clients dispatch on the name,
	// and an upstream whose "event:" line says otherwise (or is missing) must not make them misread it.
	s.chunk.Event, s.chunk.JSON = t, data
	switch string(t) {
	case "message_start":
		if msg[0] < 0 {
			return s.o.badAnswer("sent an invalid event")
		}
		s.out = s.renameMessage(data, msg)
		s.chunk.JSON = s.out
	case "content_block_delta":
		s.chunk.Deltas = 1
	case "message_delta":
		s.chunk.Usage, s.chunk.Finish = usage, finish
	case "message_stop":
		s.chunk.Last = true
	case "error":
		failed = true
	}
	if failed {
		return s.o.upstreamError(http.StatusBadGateway, nil, data)
	}
	return nil
}

// eventName reports whether b can name an event: one line of printable characters, as event types are.
func eventName(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return len(b) > 0
}

// renameMessage returns message_start's data with the served model in its message (added when the
// upstream named none), and reads the message's input tokens.
func (s *upstreamStream) renameMessage(data []byte, msg [2]int) []byte {
	obj := data[msg[0]:msg[1]]
	model, id := [2]int{-1, -1}, [2]int{-1, -1}
	c := jsonx.NewCursor(obj)
	c.Object(func(member []byte) {
		switch string(member) {
		case "id":
			if s.idJSON != nil && id[0] < 0 && c.Kind() == '"' {
				id[0], id[1] = c.Span()
				id[0], id[1] = msg[0]+id[0], msg[0]+id[1]
			}
		case "model":
			if model[0] < 0 {
				model[0], model[1] = c.Span()
			}
		case "usage":
			// Only the input tokens count here: the output tokens of message_start are a placeholder
			// until message_delta.
			if u, ok := readUsage(c, &anthropicUsage); ok && u.PromptTokens > 0 {
				s.chunk.Usage = &Usage{PromptTokens: u.PromptTokens, TotalTokens: u.PromptTokens}
			}
		}
	})
	out := s.out[:0]
	if model[0] >= 0 {
		return splice(out, data, id, s.idJSON, [2]int{msg[0] + model[0], msg[0] + model[1]}, s.served)
	}
	if id[0] >= 0 {
		// svc's id first (its offsets are the upstream's), then the model added before it.
		s.spare = splice(s.spare[:0], data, id, s.idJSON, [2]int{-1, -1}, nil)
		data = s.spare
	}
	// No model: one is added first in the message.
	out = append(out, data[:msg[0]+1]...)
	out = append(append(append(out, `"model":`...), s.served...), ',')
	rest := data[msg[0]+1:]
	if i := bytes.IndexByte(rest, '}'); i >= 0 && len(bytes.TrimSpace(rest[:i])) == 0 {
		out = out[:len(out)-1] // an empty message: no comma before its end
	}
	return append(out, rest...)
}

// readMessage reads a Messages answer (a message object) in one pass with a cursor, and renames its
// model for the client.
func (o *openAI) readMessage(body, served []byte, id string) (*Completion, error) {
	if !validObject(body) {
		return nil, o.badAnswer("answered with invalid JSON")
	}
	out := &Completion{}
	model, idSpan := [2]int{-1, -1}, [2]int{-1, -1}
	var text []byte
	cur := jsonx.NewCursor(body)
	cur.Object(func(name []byte) {
		switch string(name) {
		case "id":
			if id != "" && idSpan[0] < 0 && cur.Kind() == '"' {
				idSpan[0], idSpan[1] = cur.Span()
				out.ID = id
				return
			}
			out.ID = cur.String()
		case "model":
			if model[0] < 0 && cur.Kind() == '"' {
				model[0], model[1] = cur.Span()
			}
		case "usage":
			if u, ok := readUsage(cur, &anthropicUsage); ok {
				out.Usage = u
			}
		case "stop_reason":
			out.FinishReason = cur.String()
		case "content":
			cur.Array(func() {
				var typ, t string
				cur.Object(func(name []byte) {
					switch string(name) {
					case "type":
						typ = cur.String()
					case "text":
						t = cur.String()
					}
				})
				if typ == "text" {
					text = append(text, t...)
				}
			})
		}
	})
	out.Content = string(text)
	out.JSON = body
	if model[0] >= 0 || idSpan[0] >= 0 {
		var idJSON []byte
		if idSpan[0] >= 0 {
			idJSON = jsonx.AppendString(nil, id)
		}
		out.JSON = splice(make([]byte, 0, len(body)+len(served)+len(idJSON)), body, idSpan, idJSON, model, served)
	}
	return out, nil
}
