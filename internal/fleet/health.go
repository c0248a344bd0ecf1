package fleet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Run probes the replicas that are out and scrapes every replica's /metrics about once a second, off
// the request path, until ctx ends. client's Timeout should be short (a second): a replica that hangs
// holds up only its own probe.
func (f *Fleet) Run(ctx context.Context, client *http.Client) {
	probe := time.NewTicker(probeEvery)
	defer probe.Stop()
	scrape := time.NewTicker(time.Second)
	defer scrape.Stop()
	f.Scrape(ctx, client)
	for {
		select {
		case <-ctx.Done():
			return
		case <-probe.C:
			f.Probe(ctx, client)
		case <-scrape.C:
			f.Scrape(ctx, client)
		}
	}
}

// Probe sends GET /health to each replica that is out and whose ejection interval has passed, and
// takes those that answer 2xx back in.
func (f *Fleet) Probe(ctx context.Context, client *http.Client) {
	f.mu.Lock()
	now := f.now()
	var due []*Replica
	for _, r := range f.replicas {
		if !r.healthy && !now.Before(r.outUntil) {
			due = append(due, r)
		}
	}
	f.mu.Unlock()
	each(due, func(r *Replica) {
		if get(ctx, client, r.root+"/health", nil) == nil {
			f.mu.Lock()
			r.healthy, r.why = true, ""
			f.wake()
			f.mu.Unlock()
		}
	})
}

// Scrape reads each healthy replica's /metrics and keeps the vLLM load it reports. A replica without
// them keeps its last values (zero: in-flight counts alone weigh it). A replica that cannot be reached
// at all (the connection refused or reset: its process died, its pod is gone) is ejected as a call
// failing before its first byte would eject it, so that it is out within a scrape even while no call
// goes to it; any answer, a 404 included, says it is up, and a scrape that times out says nothing (a
// busy replica answers late; a hung one is the first-byte bound's to find).
func (f *Fleet) Scrape(ctx context.Context, client *http.Client) {
	f.mu.Lock()
	var up []*Replica
	for _, r := range f.replicas {
		if r.healthy {
			up = append(up, r)
		}
	}
	f.mu.Unlock()
	each(up, func(r *Replica) {
		var l Load
		err := get(ctx, client, r.root+"/metrics", func(body io.Reader) error {
			var err error
			l, err = ParseMetrics(body)
			return err
		})
		if why := Unreachable(err); why != "" && ctx.Err() == nil {
			f.mu.Lock()
			f.eject(r, why+" (its /metrics)")
			f.mu.Unlock()
			return
		}
		if err != nil || !l.Found {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		r.waiting, r.running = l.Waiting, l.Running
		if l.Waiting > 0 && l.Running > r.capacity {
			r.capacity = l.Running // saturated: this is what it runs at once
		}
		for i := range r.adapters {
			r.adapters[i].scraped = false
		}
		now := f.now().Sub(epoch)
		for _, name := range l.Adapters {
			r.markScraped(name, now)
		}
		f.wake() // slots may have freed, or calls held may no longer be waited for here
	})
}

// Unreachable says in words why err means the replica cannot be reached (the connection refused or
// reset, the name not found), "" for any other error or none.
func Unreachable(err error) string {
	var ne net.Error
	var dns *net.DNSError
	switch {
	case err == nil, errors.As(err, &ne) && ne.Timeout():
		return ""
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection reset"
	case errors.As(err, &dns):
		return "its name did not resolve"
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return "unreachable"
	}
	return ""
}

// scrapeLag is how long after this process saw an adapter's last call on a replica end a scrape
// naming it running is taken for stale: vLLM's lora_requests_info is as old as its last update, and
// the simulator stamps whole seconds, where several series tie and their running adapters are all
// taken to run (ParseMetrics). Believing it held a slot that had freed kept svc's calls of other
// adapters held for it: on four simulator replicas of two slots, 8 clients in sessions over 12
// adapters, about one call in five was held (docs/LORA.md, "Many adapters: loads against latency").
// Another edge's calls of the adapter there go unseen for as long.
const scrapeLag = 2 * time.Second

// markScraped notes that the replica reports adapter name running (now: since epoch).
func (r *Replica) markScraped(name string, now time.Duration) {
	free := -1
	for i := range r.adapters {
		a := &r.adapters[i]
		if a.name == name {
			if a.inflight == 0 && a.ended != 0 && now-a.ended < scrapeLag {
				return // its last call from here ended after the replica's figure was made, likely
			}
			a.scraped = true
			return
		}
		if free < 0 && !a.running() {
			free = i
		}
	}
	if free >= 0 {
		r.adapters[free] = adapterUse{name: name, key: adapterKey(name), scraped: true}
	}
}

// each runs fn on every replica concurrently and waits for all.
func each(rs []*Replica, fn func(*Replica)) {
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Go(func() { fn(r) })
	}
	wg.Wait()
}

// get fetches url and hands a 2xx body to read; any other answer is an error.
func get(ctx context.Context, client *http.Client, url string, read func(io.Reader) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return errStatus(resp.StatusCode)
	}
	if read != nil {
		if err := read(io.LimitReader(resp.Body, 4<<20)); err != nil {
			// The replica answered: a body cut short says nothing of whether it is up (Unreachable).
			return fmt.Errorf("reading its answer: %v", err)
		}
	}
	return nil
}

type errStatus int

func (e errStatus) Error() string { return "status " + strconv.Itoa(int(e)) }

// Load is what a replica's /metrics says of its load, in vLLM's names.
type Load struct {
	Waiting int // vllm:num_requests_waiting, summed over its series
	Running int // vllm:num_requests_running, summed over its series
	// Adapters are the running_lora_adapters of the latest vllm:lora_requests_info series (the union of
	// those tied for latest), none when the replica runs no request.
	Adapters []string
	Found    bool // any of the above was present
}

// ParseMetrics reads vLLM's load from the Prometheus text format. Lines it does not know are skipped.
//
// vllm:lora_requests_info has one series per adapter set the replica has reported, valued with the
// time it was last the current one: the highest value is current. The simulator stamps it in whole
// seconds, so sets that followed each other within one second tie, and the exposition orders series by
// label, not by time: which of them came last cannot be told. The rule: every adapter of the tied sets
// runs (an adapter believed running keeps others from its slot only until the next change of the set,
// which restamps a series), but a replica that reports no request running (vllm:num_requests_running
// 0) runs no adapter, whatever its series say: a set that emptied within the second of its last change
// would otherwise be believed to hold its slots for as long as the replica stays idle.
func ParseMetrics(r io.Reader) (Load, error) {
	var l Load
	latest := -1.0
	sawRunning := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, value, ok := splitSample(line)
		if !ok {
			continue
		}
		switch name {
		case "vllm:num_requests_waiting":
			l.Waiting += int(value)
			l.Found = true
		case "vllm:num_requests_running":
			l.Running += int(value)
			l.Found, sawRunning = true, true
		case "vllm:lora_requests_info":
			l.Found = true
			if value < latest {
				continue
			}
			if value > latest {
				latest, l.Adapters = value, l.Adapters[:0]
			}
			for _, a := range strings.Split(label(labels, "running_lora_adapters"), ",") {
				if a = strings.TrimSpace(a); a != "" && !slices.Contains(l.Adapters, a) {
					l.Adapters = append(l.Adapters, a)
				}
			}
		}
	}
	if len(l.Adapters) == 0 || sawRunning && l.Running == 0 {
		l.Adapters = nil
	}
	return l, sc.Err()
}

// splitSample splits `name{labels} value [timestamp]`.
func splitSample(line string) (name, labels string, value float64, ok bool) {
	rest := line
	if i := strings.IndexByte(line, '{'); i >= 0 {
		j := strings.LastIndexByte(line, '}')
		if j < i {
			return "", "", 0, false
		}
		name, labels, rest = line[:i], line[i+1:j], line[j+1:]
	} else if i := strings.IndexByte(line, ' '); i >= 0 {
		name, rest = line[:i], line[i:]
	} else {
		return "", "", 0, false
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return "", "", 0, false
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return "", "", 0, false
	}
	return name, labels, v, true
}

// label returns the value of key in a label list (vLLM's values hold no escaped quotes).
func label(labels, key string) string {
	for labels != "" {
		eq := strings.IndexByte(labels, '=')
		if eq < 0 || eq+1 >= len(labels) || labels[eq+1] != '"' {
			return ""
		}
		k := strings.TrimSpace(labels[:eq])
		end := strings.IndexByte(labels[eq+2:], '"')
		if end < 0 {
			return ""
		}
		v := labels[eq+2 : eq+2+end]
		if k == key {
			return v
		}
		labels = strings.TrimLeft(labels[eq+2+end+1:], ", ")
	}
	return ""
}
