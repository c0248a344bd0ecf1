package edgesync

import disk "github.com/svcdev/svc/internal/spool"

// The edge keeps the run batches it has sealed but the control plane has not acknowledged in a spool on
// local disk (docs/DEPLOY.md, "The spool"; internal/spool): each record is a batch in lines exactly as it
// is sent, so that a SIGKILL or a crash loses at most the runs of the last flush interval, and a
// control-plane outage longer than the memory buffer loses nothing until the spool is full.

type spoolLoc = disk.Loc

var errSpoolFull = disk.ErrFull

// spool is the edge's spool, in terms of its sealed batches.
type spool struct{ d *disk.Spool }

// openSpool opens the spool in dir and returns the batches it still holds, oldest first.
func openSpool(dir string, maxBytes int64) (*spool, []sealed, error) {
	d, held, err := disk.Open(dir, maxBytes, "another svc edge; give each edge its own --spool-dir")
	if err != nil {
		return nil, nil, err
	}
	out := make([]sealed, len(held))
	for i, b := range held {
		out[i] = sealed{id: b.ID, runs: b.Runs, loc: b.Loc}
	}
	return &spool{d}, out, nil
}

// append writes batches to the spool and syncs it (disk.Spool.Append), setting each kept one's location
// and dropping its body from memory; it returns the index of the first refused batch.
func (s *spool) append(bs []sealed) (int, error) {
	recs := make([]disk.Batch, len(bs))
	for i, b := range bs {
		recs[i] = disk.Batch{ID: b.id, Runs: b.runs, Body: b.body}
	}
	n, err := s.d.Append(recs)
	for i := 0; i < n; i++ {
		bs[i].loc, bs[i].body = recs[i].Loc, nil
	}
	return n, err
}

func (s *spool) read(loc spoolLoc) ([]byte, error) { return s.d.Read(loc) }
func (s *spool) ack(loc spoolLoc)                  { s.d.Ack(loc) }
func (s *spool) bytes() int64                      { return s.d.Bytes() }
func (s *spool) close()                            { s.d.Close() }

func syncDir(dir string) { disk.SyncDir(dir) }
