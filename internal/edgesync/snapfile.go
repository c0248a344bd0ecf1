package edgesync

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// The last confirmed snapshots are kept on disk (Options.StateDir, the edge's --spool-dir), so that an
// edge restarted while its control plane is unreachable serves what it served before, for what remains
// of --max-stale after each snapshot was last confirmed (docs/DEPLOY.md, "The spool"). The file holds
// the snapshots as the control plane sent them (deployments and key hashes, never a plaintext key),
// when each was last confirmed, and the change feed's position, so that a restarted edge resumes the
// feed where it stopped and drops exactly what changed meanwhile. It also holds the control plane's key
// of thinking signatures (the feed's hello), so that an edge restarted during an outage still verifies
// the thinking blocks it signed before (the file is 0600, like every file of the folder).

// snapshotsFile is the file's name in the state folder.
const snapshotsFile = "snapshots.json"

// Intervals of the writes: soon after the set of snapshots changed, less often when only their
// confirmation times moved (a heartbeat or a revalidation).
const (
	persistChanged   = time.Second
	persistConfirmed = 5 * time.Second
)

type persisted struct {
	Version int              `json:"version"`
	Pos     int64            `json:"pos"`     // the last change applied (-1: none)
	Contact time.Time        `json:"contact"` // the last answer from the control plane
	Entries []persistedEntry `json:"entries"`
	// ThinkingSecret is the control plane's key of thinking signatures (base64); absent in files of
	// older edges, and until the first hello.
	ThinkingSecret []byte `json:"thinkingSecret,omitempty"`
}

type persistedEntry struct {
	Slug      string          `json:"slug"`
	ChangeID  int64           `json:"changeId"`
	Confirmed time.Time       `json:"confirmed"`
	Snapshot  json.RawMessage `json:"snapshot"` // the answer as sent; null for a slug that serves nothing
}

// loadSnapshots fills a new cache from the state folder: the snapshots still within MaxStale of their
// confirmation, and the feed position. A missing or unreadable file leaves the cache empty.
func (c *Cache) loadSnapshots() {
	b, err := os.ReadFile(filepath.Join(c.o.StateDir, snapshotsFile))
	if err != nil {
		if !os.IsNotExist(err) {
			c.log.Warn("edge: the saved snapshots cannot be read; starting empty", "err", err)
		}
		return
	}
	var p persisted
	if err := json.Unmarshal(b, &p); err != nil || p.Version != 1 {
		c.log.Warn("edge: the saved snapshots are not readable; starting empty", "err", err)
		return
	}
	if len(p.ThinkingSecret) > 0 {
		// Whatever the snapshots' age: the key does not go stale, and a hello replaces it.
		c.secret.Store(&p.ThinkingSecret)
	}
	now := c.o.Now()
	kept := 0
	for _, pe := range p.Entries {
		if now.Sub(pe.Confirmed) >= c.o.MaxStale {
			continue
		}
		snap := &snapshot{changeID: pe.ChangeID}
		if len(pe.Snapshot) > 0 && string(pe.Snapshot) != "null" {
			if snap, err = decodeSnapshot(pe.Snapshot); err != nil {
				continue
			}
		}
		c.entries[pe.Slug] = &entry{snap: snap, fetched: pe.Confirmed}
		kept++
	}
	if kept == 0 {
		return
	}
	// Resume the feed where it stopped. The edge counts as synced until MaxStale after its last
	// contact, as if it had never stopped.
	c.pos, c.feedHead, c.contact, c.synced = p.Pos, p.Pos, p.Contact, p.Pos >= 0
	c.log.Info("edge: serving the saved snapshots until the control plane confirms them", "snapshots", kept,
		"last_contact", p.Contact.UTC().Format(time.RFC3339))
}

// persistLoop writes the snapshots to the state folder while ctx lives, and once more when it ends.
func (c *Cache) persistLoop(ctx context.Context) {
	tick := time.NewTicker(persistChanged)
	defer tick.Stop()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			c.saveSnapshots(true)
			return
		case <-tick.C:
		}
		c.mu.Lock()
		due := c.changed || (c.confirmedMoved && time.Since(last) >= persistConfirmed)
		c.mu.Unlock()
		if due && c.saveSnapshots(false) {
			last = time.Now()
		}
	}
}

// saveSnapshots writes the file (replacing it whole, so that a crash leaves the old one or the new
// one) when something changed since the last write, or always when force is set.
func (c *Cache) saveSnapshots(force bool) bool {
	c.mu.Lock()
	if !force && !c.changed && !c.confirmedMoved {
		c.mu.Unlock()
		return false
	}
	p := persisted{Version: 1, Pos: c.pos, Contact: c.contact, Entries: make([]persistedEntry, 0, len(c.entries)),
		ThinkingSecret: c.ThinkingSecret()}
	for slug, e := range c.entries {
		pe := persistedEntry{Slug: slug, ChangeID: e.snap.changeID, Confirmed: c.confirmed(e)}
		if e.snap.serves() {
			pe.Snapshot = e.snap.raw
		}
		p.Entries = append(p.Entries, pe)
	}
	c.changed, c.confirmedMoved = false, false
	c.mu.Unlock()
	if err := writeFileAtomic(filepath.Join(c.o.StateDir, snapshotsFile), p); err != nil {
		c.saveFails.Log(context.Background(), slog.LevelWarn, "edge: saving the snapshots failed; retrying every second", "", slog.Any("err", err))
		c.mu.Lock()
		c.changed = true // try again at the next tick
		c.mu.Unlock()
		return false
	}
	return true
}

// writeFileAtomic writes v as JSON to name through a temporary file renamed over it.
func writeFileAtomic(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(name), filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return fmt.Errorf("replace %s: %w", name, err)
	}
	syncDir(filepath.Dir(name))
	return nil
}
