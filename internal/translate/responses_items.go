package translate

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// Item references ({"type": "item_reference", "id": "msg_…"}), which clients with `store` on send in
// place of an earlier answer's items (the AI SDK's default OpenAI provider does): svc names an output
// item after its response (itemID), and a response is its run, so an item is read back from the run
// as previous_response_id reads the whole response. A translation that meets a reference stops with an
// Error whose References is set; the edge then reads the ids (ItemReferences), loads each run's
// response, puts the items in place (WithItems) and translates the request again. (Looking for
// references in every request first cost an agent's turn more than reading its resent items.)

// ItemReference is one item_reference of a request's input.
type ItemReference struct {
	ID string
	// ResponseID is the response whose output holds the item; "" when the id is not one svc makes.
	ResponseID string
	Path       string // where it stands ("input[3]"), for the error that names it
}

// ItemReferences returns the item references of a Responses body's input, in order; none for a body
// that holds none (checked without parsing when the words are absent).
func ItemReferences(body []byte) []ItemReference {
	if !bytes.Contains(body, []byte("item_reference")) {
		return nil
	}
	var top struct {
		Input json.RawMessage `json:"input"`
	}
	if json.Unmarshal(body, &top) != nil || !isKind(top.Input, '[') {
		return nil
	}
	var items []struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	}
	if json.Unmarshal(top.Input, &items) != nil {
		return nil
	}
	var refs []ItemReference
	for i, it := range items {
		if it.Type == "item_reference" {
			refs = append(refs, ItemReference{ID: it.ID, ResponseID: responseOfItem(it.ID), Path: "input[" + strconv.Itoa(i) + "]"})
		}
	}
	return refs
}

// responseOfItem is the id of the response whose output holds the item svc named id (itemID's
// inverse), "" when id is not in that form.
func responseOfItem(id string) string {
	_, rest, ok := strings.Cut(id, "_")
	if !ok {
		return ""
	}
	i := strings.LastIndexByte(rest, '_')
	if i <= 0 || i == len(rest)-1 || len(rest) > 128 {
		return ""
	}
	tail := rest[:i]
	for _, c := range []byte(tail) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return ""
		}
	}
	for _, c := range []byte(rest[i+1:]) {
		if c < '0' || c > '9' {
			return ""
		}
	}
	return "resp_" + tail
}

// OutputItem returns the output item with this id of a stored response object, nil when it holds none.
func OutputItem(response []byte, id string) json.RawMessage {
	var r struct {
		Output []json.RawMessage `json:"output"`
	}
	if json.Unmarshal(response, &r) != nil {
		return nil
	}
	for _, item := range r.Output {
		var head struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(item, &head) == nil && head.ID == id {
			return item
		}
	}
	return nil
}

// WithItems returns body with each item reference of its input replaced by the item found for its id.
// Every reference must have its item (the edge answers the missing ones before).
func WithItems(body []byte, found map[string]json.RawMessage) ([]byte, *Error) {
	if e := checkStrict(body, false); e != nil {
		return nil, e
	}
	top, e := object(body, "")
	if e != nil {
		return nil, errorf("", "request body must be a JSON object")
	}
	var items []json.RawMessage
	if json.Unmarshal(top["input"], &items) != nil {
		return nil, errorf("input", "must be a string or an array of items")
	}
	for i, raw := range items {
		var head struct {
			Type string `json:"type"`
			ID   string `json:"id"`
		}
		if json.Unmarshal(raw, &head) != nil || head.Type != "item_reference" {
			continue
		}
		item, ok := found[head.ID]
		if !ok {
			return nil, ItemNotFound("input["+strconv.Itoa(i)+"]", head.ID)
		}
		items[i] = item
	}
	top["input"], _ = json.Marshal(items)
	out, mErr := json.Marshal(top)
	if mErr != nil {
		return nil, errorf("", "request cannot be read: %s", mErr.Error())
	}
	return out, nil
}

// ItemNotFound is the error of an item reference svc cannot read, in OpenAI's words for items of a
// response made with `store` off (here: an endpoint whose retention keeps no runs, or a run expired).
func ItemNotFound(path, id string) *Error {
	return &Error{Param: path, Message: "Item with id '" + id + "' not found. Items are not persisted when `store` is set to false, " +
		"or when the endpoint keeps no runs or the run expired. Try again with `store` set to true, or remove this item from your input."}
}
