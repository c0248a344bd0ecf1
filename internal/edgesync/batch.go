package edgesync

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/svcdev/svc/internal/edgewire"
	"github.com/svcdev/svc/internal/runs"
)

// A sealed batch is kept, spooled and split in lines (edgewire.ContentTypeRuns): a header line, then a
// line per run. It goes on the wire in that form to a control plane whose hello announced it, and in
// the first form (edgewire.RunBatchV1) to any other, converted as it is sent (Client.PostRunBatch). A
// spool written by an edge of the previous release holds first-form batches: they are read back in
// lines (batchLines).

// batchLines returns a sealed batch's body in lines: as it is, or converted from the first form.
func batchLines(body []byte) ([]byte, error) {
	if !isV1(body) {
		return body, nil
	}
	var v1 edgewire.RunBatchV1
	if err := json.Unmarshal(body, &v1); err != nil {
		return nil, err
	}
	out, _ := json.Marshal(edgewire.BatchHeader{Batch: v1.BatchID, Touches: v1.Touches})
	out = append(out, '\n')
	for _, r := range v1.Runs {
		run := r.Run()
		var err error
		if out, err = runs.AppendLine(out, &run); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// isV1 reports whether a batch body is of the first form: one object, opened by its batchId.
func isV1(body []byte) bool { return bytes.HasPrefix(body, []byte(`{"batchId":`)) }

// batchV1 converts a batch in lines to the first form, for a control plane that reads no other.
func batchV1(body []byte) ([]byte, error) {
	h, lines, err := splitLines(body)
	if err != nil {
		return nil, err
	}
	v1 := edgewire.RunBatchV1{BatchID: h.Batch, Touches: h.Touches, Runs: make([]edgewire.RunV1, 0, len(lines))}
	for i, line := range lines {
		r, err := runs.DecodeRun(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+2, err)
		}
		v1.Runs = append(v1.Runs, edgewire.V1Of(r))
	}
	return json.Marshal(v1)
}

// splitLines cuts a batch in lines into its header and its run lines (slices of body).
func splitLines(body []byte) (edgewire.BatchHeader, [][]byte, error) {
	var h edgewire.BatchHeader
	l := runs.NewLines(bytes.NewReader(body), len(body))
	head, err := l.Next()
	if err != nil {
		return h, nil, fmt.Errorf("no header line: %w", err)
	}
	if err := json.Unmarshal(head, &h); err != nil {
		return h, nil, err
	}
	var lines [][]byte
	for {
		line, err := l.Next()
		if errors.Is(err, io.EOF) {
			return h, lines, nil
		}
		if err != nil {
			return h, nil, err
		}
		lines = append(lines, bytes.Clone(line))
	}
}

// headerLine opens a batch in lines.
func headerLine(dst []byte, id string, touches []edgewire.Touch) []byte {
	h, _ := json.Marshal(edgewire.BatchHeader{Batch: id, Touches: touches}) // strings and times: cannot fail
	return append(append(dst, h...), '\n')
}
