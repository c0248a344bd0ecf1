package apierr

import (
	"bytes"
	"encoding/json"
)

// OpenAI is an error in the envelope of OpenAI's APIs (chat completions, models; the edge's routes
// but /v1/messages):
//
//	{"error": {"message": "...", "type": "invalid_request_error", "code": "...", "param": "..."}}
//
// Message is shown to the client as it is: it never carries a credential or internal detail.
type OpenAI struct {
	Message string
	Type    string // "invalid_request_error" when empty
	Code    string // null when empty
	Param   string // null when empty
}

type openAIBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Code    *string `json:"code"`
		Param   *string `json:"param"`
	} `json:"error"`
}

// JSON renders the envelope.
func (e OpenAI) JSON() []byte {
	var body openAIBody
	body.Error.Message, body.Error.Type = e.Message, e.Type
	if body.Error.Type == "" {
		body.Error.Type = "invalid_request_error"
	}
	body.Error.Code, body.Error.Param = nullable(e.Code), nullable(e.Param)
	return marshal(body)
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// marshal writes an envelope as json.Marshal does, but with <, > and & as they are: a message such as
// "Authorization: Bearer <API_KEY>" reads as written in a terminal's curl, not as \u003cAPI_KEY\u003e.
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
