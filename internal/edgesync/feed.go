package edgesync

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/svcdev/svc/internal/edgewire"
	"github.com/svcdev/svc/internal/sse"
)

// Run follows the control plane's change feed until ctx ends: one long-lived request that the control
// plane holds open, which delivers each change as it commits (so a revoke, disable or delete reaches
// this edge within a second) and a heartbeat when idle. A broken feed is reopened after a short,
// growing pause, from the last change applied, so that nothing is missed.
func (c *Cache) Run(ctx context.Context) {
	if c.o.StateDir != "" {
		saved := make(chan struct{})
		go func() {
			defer close(saved)
			c.persistLoop(ctx)
		}()
		defer func() { <-saved }()
	}
	prune := time.NewTicker(time.Minute)
	defer prune.Stop()
	defer c.fails.Flush()
	const minPause, maxPause = 100 * time.Millisecond, 5 * time.Second
	pause := minPause
	wasConnected := false
	for ctx.Err() == nil {
		hello, err := c.follow(ctx)
		c.disconnected()
		if ctx.Err() != nil {
			return
		}
		if hello {
			pause = minPause
		}
		if hello || wasConnected {
			c.fails.Log(ctx, slog.LevelWarn, "edge: change feed to the control plane lost; reconnecting", "", slog.Any("err", err))
		}
		wasConnected = hello
		var ue *unreachableError
		if errors.As(err, &ue) && ue.tokenRefused() {
			c.mu.Lock()
			c.refused = true
			c.mu.Unlock()
			c.fails.Log(ctx, slog.LevelError, "edge: the control plane refuses the edge token; serving cached snapshots until --max-stale", "", slog.Any("err", err))
		}
		select {
		case <-ctx.Done():
			return
		case <-prune.C:
			c.prune()
		case <-time.After(pause/2 + rand.N(pause/2+1)):
		}
		pause = min(pause*2, maxPause)
	}
}

// follow reads one feed stream until it breaks; hello reports whether it got as far as the hello.
func (c *Cache) follow(ctx context.Context) (hello bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A feed silent for FeedIdle is dead (a half-open connection, a stuck proxy): cancelling the
	// request ends the read below.
	watchdog := time.AfterFunc(c.o.FeedIdle, cancel)
	defer watchdog.Stop()
	c.mu.Lock()
	pos := c.pos
	c.mu.Unlock()
	resp, err := c.client.openFeed(ctx, pos)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	rd := sse.NewReader(resp.Body)
	defer rd.Release()
	prune := time.NewTicker(time.Minute)
	defer prune.Stop()
	for {
		ev, err := rd.Next()
		if err != nil {
			if ctx.Err() != nil && errors.Is(context.Cause(ctx), context.Canceled) {
				return hello, &unreachableError{reason: "the change feed went silent"}
			}
			return hello, &unreachableError{reason: "the change feed ended: " + err.Error()}
		}
		watchdog.Reset(c.o.FeedIdle)
		switch string(ev.Name) {
		case edgewire.EventHello:
			var h edgewire.Hello
			if json.Unmarshal(ev.Data, &h) != nil {
				return hello, &unreachableError{reason: "unreadable hello"}
			}
			hello = true
			c.onHello(h)
		case edgewire.EventChange:
			var ch edgewire.Change
			if json.Unmarshal(ev.Data, &ch) != nil {
				return hello, &unreachableError{reason: "unreadable change"}
			}
			c.onChange(ch)
		case edgewire.EventHeartbeat:
			c.onHeartbeat()
		}
		select {
		case <-prune.C:
			c.prune()
		default:
		}
	}
}

// onHello starts (or resumes) following. On a reset every snapshot read before the head is doubtful
// and dropped; the others already reflect every change up to it.
func (c *Cache) onHello(h edgewire.Hello) {
	c.client.readsLines(h.RunForms)
	if h.Reset {
		c.drop("", h.Head)
	}
	now := c.o.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(h.ThinkingSecret) > 0 && !bytes.Equal(h.ThinkingSecret, c.ThinkingSecret()) {
		c.secret.Store(&h.ThinkingSecret) // saved with the snapshots below (changed)
	}
	if h.Reset {
		c.pos = h.Head
	}
	if !c.synced {
		c.log.Info("edge: synced with the control plane", "head", h.Head)
	} else if !c.connected {
		c.log.Info("edge: change feed reconnected", "head", h.Head, "reset", h.Reset)
	}
	c.feedHead = h.Head
	c.connected, c.synced, c.contact, c.refused = true, true, now, false
	if c.pos >= c.feedHead {
		c.feedAlive = now
	}
	c.changed = true // the position
	c.stats.connected.Set(1)
}

func (c *Cache) onChange(ch edgewire.Change) {
	c.drop(ch.Slug, ch.ID)
	c.stats.changes.Inc()
	now := c.o.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pos = max(c.pos, ch.ID)
	c.contact = now
	if c.pos >= c.feedHead {
		c.feedAlive = now // caught up with what the hello announced
	}
	c.changed = true // the position
}

func (c *Cache) onHeartbeat() {
	now := c.o.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	// The control plane sends a heartbeat after every change up to then: the edge is caught up.
	c.feedHead = c.pos
	c.contact, c.feedAlive = now, now
	c.confirmedMoved = true
}

func (c *Cache) disconnected() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.connected = false
	c.stats.connected.Set(0)
}
