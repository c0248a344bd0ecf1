package edgewire

import (
	"strconv"
	"time"

	"github.com/svcdev/svc/internal/jsonx"
)

// A Run crosses the internal API once per request an edge answers: the edge writes it and the control
// plane reads it, and encoding/json's reflection cost both more than the rest of the trip (the
// transcripts are strings of escaped JSON). So both are written by hand, as encoding/json writes and
// reads them: AppendJSON byte for byte as json.Marshal (TestRunAppendJSONWritesAsMarshal,
// FuzzRunJSON), ReadJSON as json.Unmarshal or not at all (FuzzRunJSON), so that the wire format is the
// one every edge and control plane already speak.

// AppendJSON appends the run as json.Marshal writes it. It fails as json.Marshal does, on a time
// outside the years 0-9999.
func (r *Run) AppendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"id":`...)
	b = jsonx.AppendString(b, r.ID)
	b = jsonx.AppendString(append(b, `,"deploymentId":`...), r.DeploymentID)
	if r.KeyID != "" {
		b = jsonx.AppendString(append(b, `,"keyId":`...), r.KeyID)
	}
	b = jsonx.AppendString(append(b, `,"model":`...), r.Model)
	b = jsonx.AppendString(append(b, `,"status":`...), r.Status)
	if r.StatusCode != 0 {
		b = strconv.AppendInt(append(b, `,"statusCode":`...), int64(r.StatusCode), 10)
	}
	if r.ErrorCode != "" {
		b = jsonx.AppendString(append(b, `,"errorCode":`...), r.ErrorCode)
	}
	b = strconv.AppendInt(append(b, `,"latencyMs":`...), r.LatencyMs, 10)
	b = strconv.AppendInt(append(b, `,"promptTokens":`...), int64(r.PromptTokens), 10)
	b = strconv.AppendInt(append(b, `,"completionTokens":`...), int64(r.CompletionTokens), 10)
	var err error
	if b, err = appendTime(append(b, `,"createdAt":`...), r.CreatedAt); err != nil {
		return b, err
	}
	b = append(b, `,"expiresAt":`...)
	if r.ExpiresAt == nil {
		b = append(b, "null"...)
	} else if b, err = appendTime(b, *r.ExpiresAt); err != nil {
		return b, err
	}
	b = jsonx.AppendString(append(b, `,"request":`...), r.Request)
	b = jsonx.AppendString(append(b, `,"response":`...), r.Response)
	if r.RequestID != "" {
		b = jsonx.AppendString(append(b, `,"requestId":`...), r.RequestID)
	}
	if r.UpstreamRequestID != "" {
		b = jsonx.AppendString(append(b, `,"upstreamRequestId":`...), r.UpstreamRequestID)
	}
	if r.TraceID != "" {
		b = jsonx.AppendString(append(b, `,"traceId":`...), r.TraceID)
	}
	if r.UsageOnly {
		b = append(b, `,"usageOnly":true`...)
	}
	return append(b, '}'), nil
}

// appendTime writes t as time.Time's MarshalJSON does (RFC 3339 with nanoseconds, which needs no
// escaping).
func appendTime(b []byte, t time.Time) ([]byte, error) {
	out, err := t.AppendText(append(b, '"'))
	if err != nil {
		return b, err
	}
	return append(out, '"'), nil
}

// ReadJSON reads the run object at the cursor into r, which must be the zero Run, as json.Unmarshal
// would, and reports whether it could: it reads only what an edge writes (the members of Run, by
// their exact names, each of its own kind or null), and leaves anything else (an unknown or
// differently cased name, a value of another kind, a number that is not an int64) to encoding/json,
// whose answer, a decoded run or an error, is then the one that counts. It reads nothing past the run.
func (r *Run) ReadJSON(c *jsonx.Cursor) bool {
	if c.Kind() != '{' {
		return false
	}
	ok := true
	c.Object(func(name []byte) {
		if !ok {
			return
		}
		switch string(name) {
		case "id":
			ok = readString(c, &r.ID)
		case "deploymentId":
			ok = readString(c, &r.DeploymentID)
		case "keyId":
			ok = readString(c, &r.KeyID)
		case "model":
			ok = readString(c, &r.Model)
		case "status":
			ok = readString(c, &r.Status)
		case "statusCode":
			ok = readInt(c, &r.StatusCode)
		case "errorCode":
			ok = readString(c, &r.ErrorCode)
		case "latencyMs":
			ok = readInt(c, &r.LatencyMs)
		case "promptTokens":
			ok = readInt(c, &r.PromptTokens)
		case "completionTokens":
			ok = readInt(c, &r.CompletionTokens)
		case "createdAt":
			ok = readTime(c, &r.CreatedAt)
		case "expiresAt":
			if c.Kind() == 'n' {
				ok, r.ExpiresAt = readNull(c), nil
				return
			}
			var t time.Time
			if ok = readTime(c, &t); ok {
				r.ExpiresAt = &t
			}
		case "request":
			ok = readString(c, &r.Request)
		case "response":
			ok = readString(c, &r.Response)
		case "requestId":
			ok = readString(c, &r.RequestID)
		case "upstreamRequestId":
			ok = readString(c, &r.UpstreamRequestID)
		case "traceId":
			ok = readString(c, &r.TraceID)
		case "usageOnly":
			switch raw := c.Raw(); string(raw) {
			case "true":
				r.UsageOnly = true
			case "false":
				r.UsageOnly = false
			case "null":
			default:
				ok = false
			}
		default:
			ok = false
		}
	})
	return ok && !c.Bad()
}

// readNull reads a null; encoding/json leaves the field as it was.
func readNull(c *jsonx.Cursor) bool { return string(c.Raw()) == "null" }

func readString(c *jsonx.Cursor, into *string) bool {
	if c.Kind() != '"' {
		return readNull(c)
	}
	s, ok := jsonx.Unquote(c.Raw())
	if ok {
		*into = s
	}
	return ok
}

func readInt[T int | int64](c *jsonx.Cursor, into *T) bool {
	if c.Kind() == 'n' {
		return readNull(c)
	}
	n, ok := jsonx.Integer(c.Raw())
	if ok {
		*into = T(n)
	}
	return ok
}

func readTime(c *jsonx.Cursor, into *time.Time) bool {
	if c.Kind() != '"' {
		return readNull(c)
	}
	return into.UnmarshalJSON(c.Raw()) == nil
}
