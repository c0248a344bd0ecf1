package spool

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Batches appended are held again after a reopen, in order, until acknowledged; a torn tail is cut
// off; a full spool refuses what does not fit; a folder in use is refused with the owner's words.
func TestSpoolKeepsBatchesUntilAcknowledged(t *testing.T) {
	dir := t.TempDir()
	s, held, err := Open(dir, 1<<20, "another test")
	if err != nil || len(held) != 0 {
		t.Fatalf("open: %v %v", held, err)
	}
	if _, _, err := Open(dir, 1<<20, "another test; give each its own folder"); err == nil || !strings.Contains(err.Error(), "give each its own folder") {
		t.Fatalf("a second owner: %v", err)
	}
	bs := []Batch{{ID: "b1", Runs: 2, Body: []byte(`[1,2]`)}, {ID: "b2", Runs: 1, Body: []byte(`[3]`)}}
	if n, err := s.Append(bs); n != 2 || err != nil || bs[0].Body != nil {
		t.Fatalf("append: %d %v", n, err)
	}
	if body, err := s.Read(bs[1].Loc); err != nil || string(body) != "[3]" {
		t.Fatalf("read: %q %v", body, err)
	}
	s.Ack(bs[0].Loc)
	s.Close()

	// A record cut short by a crash is cut off; the acknowledged batch is not held again (its segment
	// still holds b2), but ids are the owner's to deduplicate, so b1 may come back: only b2 must.
	f, _ := os.OpenFile(filepath.Join(dir, "runs-0.spool"), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString("svcb1 b3 1 100 0000")
	f.Close()
	s, held, err = Open(dir, 1<<20, "another test")
	if err != nil {
		t.Fatal(err)
	}
	if len(held) == 0 || held[len(held)-1].ID != "b2" || held[len(held)-1].Runs != 1 {
		t.Fatalf("held after a reopen: %+v", held)
	}
	if body, err := s.Read(held[len(held)-1].Loc); err != nil || string(body) != "[3]" {
		t.Fatalf("read after a reopen: %q %v", body, err)
	}
	for _, b := range held {
		s.Ack(b.Loc)
	}
	big := []Batch{{ID: "big", Runs: 1, Body: make([]byte, 2<<20)}}
	if n, err := s.Append(big); n != 0 || !errors.Is(err, ErrFull) {
		t.Fatalf("a batch past the size: %d %v", n, err)
	}
	s.Close()
	s, held, err = Open(dir, 1<<20, "x")
	if err != nil || len(held) != 0 {
		t.Fatalf("everything acknowledged, yet held %+v (%v)", held, err)
	}
	s.Close()
}
