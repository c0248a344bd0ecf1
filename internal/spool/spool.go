// Package spool keeps batches of runs on local disk until they are delivered: the append-only, checksummed
// segment files that an svc edge keeps for its control plane and svc server's recorder for its store.
package spool

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// A spool keeps batches that are not delivered yet on local disk: an edge's batches its control plane has
// not acknowledged (docs/DEPLOY.md, "The spool"), and the batches svc server's recorder could not write
// (docs/OPERATIONS.md, "The recorder's spool"), so that a SIGKILL or a crash loses at most the runs of
// the last flush interval, and an outage longer than the memory buffer loses nothing until it is full.
//
// It is a folder of append-only segment files, runs-<seq>.spool. Each record is one sealed batch:
//
//	svcb1 <batch id> <runs> <body bytes> <crc32c of body, hex>\n<body>\n
//
// where the body is the batch's bytes as its owner wrote them. Records are appended and the file synced
// once per flush; a record cut short by a crash (or failing its checksum) ends its segment and is cut
// off when the spool is opened again. Acknowledged batches are not rewritten: a segment whose batches
// are all acknowledged is deleted, and the segment being written is truncated to nothing whenever
// every batch in the spool is acknowledged. A batch acknowledged but not yet removed when the process
// dies is delivered again after the restart, with its own batch id, which its receiver applies once.

// spoolRecordMagic starts every record.
const spoolRecordMagic = "svcb1"

// DefaultSegment is the size past which a new segment file is started.
const DefaultSegment = 8 << 20

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Batch is one record of the spool: its id and run count, and its body until it is appended (then
// Loc says where it lies).
type Batch struct {
	ID   string
	Runs int
	Body []byte
	Loc  Loc
}

// Loc is where a batch lies in the spool.
type Loc struct {
	seg int64 // segment sequence number
	off int64 // offset of the body in the segment
	n   int64 // body length
}

// Spool is the on-disk store of batches. Its methods are safe for concurrent use: one goroutine
// appends, another reads and acknowledges.
type Spool struct {
	dir      string
	maxBytes int64 // all segments together
	segBytes int64
	lock     *os.File

	mu     sync.Mutex
	segs   map[int64]*segment
	active int64 // the segment appended to
	size   int64 // Bytes in all segments
}

type segment struct {
	f       *os.File
	size    int64
	pending int // records not yet acknowledged
}

// Open opens (creating it if need be) the spool in dir, takes its lock, and returns the batches
// it still holds, oldest first. The caller owns the spool until close.
//
// inUse ends the error of a folder another process holds ("another svc edge; give each edge its own
// --spool-dir").
func Open(dir string, maxBytes int64, inUse string) (*Spool, []Batch, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("create the spool folder: %w", err)
	}
	lock, err := lockDir(dir, inUse)
	if err != nil {
		return nil, nil, err
	}
	s := &Spool{dir: dir, maxBytes: maxBytes, segBytes: DefaultSegment, lock: lock, segs: map[int64]*segment{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		s.Close()
		return nil, nil, fmt.Errorf("read the spool folder: %w", err)
	}
	var seqs []int64
	for _, e := range entries {
		name := e.Name()
		if rest, ok := strings.CutPrefix(name, "runs-"); ok {
			if num, ok := strings.CutSuffix(rest, ".spool"); ok {
				if seq, err := strconv.ParseInt(num, 10, 64); err == nil && seq >= 0 {
					seqs = append(seqs, seq)
				}
			}
		}
	}
	slices.Sort(seqs)
	var held []Batch
	for _, seq := range seqs {
		batches, seg, err := s.load(seq)
		if err != nil {
			s.Close()
			return nil, nil, err
		}
		if len(batches) == 0 && seq != seqs[len(seqs)-1] {
			seg.f.Close()
			os.Remove(s.path(seq))
			continue
		}
		s.segs[seq] = seg
		s.size += seg.size
		s.active = seq
		held = append(held, batches...)
	}
	if len(s.segs) == 0 {
		if err := s.newSegment(0); err != nil {
			s.Close()
			return nil, nil, err
		}
	}
	return s, held, nil
}

func (s *Spool) path(seq int64) string {
	return filepath.Join(s.dir, fmt.Sprintf("runs-%016d.spool", seq))
}

// load reads the records of a segment, cutting off a torn tail.
func (s *Spool) load(seq int64) ([]Batch, *segment, error) {
	f, err := os.OpenFile(s.path(seq), os.O_RDWR, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("open the spool: %w", err)
	}
	var out []Batch
	r := bufio.NewReaderSize(f, 64<<10)
	var off int64
	for {
		b, n, err := readRecord(r, off)
		if err != nil {
			break // the end, or a record cut short: what follows is dropped below
		}
		b.Loc.seg = seq
		out = append(out, b)
		off += n
	}
	if err := f.Truncate(off); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("repair the spool: %w", err)
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		f.Close()
		return nil, nil, err
	}
	return out, &segment{f: f, size: off, pending: len(out)}, nil
}

// readRecord reads one record whose header starts at off; n is the record's whole length.
func readRecord(r *bufio.Reader, off int64) (Batch, int64, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return Batch{}, 0, err
	}
	f := strings.Fields(line)
	if len(f) != 5 || f[0] != spoolRecordMagic {
		return Batch{}, 0, errors.New("not a spool record")
	}
	runs, err1 := strconv.Atoi(f[2])
	n, err2 := strconv.ParseInt(f[3], 10, 64)
	sum, err3 := strconv.ParseUint(f[4], 16, 32)
	if err1 != nil || err2 != nil || err3 != nil || runs < 0 || n < 0 || n > 1<<30 {
		return Batch{}, 0, errors.New("not a spool record")
	}
	body := make([]byte, n+1)
	if _, err := io.ReadFull(r, body); err != nil || body[n] != '\n' {
		return Batch{}, 0, errors.New("record cut short")
	}
	if crc32.Checksum(body[:n], crcTable) != uint32(sum) {
		return Batch{}, 0, errors.New("record checksum mismatch")
	}
	head := int64(len(line))
	return Batch{ID: f[1], Runs: runs, Loc: Loc{off: off + head, n: n}}, head + n + 1, nil
}

func (s *Spool) newSegment(seq int64) error {
	f, err := os.OpenFile(s.path(seq), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("create a spool segment: %w", err)
	}
	s.segs[seq] = &segment{f: f}
	s.active = seq
	SyncDir(s.dir)
	return nil
}

// ErrFull refuses a batch that would take the spool past its size.
var ErrFull = errors.New("the spool is full")

// Append writes batches (whose bodies are set) to the spool and syncs it, setting each one's location
// and dropping its body from memory. Batches that do not fit are refused (ErrFull for each);
// the others are kept. It returns the index of the first refused batch (len(bs) when all fit).
func (s *Spool) Append(bs []Batch) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var buf bytes.Buffer
	for i := range bs {
		b := &bs[i]
		buf.Reset()
		fmt.Fprintf(&buf, "%s %s %d %d %08x\n", spoolRecordMagic, b.ID, b.Runs, len(b.Body), crc32.Checksum(b.Body, crcTable))
		head := int64(buf.Len())
		rec := head + int64(len(b.Body)) + 1
		if s.size+rec > s.maxBytes {
			s.Sync()
			return i, ErrFull
		}
		seg := s.segs[s.active]
		if seg.size > 0 && seg.size+rec > s.segBytes {
			if err := s.Sync(); err != nil {
				return i, err
			}
			if err := s.newSegment(s.active + 1); err != nil {
				return i, err
			}
			seg = s.segs[s.active]
		}
		buf.Write(b.Body)
		buf.WriteByte('\n')
		if _, err := seg.f.WriteAt(buf.Bytes(), seg.size); err != nil {
			return i, fmt.Errorf("write the spool: %w", err)
		}
		b.Loc = Loc{seg: s.active, off: seg.size + head, n: int64(len(b.Body))}
		b.Body = nil
		seg.size += rec
		seg.pending++
		s.size += rec
	}
	return len(bs), s.Sync()
}

// Sync makes what was appended to the active segment durable. Call with s.mu held.
func (s *Spool) Sync() error {
	if err := s.segs[s.active].f.Sync(); err != nil {
		return fmt.Errorf("sync the spool: %w", err)
	}
	return nil
}

// Read returns the body of a spooled batch.
func (s *Spool) Read(loc Loc) ([]byte, error) {
	s.mu.Lock()
	seg := s.segs[loc.seg]
	s.mu.Unlock()
	if seg == nil {
		return nil, errors.New("spool segment gone")
	}
	body := make([]byte, loc.n)
	if _, err := seg.f.ReadAt(body, loc.off); err != nil {
		return nil, fmt.Errorf("read the spool: %w", err)
	}
	return body, nil
}

// Ack notes that the batch at loc was acknowledged (or refused for good): a segment left with nothing
// pending is deleted, and the segment being written is emptied once nothing at all is pending.
func (s *Spool) Ack(loc Loc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seg := s.segs[loc.seg]
	if seg == nil {
		return
	}
	seg.pending--
	if seg.pending > 0 {
		return
	}
	if loc.seg != s.active {
		seg.f.Close()
		os.Remove(s.path(loc.seg))
		delete(s.segs, loc.seg)
		s.size -= seg.size
		return
	}
	for _, other := range s.segs {
		if other.pending > 0 {
			return
		}
	}
	if err := seg.f.Truncate(0); err == nil {
		s.size -= seg.size
		seg.size = 0
	}
}

// Bytes returns the spool's size on disk.
func (s *Spool) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size
}

// Close syncs and closes the spool's files and releases its lock.
func (s *Spool) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, seg := range s.segs {
		seg.f.Sync()
		seg.f.Close()
	}
	s.segs = map[int64]*segment{}
	if s.lock != nil {
		unlockDir(s.lock)
		s.lock = nil
	}
}

// SyncDir makes a new file's name durable (a no-op where folders cannot be synced).
func SyncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
