package translate

import (
	"encoding/json"
	"strconv"

	"github.com/svcdev/svc/internal/jsonx"
)

// The events of a streamed text answer and the items they carry, written by hand as encoding/json
// writes them (the same members, in the same order, the same escaping: TestAppendersWriteAsMarshal):
// every translated answer writes them, and encoding/json's reflection cost more than the rest of the
// stream's translation. Types without an appender are written by encoding/json (appendMarshaled).

// appender is a value that writes its own JSON.
type appender interface{ appendJSON(b []byte) []byte }

func (m outputMessage) appendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = jsonx.AppendString(b, m.ID)
	b = append(b, `,"type":`...)
	b = jsonx.AppendString(b, m.Type)
	b = append(b, `,"status":`...)
	b = jsonx.AppendString(b, m.Status)
	b = append(b, `,"role":`...)
	b = jsonx.AppendString(b, m.Role)
	b = append(b, `,"content":`...)
	if m.Content == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, t := range m.Content {
			if i > 0 {
				b = append(b, ',')
			}
			b = t.appendJSON(b)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

func (t outputText) appendJSON(b []byte) []byte {
	b = append(b, `{"type":`...)
	b = jsonx.AppendString(b, t.Type)
	b = append(b, `,"text":`...)
	b = jsonx.AppendString(b, t.Text)
	b = appendAnyList(append(b, `,"annotations":`...), t.Annotations)
	b = appendAnyList(append(b, `,"logprobs":`...), t.Logprobs)
	return append(b, '}')
}

// appendAnyList writes a list of values: null, [], or what encoding/json writes of its elements.
func appendAnyList(b []byte, l []any) []byte {
	switch {
	case l == nil:
		return append(b, "null"...)
	case len(l) == 0:
		return append(b, "[]"...)
	}
	return appendMarshaled(b, l)
}

func (e *itemEvent) appendJSON(b []byte) []byte {
	b = append(b, `{"type":`...)
	b = jsonx.AppendString(b, e.Type)
	b = strconv.AppendInt(append(b, `,"output_index":`...), int64(e.OutputIndex), 10)
	b = appendMarshaled(append(b, `,"item":`...), e.Item)
	return e.seqNum.closeEvent(b)
}

func (e *partEvent) appendJSON(b []byte) []byte {
	b = openContentEvent(b, e.Type, e.ItemID, e.OutputIndex, e.ContentIndex)
	b = appendMarshaled(append(b, `,"part":`...), e.Part)
	return e.seqNum.closeEvent(b)
}

func (e *textDoneEvent) appendJSON(b []byte) []byte {
	start := len(b)
	b = openContentEvent(b, e.Type, e.ItemID, e.OutputIndex, e.ContentIndex)
	b = append(b, `,"text":`...)
	b = jsonx.AppendString(b, e.Text)
	switch {
	case len(e.Logprobs) == 0: // omitempty
	case string(e.Logprobs) == "[]": // noLogprobs, the only value svc sends
		b = append(b, `,"logprobs":[]`...)
	default:
		return appendMarshaledValue(b[:start], e)
	}
	return e.seqNum.closeEvent(b)
}

// openContentEvent opens an event about one content part of an item: its type, item_id,
// output_index and content_index.
func openContentEvent(b []byte, typ, itemID string, outputIndex, contentIndex int) []byte {
	b = append(b, `{"type":`...)
	b = jsonx.AppendString(b, typ)
	b = append(b, `,"item_id":`...)
	b = jsonx.AppendString(b, itemID)
	b = strconv.AppendInt(append(b, `,"output_index":`...), int64(outputIndex), 10)
	return strconv.AppendInt(append(b, `,"content_index":`...), int64(contentIndex), 10)
}

// closeEvent closes an event with its sequence_number (not appendJSON: the events that embed seqNum
// without an appender of their own must not take it for one).
func (n seqNum) closeEvent(b []byte) []byte {
	b = strconv.AppendInt(append(b, `,"sequence_number":`...), int64(n.SequenceNumber), 10)
	return append(b, '}')
}

// appendMarshaledValue is encoding/json's writing of v, for a value an appender leaves to it.
func appendMarshaledValue(b []byte, v any) []byte {
	m, err := json.Marshal(v)
	if err != nil {
		return append(b, "null"...)
	}
	return append(b, m...)
}
