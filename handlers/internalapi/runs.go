package internalapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/klauspost/compress/gzip"
	"github.com/svcdev/svc/internal/apierr"
	"github.com/svcdev/svc/internal/bodydeadline"
	"github.com/svcdev/svc/internal/core"
	"github.com/svcdev/svc/internal/edgewire"
	"github.com/svcdev/svc/internal/runs"
)

// runs applies a batch of runs and key uses shipped by an edge, once however often it is sent. The
// batch is bounded in bytes (edgewire.MaxRunBatchBytes, before and after gzip) and in runs
// (edgewire.MaxRunBatchRuns), and refused past either with a 413 that says which. A large batch is
// never whole in memory: the body is first taken off the network (into a temporary file past a few
// MiB, so that a slow sender never holds the database's write lock), then its runs are decoded one at
// a time as they are written (decodeBatch).
func (h *Handler) runs(w http.ResponseWriter, r *http.Request, tok core.EdgeToken) {
	if r.ContentLength > edgewire.MaxRunBatchBytes {
		writeBatchError(w, errBatchTooLarge)
		return
	}
	body, err := spill(http.MaxBytesReader(w, r.Body, edgewire.MaxRunBatchBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			writeBatchError(w, errBatchTooLarge)
		case bodydeadline.Exceeded(err):
			w.Header().Set("Connection", "close") // the rest of the body is still on its way
			apierr.WriteAPI(w, apierr.CodeRequestTimeout, bodydeadline.Message)
		default:
			apierr.WriteAPI(w, edgemodel.CodeInvalidRequest, "could not read the body")
		}
		return
	}
	defer body.Close()
	var src io.Reader = body
	if strings.EqualFold(r.Header.Get("Content-Encoding"), "gzip") {
		zr, err := gzip.NewReader(body)
		if err != nil {
			apierr.WriteAPI(w, edgemodel.CodeInvalidRequest, "the body is not valid gzip")
			return
		}
		defer zr.Close()
		src = zr
	}
	// The cap applies to what the body inflates to as well.
	src = &capReader{r: src, left: edgewire.MaxRunBatchBytes}
	batch := &runs.Batch{Touches: map[string]time.Time{}}
	batch.Runs = decodeBatch(src, r.Header.Get("Content-Type"), batch)
	res, err := h.svc.IngestRuns(r.Context(), batch)
	if err != nil {
		var be *batchError
		if errors.As(err, &be) {
			writeBatchError(w, be)
			return
		}
		h.fail(w, r, err)
		return
	}
	if res.Rejected > 0 {
		h.log.Info("edge runs of deleted deployments dropped", "edge_token", tok.Name, "runs", res.Rejected)
	}
	out := edgewire.RunBatchResult{Inserted: res.Inserted, UsageOnly: res.UsageOnly, Duplicates: res.Duplicates, Rejected: res.Rejected, Replayed: res.Replayed}
	for _, f := range res.Refused {
		out.Refused = append(out.Refused, edgewire.RefusedRun{ID: f.ID, Reason: f.Reason})
	}
	if len(out.Refused) > 0 {
		h.log.Warn("edge runs refused by the store were set aside", "edge_token", tok.Name, "runs", len(out.Refused), "first_run_id", out.Refused[0].ID)
	}
	b, _ := json.Marshal(out)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(append(b, '\n'))
}

// batchError is a batch refused for what it is (malformed or too large): the edge will not send it
// again.
type batchError struct {
	code    string // core.CodeInvalidRequest or apierr.CodeBodyTooLarge
	message string
}

func (e *batchError) Error() string { return e.message }

func invalidBatch(format string, args ...any) *batchError {
	return &batchError{code: edgemodel.CodeInvalidRequest, message: fmt.Sprintf(format, args...)}
}

var (
	errBatchTooLarge = &batchError{code: apierr.CodeBodyTooLarge,
		message: fmt.Sprintf("a run batch is at most %d MiB (gzip-compressed or not); send smaller batches", edgewire.MaxRunBatchBytes>>20)}
	errRunTooLarge = &batchError{code: apierr.CodeBodyTooLarge,
		message: fmt.Sprintf("a run of a batch (or any other value in it) is at most %d MiB of JSON; ship a larger run without its transcript", edgewire.MaxRunBytes>>20)}
	errBatchTooMany = &batchError{code: apierr.CodeBodyTooLarge,
		message: fmt.Sprintf("a run batch holds at most %d runs; send smaller batches", edgewire.MaxRunBatchRuns)}
)

func writeBatchError(w http.ResponseWriter, e *batchError) {
	apierr.WriteAPI(w, e.code, e.message)
}

// decodeBatch yields the runs of a run batch body one at a time, checked, and fills in the batch's id
// and key uses: a batch in lines (edgewire.ContentTypeRuns) by decodeLines, the first form (one JSON
// object, from an edge of the previous release) by decodeV1. Unknown fields are ignored rather than
// refused: during a rolling upgrade a newer edge may send more than this control plane knows.
func decodeBatch(src io.Reader, contentType string, b *runs.Batch) func(yield func(runs.Shipped, error) bool) {
	if mt, _, _ := strings.Cut(contentType, ";"); strings.EqualFold(strings.TrimSpace(mt), edgewire.ContentTypeRuns) {
		return decodeLines(src, b)
	}
	return decodeV1(src, b)
}

// batchFailure is err as a batch's reader yields it: a batchError as it is, anything else (a broken
// read, malformed JSON) as not a batch.
func batchFailure(err error) error {
	var be *batchError
	if !errors.As(err, &be) {
		err = notABatch(err)
	}
	return err
}

// decodeLines reads a batch in lines: its header, then one run per line, each decoded (runs.DecodeRun)
// as it is read, so that a batch of any size is held one run at a time (a line is at most
// edgewire.MaxRunBytes).
func decodeLines(src io.Reader, b *runs.Batch) func(yield func(runs.Shipped, error) bool) {
	return func(yield func(runs.Shipped, error) bool) {
		fail := func(err error) { yield(runs.Shipped{}, batchFailure(err)) }
		lines := runs.NewLines(src, edgewire.MaxRunBytes)
		head, err := lines.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = invalidBatch("the body is empty: a run batch starts with its header line")
			}
			fail(err)
			return
		}
		var h edgewire.BatchHeader
		if err := json.Unmarshal(head, &h); err != nil {
			fail(invalidBatch("line 1 is not a batch header: %v", err))
			return
		}
		if h.Batch == "" || len(h.Batch) > 100 {
			fail(invalidBatch("line 1: batch (the batch id) is required, at most 100 characters"))
			return
		}
		if err := addTouches(h.Touches, b.Touches); err != nil {
			fail(err)
			return
		}
		b.ID = h.Batch
		for n := 0; ; n++ {
			line, err := lines.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				fail(err)
				return
			}
			if n == edgewire.MaxRunBatchRuns {
				fail(errBatchTooMany)
				return
			}
			in, err := runs.DecodeRun(line)
			if err != nil {
				fail(invalidBatch("line %d is not a run: %v", n+2, err))
				return
			}
			run, err := shippedRun(n, in)
			if err != nil {
				fail(err)
				return
			}
			if !yield(run, nil) {
				return
			}
		}
	}
}

// decodeV1 reads a batch of the first form (edgewire.RunBatchV1) by encoding/json, as the body is
// read. Deprecated with that form: removed in the release after this one.
func decodeV1(src io.Reader, b *runs.Batch) func(yield func(runs.Shipped, error) bool) {
	return func(yield func(runs.Shipped, error) bool) {
		fail := func(err error) { yield(runs.Shipped{}, batchFailure(err)) }
		held := &heldReader{r: src}
		dec := json.NewDecoder(held)
		held.dec = dec
		if err := expect(dec, json.Delim('{')); err != nil {
			fail(err)
			return
		}
		n := 0
		for dec.More() {
			t, err := dec.Token()
			if err != nil {
				fail(err)
				return
			}
			switch t {
			case "batchId":
				err = dec.Decode(&b.ID)
			case "touches":
				err = decodeTouches(dec, b.Touches)
			case "runs":
				var t json.Token
				if t, err = dec.Token(); err != nil || t == nil { // null: no runs
					break
				}
				if t != json.Delim('[') {
					err = fmt.Errorf("runs must be an array, found %v", t)
					break
				}
				for dec.More() {
					if n == edgewire.MaxRunBatchRuns {
						fail(errBatchTooMany)
						return
					}
					var in edgewire.RunV1
					if err := dec.Decode(&in); err != nil {
						fail(err)
						return
					}
					run, err := shippedRun(n, in.Run())
					if err != nil {
						fail(err)
						return
					}
					n++
					if !yield(run, nil) {
						return
					}
				}
				err = expect(dec, json.Delim(']'))
			default:
				var skip json.RawMessage
				err = dec.Decode(&skip)
			}
			if err != nil {
				fail(err)
				return
			}
		}
		if err := expect(dec, json.Delim('}')); err != nil {
			fail(err)
			return
		}
		if b.ID == "" || len(b.ID) > 100 {
			fail(invalidBatch("batchId is required (at most 100 characters)"))
		}
	}
}

// notABatch names what made a body unreadable as a batch; a body over the cap says so.
func notABatch(err error) error {
	if errors.Is(err, errCapped) {
		return errBatchTooLarge
	}
	if errors.Is(err, errValueTooLarge) || errors.Is(err, runs.ErrLineTooLong) {
		return errRunTooLarge
	}
	if errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) {
		return invalidBatch("the body is not valid gzip")
	}
	return invalidBatch("the body is not a run batch: %v", err)
}

// expect reads the next token and checks that it is want.
func expect(dec *json.Decoder, want json.Delim) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if t != want {
		return fmt.Errorf("expected %v, found %v", want, t)
	}
	return nil
}

func decodeTouches(dec *json.Decoder, into map[string]time.Time) error {
	var in []edgewire.Touch
	if err := dec.Decode(&in); err != nil {
		return err
	}
	return addTouches(in, into)
}

// addTouches checks a batch's key uses and keeps the latest of each key.
func addTouches(in []edgewire.Touch, into map[string]time.Time) error {
	for i, t := range in {
		if t.KeyID == "" || t.UsedAt.IsZero() {
			return invalidBatch("touches[%d] needs keyId and usedAt", i)
		}
		if t.UsedAt.After(into[t.KeyID]) {
			into[t.KeyID] = t.UsedAt
		}
	}
	return nil
}

// shippedRun checks run i of a batch.
func shippedRun(i int, r runs.Run) (runs.Shipped, error) {
	switch {
	case r.ID == "" || len(r.ID) > 100:
		return runs.Shipped{}, invalidBatch("runs[%d].id is required (at most 100 characters)", i)
	case r.DeploymentID == "":
		return runs.Shipped{}, invalidBatch("runs[%d].deploymentId is required", i)
	case r.Status != "ok" && r.Status != "error":
		return runs.Shipped{}, invalidBatch("runs[%d].status must be \"ok\" or \"error\"", i)
	case r.CreatedAt.IsZero():
		return runs.Shipped{}, invalidBatch("runs[%d].createdAt is required", i)
	case r.TraceID != "" && !isTraceID(r.TraceID):
		return runs.Shipped{}, invalidBatch("runs[%d].traceId is a trace id of 32 hex digits, or empty", i)
	}
	return runs.Shipped{ID: r.ID, Run: r}, nil
}

// errCapped is a batch body that inflates past the cap.
var errCapped = errors.New("run batch over the size cap")

// capReader reads at most left bytes and fails with errCapped past them.
type capReader struct {
	r    io.Reader
	left int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		// One byte more tells a body of exactly the cap from a larger one.
		var one [1]byte
		if n, _ := c.r.Read(one[:]); n > 0 {
			return 0, errCapped
		}
		return c.r.Read(p)
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// errValueTooLarge is a value of a batch body larger than edgewire.MaxRunBytes.
var errValueTooLarge = errors.New("a value of the run batch is over the size cap")

// heldReader feeds decodeStream's decoder and fails with errValueTooLarge once the decoder holds more
// than edgewire.MaxRunBytes (and one read) of the body past its position: encoding/json buffers a
// whole value before it decodes it, so that one long string in a well-compressed body would otherwise
// be held whole, and copied, however large (64 MiB inflated: 222 MiB of heap; docs/OPERATIONS.md,
// "Memory").
type heldReader struct {
	r    io.Reader
	dec  *json.Decoder
	read int64
}

func (h *heldReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	h.read += int64(n)
	if h.read-h.dec.InputOffset() > edgewire.MaxRunBytes+64<<10 {
		return n, errValueTooLarge
	}
	return n, err
}

// spillAfter is how much of a run batch body is held in memory; the rest waits in a temporary file.
// The edges' batches (about 4 MiB at most) stay in memory.
const spillAfter = 4 << 20

// spilledBody is a request body taken off the network, to be read again.
type spilledBody struct {
	io.Reader
	file *os.File
}

// spill reads src to its end, holding up to spillAfter bytes in memory and the rest in a temporary
// file (in memory too when no temporary file can be made).
func spill(src io.Reader) (*spilledBody, error) {
	var head bytes.Buffer
	if _, err := io.CopyN(&head, src, spillAfter); err != nil {
		if errors.Is(err, io.EOF) {
			return &spilledBody{Reader: &head}, nil
		}
		return nil, err
	}
	f, err := os.CreateTemp("", "svc-run-batch-*")
	if err != nil {
		if _, err := head.ReadFrom(src); err != nil {
			return nil, err
		}
		return &spilledBody{Reader: &head}, nil
	}
	s := &spilledBody{file: f}
	if _, err := io.Copy(f, src); err != nil {
		s.Close()
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		s.Close()
		return nil, err
	}
	s.Reader = io.MultiReader(&head, bufio.NewReaderSize(f, 64<<10))
	return s, nil
}

// Close removes the temporary file, if there is one.
func (s *spilledBody) Close() {
	if s.file != nil {
		s.file.Close()
		os.Remove(s.file.Name())
	}
}

// isTraceID reports whether s is a W3C trace id: 32 lowercase hex digits.
func isTraceID(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
