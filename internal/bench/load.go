package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// RequestBody is the chat completion every row is sent: streamed or not, asking for stream usage or not.
func RequestBody(stream, usage bool) []byte {
	body := `{"model":"mock-model","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say something about foxes."}],"max_tokens":64}`
	if stream {
		body = `{"model":"mock-model","stream":true,"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say something about foxes."}],"max_tokens":64}`
		if usage {
			body = strings.Replace(body, `"stream":true`, `"stream":true,"stream_options":{"include_usage":true}`, 1)
		}
	}
	return []byte(body)
}

// Warmup is the untimed load of each row before a scenario's first round.
const Warmup = 300 * time.Millisecond

// Plan is how a scenario is measured.
type Plan struct {
	Scenario Scenario
	Body     []byte // what the chat rows send; a translated row sends its Surface's Body
	Rounds   int
	Duration time.Duration // each row's load in each round, in slices (Slicing)
	// CPUTime reads the CPU time a process used so far (CPUTime; false when it cannot be read).
	CPUTime func(pid int) (time.Duration, bool)
	// Settle lets a row that records runs write what its slice left behind before the next row's turn.
	Settle func(ctx context.Context, r *Row)
}

// body is the request a row sends: its own, the plan's chat body, or a translated surface's own.
func (p Plan) body(r *Row) []byte {
	if r.Body != nil {
		return r.Body
	}
	if r.Surface == SurfaceChat {
		return p.Body
	}
	return r.Surface.Body(p.Scenario.Stream)
}

// Measure runs a scenario's rounds and returns each row's results, round by round. Each round gives
// every row the plan's Duration of load in slices that take turns (Rotation): a burst of load from
// elsewhere on the machine then weighs on all rows alike, not on the one that was running.
func Measure(ctx context.Context, p Plan, rows []*Row) ([][]RoundResult, error) {
	sc := p.Scenario
	loaders := make([]*Loader, len(rows))
	for i, r := range rows {
		if r.Skip != "" {
			continue
		}
		loaders[i] = NewLoader(r, p.body(r), sc.Stream, sc.Conns)
		loaders[i].pause = sc.Pause
		defer loaders[i].Close()
		if _, err := loaders[i].Slice(ctx, Warmup); err != nil {
			return nil, fmt.Errorf("%s, %s, warm-up: %w", sc.Title(), r.Name, err)
		}
	}
	nSlices, sliceLen := Slicing(p.Duration)
	res := make([][]RoundResult, len(rows)) // row -> round
	turn := 0
	for round := 0; round < p.Rounds; round++ {
		acc := make([]SliceResult, len(rows))
		for k := 0; k < nSlices; k++ {
			turn++
			for _, i := range Rotation(turn, len(rows)) {
				r := rows[i]
				if r.Skip != "" {
					continue
				}
				cpu0, ok0 := rowCPU(p.CPUTime, r)
				busy0, total0, okM0 := MachineCPU()
				sr, err := loaders[i].Slice(ctx, sliceLen)
				busy1, total1, okM1 := MachineCPU() // the slice's load alone, not the settling after it
				if err != nil {
					return nil, fmt.Errorf("%s, %s, round %d: %w", sc.Title(), r.Name, round+1, err)
				}
				if r.Records && p.Settle != nil {
					p.Settle(ctx, r)
				}
				// The row's CPU time includes the runs its slice left to write, written while settling.
				cpu1, ok1 := rowCPU(p.CPUTime, r)
				sr.CPU, sr.CPUOK = cpu1-cpu0, ok0 && ok1
				if okM0 && okM1 {
					sr.Busy, sr.Total = busy1-busy0, total1-total0
				}
				acc[i].Add(sr)
			}
		}
		for i, r := range rows {
			if r.Skip == "" {
				if len(acc[i].Lat) == 0 {
					return nil, fmt.Errorf("%s, %s, round %d: no request completed", sc.Title(), r.Name, round+1)
				}
				res[i] = append(res[i], acc[i].Summary())
			}
		}
	}
	return res, nil
}

// Loader loads one row with a number of connections, kept open from one slice to the next.
type Loader struct {
	r      *Row
	body   []byte
	stream bool
	conns  int
	pause  time.Duration // after each answer, before the connection's next request (Scenario.Pause)
	tr     *http.Transport
	client *http.Client
}

// NewLoader returns a loader of r; Close it when done.
func NewLoader(r *Row, body []byte, stream bool, conns int) *Loader {
	tr := &http.Transport{Proxy: nil, MaxIdleConns: conns * 2, MaxIdleConnsPerHost: conns * 2, DisableCompression: true}
	return &Loader{r: r, body: body, stream: stream, conns: conns, tr: tr, client: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// Close closes the loader's idle connections.
func (l *Loader) Close() { l.tr.CloseIdleConnections() }

// Slice sends requests from the loader's connections, each one after the other (the loader's pause
// apart), for the given time. It
// counts the requests that complete within that time: throughput is their number over the time,
// latency runs to an answer's last byte and ttfb to its first body byte. Requests still under way at
// the end are finished (so that their connections stay usable) but not counted.
func (l *Loader) Slice(ctx context.Context, d time.Duration) (SliceResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		res      SliceResult
		firstErr error
		wg       sync.WaitGroup
	)
	t0 := time.Now()
	end := t0.Add(d)
	for i := 0; i < l.conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 32<<10)
			last := make([]byte, 0, 64)
			cr := &countingReader{}
			var lat, ttfb []time.Duration
			served := 0
			var events, nBytes int64
			for ctx.Err() == nil && time.Now().Before(end) {
				s, err := one(ctx, l.client, l.r, l.body, l.stream, buf, last, cr)
				if err != nil {
					mu.Lock()
					if firstErr == nil && ctx.Err() == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel()
					return
				}
				served++
				events += int64(s.events)
				nBytes += s.bytes
				if s.done.After(end) {
					break
				}
				lat = append(lat, s.lat)
				ttfb = append(ttfb, s.ttfb)
				if l.pause > 0 {
					time.Sleep(l.pause)
				}
			}
			mu.Lock()
			res.Served += served
			res.Events += events
			res.Bytes += nBytes
			res.Lat = append(res.Lat, lat...)
			res.TTFB = append(res.TTFB, ttfb...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return SliceResult{}, firstErr
	}
	if err := ctx.Err(); err != nil {
		return SliceResult{}, err
	}
	res.Window = d // a slice in which no request completed (the machine stalled) counts as such
	return res, nil
}

type sample struct {
	lat, ttfb time.Duration
	done      time.Time
	events    int   // events of a streamed answer
	bytes     int64 // of the answer's body
}

// countingReader counts an answer's body bytes and notes when the first one came.
type countingReader struct {
	r    io.Reader
	t0   time.Time
	ttfb time.Duration
	n    int64
}

func (c *countingReader) reset(r io.Reader, t0 time.Time) { *c = countingReader{r: r, t0: t0} }

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		if c.n == 0 {
			c.ttfb = time.Since(c.t0)
		}
		c.n += int64(n)
	}
	return n, err
}

// one sends a request and reads its answer to the end; a streamed answer must end with its surface's
// last event (Surface.ReadStream).
func one(ctx context.Context, client *http.Client, r *Row, body []byte, stream bool, buf, last []byte, cr *countingReader) (sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL, bytes.NewReader(body))
	if err != nil {
		return sample{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if r.Host != "" {
		req.Host = r.Host // Go cannot resolve *.localhost; the connection goes to loopback anyway
	}
	r.Surface.SetAuth(req.Header, r.Key)
	t0 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return sample{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		return sample{}, fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	var s sample
	cr.reset(resp.Body, t0)
	if stream {
		// ReadStream reads the body to its end, so that the connection is reused.
		if s.events, err = r.Surface.ReadStream(cr, last); err != nil {
			return sample{}, err
		}
	} else {
		for {
			_, err := cr.Read(buf)
			if err == io.EOF {
				break
			}
			if err != nil {
				return sample{}, err
			}
		}
	}
	s.done = time.Now()
	s.lat, s.ttfb, s.bytes = s.done.Sub(t0), cr.ttfb, cr.n
	return s, nil
}

// rowCPU is the CPU time of a row's process and of its Also processes.
func rowCPU(cpuTime func(int) (time.Duration, bool), r *Row) (time.Duration, bool) {
	total, ok := cpuTime(r.PID)
	for _, pid := range r.Also {
		t, ok1 := cpuTime(pid)
		total, ok = total+t, ok && ok1
	}
	return total, ok
}
