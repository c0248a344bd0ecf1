package edgesync

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"
)

// A batch the control plane answers 5xx again and again may hold a run it cannot store (a poisoned
// batch), and batches are sent in order: retried for ever, it would hold back every later run. So
// after ServerErrors 5xx answers a batch is split in halves, each sent on its own (with fresh batch
// ids; the control plane applies each run once by its id), down to single runs. A single run still
// answered 5xx is set aside (counted in svc_edge_sync_runs_refused_total, logged by its id) only when
// the control plane shows that its store answers (it takes an empty batch, which opens a transaction
// in the store, at once) and the run still gets ServerErrors 5xx answers after that. Otherwise the store is away (a database outage answers 500 too) and the run is retried
// as before. Failures to reach the control plane never count: that is an outage, not a poisoned batch.

// deliver sends a sealed batch, splitting it when the control plane keeps answering it 5xx. It
// returns false when Close's deadline passed first (the batch, whole, stays in the spool when spooled).
func (s *Shipper) deliver(b sealed, body []byte, spooled bool, stopping *bool) bool {
	for {
		done, poisoned := s.send(b, body, spooled, stopping)
		if !poisoned {
			return done
		}
		if b.runs > 1 {
			parts, err := splitBatch(body)
			if err == nil {
				s.fails.Log(context.Background(), slog.LevelWarn, "edge: the control plane keeps answering a run batch 5xx; sending it in halves", "",
					slog.Int("runs", b.runs), slog.Int("attempts", s.o.ServerErrors))
				for _, p := range parts {
					if !s.deliver(p, p.body, spooled, stopping) {
						return false
					}
				}
				return true
			}
		}
		// One run (or key uses alone) that the control plane keeps answering 5xx: set it aside, unless
		// the store is away for every batch. With the store answering, the run is tried once more (as
		// many times): an outage that ended just before the probe is not a poisoned run.
		if s.storesEmptyBatch(stopping) {
			done, poisoned := s.send(b, body, spooled, stopping)
			if !poisoned {
				return done
			}
			s.setAsideBatch(b, body)
			return true
		}
		if *stopping {
			return false
		}
	}
}

// storesEmptyBatch reports whether the control plane takes a batch with no runs now (its store
// answers).
func (s *Shipper) storesEmptyBatch(stopping *bool) bool {
	if *stopping {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := s.client.PostRunBatch(ctx, headerLine(nil, newBatchID(), nil))
	return err == nil
}

// setAsideBatch counts and logs a batch of at most one run that the control plane answered 5xx past
// the bound: by its run id, never its content.
func (s *Shipper) setAsideBatch(b sealed, body []byte) {
	s.refused.Add(float64(b.runs))
	id := ""
	if _, lines, err := splitLines(body); err == nil && len(lines) > 0 {
		var in struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(lines[0], &in)
		id = in.ID
	}
	s.fails.Log(context.Background(), slog.LevelError, "edge: the control plane answers a run 5xx every time it is sent; it is set aside and not sent again", "",
		slog.String("run_id", id), slog.Int("runs", b.runs), slog.Int("attempts", s.o.ServerErrors))
}

// splitBatch cuts a batch in two batches with fresh ids, each with half of its run lines, kept as they
// were encoded; the key uses go with the first.
func splitBatch(body []byte) ([]sealed, error) {
	h, lines, err := splitLines(body)
	if err != nil {
		return nil, err
	}
	if len(lines) < 2 {
		return nil, errors.New("nothing to split")
	}
	half := len(lines) / 2
	touches := h.Touches
	var out []sealed
	for _, part := range [][][]byte{lines[:half], lines[half:]} {
		id := newBatchID()
		buf := headerLine(nil, id, touches)
		touches = nil
		for _, line := range part {
			buf = append(append(buf, line...), '\n')
		}
		out = append(out, sealed{id: id, runs: len(part), body: buf})
	}
	return out, nil
}

// serverError reports whether err is a 5xx answer from the control plane (not a failure to reach it).
func serverError(err error) bool {
	var ue *unreachableError
	return errors.As(err, &ue) && ue.status >= http.StatusInternalServerError
}
