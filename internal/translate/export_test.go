package translate

import "encoding/json"

// Shorthands that only the tests use.

// TokenizeCount reads the count of a vLLM /tokenize answer ({"count": N, "tokens": [...],
// "max_model_len": M}); ok is false when the answer holds no count.
func TokenizeCount(answer []byte) (count int, ok bool) {
	var r struct {
		Count *int `json:"count"`
	}
	if json.Unmarshal(answer, &r) != nil || r.Count == nil || *r.Count < 0 {
		return 0, false
	}
	return *r.Count, true
}

// MessagesToChat is MessagesToChatWith with default Options (reasoning_effort controls, signatures
// under an empty key).
func MessagesToChat(body []byte) (chat []byte, info *RequestInfo, err *Error) {
	return MessagesToChatWith(body, Options{})
}

// MessagesToChatWith is MessagesRequest with the chat request encoded whole, as the tests read it.
func MessagesToChatWith(body []byte, opts Options) (chat []byte, info *RequestInfo, err *Error) {
	t := &translator{opts: opts}
	out, e := t.translate(body)
	if e != nil {
		return nil, nil, e
	}
	chat, mErr := json.Marshal(out)
	if mErr != nil {
		return nil, nil, errorf("", "request cannot be translated: %s", mErr.Error())
	}
	return chat, &t.info, nil
}

// ResponsesToChat is ResponsesRequest with the chat request encoded whole, as the tests read it.
func ResponsesToChat(body []byte, opts Options) (chat []byte, info *ResponsesInfo, err *Error) {
	out, info, e := responsesRequest(body, opts)
	if e != nil {
		return nil, nil, e
	}
	chat, mErr := json.Marshal(out)
	if mErr != nil {
		return nil, nil, errorf("", "request cannot be translated: %s", mErr.Error())
	}
	return chat, info, nil
}
