package recorder

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

// The spool keeps the run batches svc server's recorder could not write because the store did not
// answer (docs/OPERATIONS.md, "The recorder's spool"), on local disk, until the replay loop writes them
// back. It is the edge's spool (internal/edgesync/spool.go), copied: a folder of append-only segment
// files, runs-<seq>.spool, each record one batch:
//
//	svcb1 <batch id> <runs> <body bytes> <crc32c of body, hex>\n<body>\n
//
// where the body is the batch's runs as a JSON array of runs.Run. Records are appended and the file
// synced once per batch; a record cut short by a crash (or failing its checksum) ends its segment and
// is cut off when the spool is opened again. A segment whose batches are all written is deleted, and
// the segment being appended to is truncated once every batch is written. A batch written but not yet
// removed when svc dies is replayed after the restart with its own batch id, which the store applies
// once (Recorder.Ingest).

// spoolRecordMagic starts every record.
const spoolRecordMagic = "svcb1"

// spoolSegment is the size past which a new segment file is started.
const spoolSegment = 8 << 20

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// spoolLoc is where a sealed batch lies in the spool.
type spoolLoc struct {
	seg int64 // segment sequence number
	off int64 // offset of the body in the segment
	n   int64 // body length
}

// spool is the on-disk store of sealed batches. Its methods are safe for concurrent use: one goroutine
// appends, another reads and acknowledges.
type spool struct {
	dir      string
	maxBytes int64 // all segments together
	segBytes int64
	lock     *os.File

	mu     sync.Mutex
	segs   map[int64]*segment
	active int64 // the segment appended to
	size   int64 // bytes in all segments
}

type segment struct {
	f       *os.File
	size    int64
	pending int // records not yet acknowledged
}

// openSpool opens (creating it if need be) the spool in dir, takes its lock, and returns the batches
// it still holds, oldest first. The caller owns the spool until close.
func openSpool(dir string, maxBytes int64) (*spool, []sealed, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("create the spool folder: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, nil, err
	}
	s := &spool{dir: dir, maxBytes: maxBytes, segBytes: spoolSegment, lock: lock, segs: map[int64]*segment{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		s.close()
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
	var held []sealed
	for _, seq := range seqs {
		batches, seg, err := s.load(seq)
		if err != nil {
			s.close()
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
			s.close()
			return nil, nil, err
		}
	}
	return s, held, nil
}

func (s *spool) path(seq int64) string {
	return filepath.Join(s.dir, fmt.Sprintf("runs-%016d.spool", seq))
}

// load reads the records of a segment, cutting off a torn tail.
func (s *spool) load(seq int64) ([]sealed, *segment, error) {
	f, err := os.OpenFile(s.path(seq), os.O_RDWR, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("open the spool: %w", err)
	}
	var out []sealed
	r := bufio.NewReaderSize(f, 64<<10)
	var off int64
	for {
		b, n, err := readRecord(r, off)
		if err != nil {
			break // the end, or a record cut short: what follows is dropped below
		}
		b.loc.seg = seq
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
func readRecord(r *bufio.Reader, off int64) (sealed, int64, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return sealed{}, 0, err
	}
	f := strings.Fields(line)
	if len(f) != 5 || f[0] != spoolRecordMagic {
		return sealed{}, 0, errors.New("not a spool record")
	}
	runs, err1 := strconv.Atoi(f[2])
	n, err2 := strconv.ParseInt(f[3], 10, 64)
	sum, err3 := strconv.ParseUint(f[4], 16, 32)
	if err1 != nil || err2 != nil || err3 != nil || runs < 0 || n < 0 || n > 1<<30 {
		return sealed{}, 0, errors.New("not a spool record")
	}
	body := make([]byte, n+1)
	if _, err := io.ReadFull(r, body); err != nil || body[n] != '\n' {
		return sealed{}, 0, errors.New("record cut short")
	}
	if crc32.Checksum(body[:n], crcTable) != uint32(sum) {
		return sealed{}, 0, errors.New("record checksum mismatch")
	}
	head := int64(len(line))
	return sealed{id: f[1], runs: runs, loc: spoolLoc{off: off + head, n: n}}, head + n + 1, nil
}

func (s *spool) newSegment(seq int64) error {
	f, err := os.OpenFile(s.path(seq), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("create a spool segment: %w", err)
	}
	s.segs[seq] = &segment{f: f}
	s.active = seq
	syncDir(s.dir)
	return nil
}

// errSpoolFull refuses a batch that would take the spool past its size.
var errSpoolFull = errors.New("the spool is full")

// append writes batches (whose bodies are set) to the spool and syncs it, setting each one's location
// and dropping its body from memory. Batches that do not fit are refused (errSpoolFull for each);
// the others are kept. It returns the index of the first refused batch (len(bs) when all fit).
func (s *spool) append(bs []sealed) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var buf bytes.Buffer
	for i := range bs {
		b := &bs[i]
		buf.Reset()
		fmt.Fprintf(&buf, "%s %s %d %d %08x\n", spoolRecordMagic, b.id, b.runs, len(b.body), crc32.Checksum(b.body, crcTable))
		head := int64(buf.Len())
		rec := head + int64(len(b.body)) + 1
		if s.size+rec > s.maxBytes {
			s.sync()
			return i, errSpoolFull
		}
		seg := s.segs[s.active]
		if seg.size > 0 && seg.size+rec > s.segBytes {
			if err := s.sync(); err != nil {
				return i, err
			}
			if err := s.newSegment(s.active + 1); err != nil {
				return i, err
			}
			seg = s.segs[s.active]
		}
		buf.Write(b.body)
		buf.WriteByte('\n')
		if _, err := seg.f.WriteAt(buf.Bytes(), seg.size); err != nil {
			return i, fmt.Errorf("write the spool: %w", err)
		}
		b.loc = spoolLoc{seg: s.active, off: seg.size + head, n: int64(len(b.body))}
		b.body = nil
		seg.size += rec
		seg.pending++
		s.size += rec
	}
	return len(bs), s.sync()
}

// sync makes what was appended to the active segment durable. Call with s.mu held.
func (s *spool) sync() error {
	if err := s.segs[s.active].f.Sync(); err != nil {
		return fmt.Errorf("sync the spool: %w", err)
	}
	return nil
}

// read returns the body of a spooled batch.
func (s *spool) read(loc spoolLoc) ([]byte, error) {
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

// ack notes that the batch at loc was acknowledged (or refused for good): a segment left with nothing
// pending is deleted, and the segment being written is emptied once nothing at all is pending.
func (s *spool) ack(loc spoolLoc) {
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

// bytes returns the spool's size on disk.
func (s *spool) bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size
}

// close syncs and closes the spool's files and releases its lock.
func (s *spool) close() {
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

// syncDir makes a new file's name durable (a no-op where folders cannot be synced).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
