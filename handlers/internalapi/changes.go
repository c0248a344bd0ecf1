package internalapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/internal/apierr"
	"github.com/svcdev/svc/internal/core"
	"github.com/svcdev/svc/internal/edgewire"
	"github.com/svcdev/svc/internal/sse"
)

// feedPage is how many changes are read at once. A follower further behind than one page at connect
// time is told to start over instead (a reset is one event; replaying a long backlog is not).
const feedPage = 1000

// changes holds the change feed open: a hello, then every change as it commits, and a heartbeat when
// idle. It ends when the edge goes away, the server shuts down, or the edge token is revoked (checked
// at each heartbeat).
func (h *Handler) changes(w http.ResponseWriter, r *http.Request, tok core.EdgeToken) {
	ctx := r.Context()
	after := int64(-1) // no position: start over from the head
	if s := r.URL.Query().Get("after"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			apierr.WriteAPI(w, edgemodel.CodeInvalidRequest, "after must be a change id (a whole number of 0 or more)")
			return
		}
		after = v
	}
	signal := h.svc.EdgeChangeSignal()
	changes, head, reset, err := h.svc.EdgeChangesAfter(ctx, after, feedPage+1)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if len(changes) > feedPage {
		reset, changes = true, nil
	}
	out := sse.NewWriter(w)
	pos := after
	if reset {
		pos = head
	}
	if send(out, edgewire.EventHello, h.hello(head, reset), len(changes) > 0) != nil {
		return
	}
	h.log.Debug("edge feed connected", "edge_token", tok.Name, "after", after, "head", head, "reset", reset)
	if pos, err = sendChanges(out, changes, pos); err != nil {
		return
	}

	beat := time.NewTicker(h.heartbeat)
	defer beat.Stop()
	for {
		heartbeat := false
		select {
		case <-ctx.Done():
			return
		case <-h.stop:
			return
		case <-signal:
		case <-beat.C:
			heartbeat = true
		}
		if heartbeat {
			// A revoked token loses its feed here; its next reconnect is refused.
			if _, err := h.svc.AuthenticateEdge(ctx, bearer(r)); err != nil {
				return
			}
		}
		// Read until caught up. Heartbeats read too: changes written by another process (or missed
		// signals) still reach the edge within a heartbeat.
		for {
			signal = h.svc.EdgeChangeSignal()
			changes, head, reset, err = h.svc.EdgeChangesAfter(ctx, pos, feedPage)
			if err != nil {
				if ctx.Err() == nil {
					h.log.Warn("edge feed: reading changes failed", "err", err)
				}
				return
			}
			if reset {
				// The database went back (restored from a backup): the edge starts over.
				pos = head
				if send(out, edgewire.EventHello, h.hello(head, true), false) != nil {
					return
				}
				break
			}
			if pos, err = sendChanges(out, changes, pos); err != nil {
				return
			}
			if len(changes) < feedPage {
				break
			}
		}
		if heartbeat && send(out, edgewire.EventHeartbeat, edgewire.Heartbeat{Head: pos}, false) != nil {
			return
		}
	}
}

// hello opens (or restarts) the feed. It carries the thinking signatures' key, so that every edge
// signs and verifies as the control plane does, and keeps it in its spool folder for restarts.
func (h *Handler) hello(head int64, reset bool) edgewire.Hello {
	return edgewire.Hello{Head: head, Reset: reset, ThinkingSecret: h.secret, RunForms: []string{edgewire.RunFormLines}}
}

// sendChanges sends changes in one flush and returns the new position.
func sendChanges(out *sse.Writer, changes []core.EdgeChange, pos int64) (int64, error) {
	for i, c := range changes {
		if err := send(out, edgewire.EventChange, edgewire.Change{ID: c.ID, Slug: c.Slug}, i < len(changes)-1); err != nil {
			return pos, err
		}
		pos = c.ID
	}
	return pos, nil
}

func send(out *sse.Writer, event string, v any, more bool) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return out.Event([]byte(event), b, more)
}
