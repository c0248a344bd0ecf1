package translate

import (
	"encoding/json"
	"fmt"

	"github.com/svcdev/svc/internal/jsonx"
)

// previous_response_id: a response id is the id of its run, and runs keep the request as sent and the
// response object answered. The edge reads the id (PreviousResponseID), loads the run it names and,
// while that request names a previous response itself, the runs before it (oldest first), and
// prepends them to the new request (WithPrevious) before translating it.

// Turn is one earlier response: the request body as sent and the response object answered.
type Turn struct {
	Request, Response []byte
}

// TurnBytes is what an earlier turn adds to the conversation a request continues: the bytes of its
// request's input and its response's output, the items WithPrevious puts before the request's own.
func TurnBytes(t Turn) int {
	return len(jsonx.Object(t.Request)["input"]) + len(jsonx.Object(t.Response)["output"])
}

// ConversationTooLong is the error of a request whose assembled conversation (its body, the turns it
// continues, the items it references) would be longer than max bytes: param names what made it so.
func ConversationTooLong(param string, max int) *Error {
	return errorf(param, "the conversation this request continues is longer than %d MiB; start a new one, or send less of it as input", max>>20)
}

// PreviousResponseID returns the previous_response_id of a Responses request body, "" when it names
// none (or is not a JSON object: the translation reports that).
func PreviousResponseID(body []byte) string {
	if !json.Valid(body) {
		return ""
	}
	return PreviousResponseIDOf(jsonx.Object(body))
}

// PreviousResponseIDOf is PreviousResponseID of a body's top-level members, as the edge has read them
// already.
func PreviousResponseIDOf(members map[string]json.RawMessage) string {
	if raw := members["previous_response_id"]; isKind(raw, '"') {
		return jsonx.String(raw)
	}
	return ""
}

// WithPrevious returns body with the conversation of turns (oldest first) before its own input: each
// turn's input items (a string input as a user message) and output items. As with OpenAI, the
// earlier turns' instructions are not carried over. body keeps its previous_response_id, which the
// response echoes. A turn that cannot be read is an *Error on previous_response_id.
func WithPrevious(body []byte, turns []Turn) ([]byte, *Error) {
	if len(turns) == 0 {
		return body, nil
	}
	if e := checkStrict(body, false); e != nil {
		return nil, e
	}
	top, e := object(body, "")
	if e != nil {
		return nil, errorf("", "request body must be a JSON object")
	}
	var items []json.RawMessage
	for i, t := range turns {
		in, err := inputItems(t.Request, "input")
		if err != nil {
			return nil, errorf("previous_response_id", "the stored request of an earlier response (%d of %d) cannot be continued: %v", i+1, len(turns), err)
		}
		items = append(items, in...)
		var r struct {
			Output []json.RawMessage `json:"output"`
		}
		if err := json.Unmarshal(t.Response, &r); err != nil {
			return nil, errorf("previous_response_id", "the stored answer of an earlier response (%d of %d) cannot be continued: %v", i+1, len(turns), err)
		}
		items = append(items, r.Output...)
	}
	own, err := inputItems(body, "input")
	if err != nil {
		return nil, errorf("input", "%v", err)
	}
	items = append(items, own...)
	merged, _ := json.Marshal(items)
	top["input"] = merged
	out, mErr := json.Marshal(top)
	if mErr != nil {
		return nil, errorf("", "request cannot be continued: %s", mErr.Error())
	}
	return out, nil
}

// inputItems returns a request's input as a list of items: a string input is one user message.
func inputItems(body []byte, field string) ([]json.RawMessage, error) {
	var r map[string]json.RawMessage
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	raw := r[field]
	switch {
	case isNull(raw):
		return nil, nil
	case isKind(raw, '"'):
		var s string
		json.Unmarshal(raw, &s)
		msg, _ := json.Marshal(map[string]string{"type": "message", "role": "user", "content": s})
		return []json.RawMessage{msg}, nil
	case isKind(raw, '['):
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, fmt.Errorf("input is not an array of items")
		}
		return list, nil
	}
	return nil, fmt.Errorf("input must be a string or an array of items")
}
