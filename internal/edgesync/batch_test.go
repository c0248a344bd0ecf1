package edgesync

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/edgewire"
	"github.com/svcdev/svc/internal/runs"
)

// readTestBatch reads a POST runs body in either form, as a control plane does, and returns it in the
// first form's shape (which the tests compare against).
func readTestBatch(r *http.Request) (edgewire.RunBatchV1, error) {
	var b edgewire.RunBatchV1
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		return b, err
	}
	if r.Header.Get("Content-Type") != edgewire.ContentTypeRuns {
		err = json.NewDecoder(zr).Decode(&b)
		return b, err
	}
	body, err := io.ReadAll(zr)
	if err != nil {
		return b, err
	}
	h, lines, err := splitLines(body)
	if err != nil {
		return b, err
	}
	b.BatchID, b.Touches = h.Batch, h.Touches
	for _, line := range lines {
		run, err := runs.DecodeRun(line)
		if err != nil {
			return b, err
		}
		b.Runs = append(b.Runs, edgewire.V1Of(run))
	}
	return b, nil
}

// linesClient is a client of a control plane that announced batches in lines.
func linesClient(t *testing.T, url string) *Client {
	t.Helper()
	c, err := NewClient(url, testToken)
	if err != nil {
		t.Fatal(err)
	}
	c.readsLines([]string{edgewire.RunFormLines})
	return c
}

// An edge sends batches in lines only to a control plane whose hello announced them, the first form to
// any other; a control plane that refuses lines as malformed (an older one, after a rollback) gets the
// same batch in the first form at once, and the first form from then on.
func TestBatchFormFollowsTheHello(t *testing.T) {
	var mu sync.Mutex
	var types []string
	refuseLines := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ct := r.Header.Get("Content-Type")
		mu.Lock()
		types = append(types, ct)
		refuse := refuseLines && ct == edgewire.ContentTypeRuns
		mu.Unlock()
		if refuse {
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"error":{"status":400,"code":"invalid_request","message":"batchId is required"}}`))
			return
		}
		b, err := readTestBatch(r)
		if err != nil || b.BatchID != "batch_x" || len(b.Runs) != 1 || b.Runs[0].Request != `{"a": 1}` {
			t.Errorf("read %+v, %v", b, err)
		}
		json.NewEncoder(w).Encode(edgewire.RunBatchResult{Inserted: len(b.Runs)})
	}))
	defer srv.Close()
	c, _ := NewClient(srv.URL, testToken)
	body := headerLine(nil, "batch_x", nil)
	body, _ = runs.AppendLine(body, &runs.Run{ID: "run_1", DeploymentID: "d", Status: "ok", CreatedAt: time.Now(), Request: []byte(`{"a": 1}`)})
	post := func() {
		t.Helper()
		if _, err := c.PostRunBatch(context.Background(), body); err != nil {
			t.Fatal(err)
		}
	}
	post() // no hello yet
	c.readsLines([]string{"something-else"})
	post()
	c.readsLines([]string{edgewire.RunFormLines})
	post()
	refuseLines = true
	post() // refused in lines, taken in the first form
	post() // the first form from then on
	want := []string{"application/json", "application/json", edgewire.ContentTypeRuns, edgewire.ContentTypeRuns, "application/json", "application/json"}
	if !reflect.DeepEqual(types, want) {
		t.Fatalf("content types sent\n%q\nwant\n%q", types, want)
	}
}

// A batch of the first form, left in the spool by an edge of the previous release, is sent in lines
// with the same runs, transcripts byte for byte; and a batch in lines converts to the first form
// losslessly for a control plane that reads only that, but for invalid UTF-8, which the first form's
// strings never carried (encoding/json writes U+FFFD for it).
func TestBatchFormsConvertLosslessly(t *testing.T) {
	at := time.Date(2026, 11, 27, 1, 2, 3, 0, time.UTC)
	rs := []runs.Run{
		{ID: "run_1", DeploymentID: "d", KeyID: "k", Model: "m", Status: "ok", StatusCode: 200, Latency: 7 * time.Millisecond, CreatedAt: at,
			ExpiresAt: at.Add(time.Hour), Request: []byte(`{"messages":[{"content":"<b> & \"q\""}]}`), Response: []byte("data: {}\n\n"), RequestID: "req_1"},
		{ID: "run_2", DeploymentID: "d", Model: "m", Status: "error", StatusCode: 400, CreatedAt: at, Request: []byte("\x00 not json")},
	}
	touches := []edgewire.Touch{{KeyID: "k", UsedAt: at}}
	lines := headerLine(nil, "batch_1", touches)
	for i := range rs {
		lines, _ = runs.AppendLine(lines, &rs[i])
	}
	v1, err := batchV1(lines)
	if err != nil {
		t.Fatal(err)
	}
	if !isV1(v1) {
		t.Fatalf("the first form starts %.20q", v1)
	}
	back, err := batchLines(v1)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, lines) {
		t.Fatalf("lines -> first form -> lines changed the batch:\n%s\nwant\n%s", back, lines)
	}
	bad := runs.Run{ID: "run_3", DeploymentID: "d", Status: "ok", CreatedAt: at, Request: []byte("\xff")}
	v1, _ = batchV1(append(headerLine(nil, "batch_2", nil), must(runs.AppendLine(nil, &bad))...))
	if back, _ := batchLines(v1); !bytes.Contains(back, []byte("\"request\":\"\uFFFD\"")) {
		t.Fatalf("invalid UTF-8 through the first form: %s", back)
	}
	if same, _ := batchLines(lines); !bytes.Equal(same, lines) {
		t.Fatal("a batch in lines was converted")
	}
	if _, err := batchLines([]byte(`{"batchId":"x","runs":[`)); err == nil {
		t.Fatal("a torn first-form batch converted")
	}
	if _, _, err := splitLines(nil); err == nil || !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "header") {
		t.Fatalf("an empty batch split: %v", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
