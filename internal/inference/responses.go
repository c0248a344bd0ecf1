package inference

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"

	"github.com/svcdev/svc/internal/jsonx"
)

// Responses API answers of upstreams that serve it themselves (supportsResponses), read as they pass
// through, and vLLM's /tokenize for count_tokens.

// responsesEvent reads one Responses stream event into s.chunk, named for its type as messagesEvent
// names Messages events.
//
//	response.created, .in_progress, .completed, .incomplete, .failed  {"response": {..., "model", "usage"}}:
//	                                   the model renamed; the last three end the stream, with the usage
//	response.*.delta                   one piece of generated content
//	error                              ends the stream with the upstream's error
//
// An event without a type is not one of the API's and ends the stream.
func (s *upstreamStream) responsesEvent(data []byte) error {
	s.chunk = Chunk{}
	typ, resp := [2]int{-1, -1}, [2]int{-1, -1}
	c := jsonx.NewCursor(data)
	c.Object(func(member []byte) {
		switch string(member) {
		case "type":
			if typ[0] < 0 && c.Kind() == '"' {
				typ[0], typ[1] = c.Span()
			}
		case "response":
			if resp[0] < 0 && c.Kind() == '{' {
				resp[0], resp[1] = c.Span()
			}
		}
	})
	if c.Bad() || typ[0] < 0 || !eventName(data[typ[0]+1:typ[1]-1]) {
		return s.o.badAnswer("sent an invalid event")
	}
	name := data[typ[0]+1 : typ[1]-1]
	t := string(name)
	s.chunk.Event, s.chunk.JSON = name, data
	switch {
	case t == "error":
		return s.o.upstreamError(http.StatusBadGateway, nil, data)
	case strings.HasSuffix(t, ".delta"):
		s.chunk.Deltas = 1
	}
	if resp[0] >= 0 {
		obj := data[resp[0]:resp[1]]
		var id *string
		if t == "response.created" {
			id = &s.chunk.ID // the response's id, which the caller gets: its run keeps it
		}
		model, usage, status := readResponseObject(obj, nil, id)
		if model[0] >= 0 {
			s.out = spliceModel(s.out[:0], data, [2]int{resp[0] + model[0], resp[0] + model[1]}, s.served)
			s.chunk.JSON = s.out
		}
		switch t {
		case "response.completed", "response.incomplete", "response.failed":
			s.chunk.Usage, s.chunk.Last = usage, true
			s.chunk.Finish = status
		}
	}
	return nil
}

// readResponseObject reads a response object's model span, usage and status; with answer, also its id
// and creation time (a whole answer's, which a stream's lifecycle events need not read); with id, the
// id alone (a stream's first event).
func readResponseObject(obj []byte, answer *Completion, id *string) (model [2]int, usage *Usage, status string) {
	model = [2]int{-1, -1}
	c := jsonx.NewCursor(obj)
	c.Object(func(member []byte) {
		switch string(member) {
		case "id":
			if answer != nil {
				answer.ID = c.String()
			} else if id != nil {
				*id = c.String()
			}
		case "created_at":
			if answer != nil {
				answer.Created = c.Int()
			}
		case "model":
			if model[0] < 0 && c.Kind() == '"' {
				model[0], model[1] = c.Span()
			}
		case "usage":
			if u, ok := readUsage(c, &responsesUsage); ok {
				usage = &u
			}
		case "status":
			status = c.String()
		}
	})
	return model, usage, status
}

var responsesUsage = usageNames{"input_tokens", "output_tokens", "total_tokens", "output_tokens_details", "input_tokens_details"}

// readResponse reads a Responses answer (a response object) in one pass, and renames its model.
func (o *openAI) readResponse(body, served []byte) (*Completion, error) {
	if !validObject(body) {
		return nil, o.badAnswer("answered with invalid JSON")
	}
	out := &Completion{}
	model, usage, status := readResponseObject(body, out, nil)
	if usage != nil {
		out.Usage = *usage
	}
	out.FinishReason = status
	out.JSON = body
	if model[0] >= 0 {
		out.JSON = spliceModel(make([]byte, 0, len(body)+len(served)), body, model, served)
	}
	return out, nil
}

// responseAnswer keeps, for the run, the response object of a passed-through Responses stream's
// latest lifecycle event (its terminal one when the stream ended), when it is within MaxAnswerBytes.
type responseAnswer struct {
	response  []byte
	truncated bool
}

func (a *responseAnswer) Add(ch *Chunk) {
	r := jsonx.Field(ch.JSON, "response")
	if len(r) == 0 || r[0] != '{' {
		return
	}
	if len(r) > MaxAnswerBytes {
		// Too large to record: the run keeps that it was, not an earlier, smaller state of it.
		a.response, a.truncated = a.response[:0], true
		return
	}
	a.response, a.truncated = append(a.response[:0], r...), false
}

func (a *responseAnswer) JSON(_ Usage, errJSON []byte) []byte {
	if a.truncated {
		return WithError([]byte(`{"object":"response","truncated":true}`), errJSON)
	}
	if len(a.response) == 0 {
		return errJSON
	}
	if errJSON == nil {
		return a.response
	}
	return WithError(a.response, errJSON)
}

var _ Tokenizer = (*openAI)(nil)

// Tokenize counts a chat-form /tokenize request's tokens with the upstream's /tokenize (vLLM serves it
// beside /v1, at the server's root). An upstream that answers 404 is not asked again.
func (o *openAI) Tokenize(ctx context.Context, c *Call, body []byte) (int, bool) {
	if o.noTokenize.Load() {
		return 0, false
	}
	fields := jsonx.Object(body)
	if fields == nil {
		return 0, false
	}
	fields["model"] = jsonx.AppendString(nil, o.upstreamModel(c))
	status, b, err := o.postTokenize(ctx, strings.TrimSuffix(o.cfg.UpstreamURL, "/v1"), EncodeObject(fields), maxUpstreamBody)
	if err != nil {
		return 0, false
	}
	if status == http.StatusNotFound {
		o.noTokenize.Store(true)
		return 0, false
	}
	if status/100 != 2 {
		return 0, false
	}
	raw := jsonx.Field(b, "count")
	n, ok := jsonx.Integer(raw)
	if !ok || n < 0 || n != int64(int(n)) {
		return 0, false
	}
	return int(n), true
}

// postTokenize posts body to the /tokenize of the upstream (or replica) at root, beside its /v1, with
// the upstream's key, through the model's transport; it returns the answer's status and at most limit
// bytes of it. Tokenize counts with it, and a model's KV events learn a prompt's tokens (kvevents.go).
func (o *openAI) postTokenize(ctx context.Context, root string, body []byte, limit int64) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, root+"/tokenize", bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if o.key != "" {
		req.Header.Set("Authorization", "Bearer "+o.key)
	}
	resp, err := o.client.Transport.RoundTrip(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	return resp.StatusCode, b, err
}
