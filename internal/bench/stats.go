package bench

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
)

// Median is the middle of v (the mean of the two middle values when their number is even), NaN for
// none. v is left as it was.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Spread formats the min, median and max of v, each with format ("%.2f" gives "0.91/0.95/1.02").
func Spread(v []float64, format string) string {
	s := slices.Clone(v)
	sort.Float64s(s)
	return fmt.Sprintf(format+"/"+format+"/"+format, s[0], Median(s), s[len(s)-1])
}

// MaxSlice is the longest stretch a row is loaded before the next row takes its turn.
const MaxSlice = 500 * time.Millisecond

// Slicing splits a row's time in a round into the fewest slices of at most MaxSlice.
func Slicing(d time.Duration) (n int, each time.Duration) {
	n = int((d + MaxSlice - 1) / MaxSlice)
	return n, d / time.Duration(n)
}

// Rotation is the order in which n rows take their turns in slice number turn: each row once, starting
// one further each slice, so that no row always follows the same one (a row can leave work behind,
// garbage to collect or runs to write, which the next row pays for).
func Rotation(turn, n int) []int {
	order := make([]int, n)
	for j := range order {
		order[j] = (turn + j) % n
	}
	return order
}

// RoundResult is one row's load in one round.
type RoundResult struct {
	RPS              float64
	P50, P99, TTFB50 time.Duration
	CPUPerReq        time.Duration // of the row's server process; 0 when not measured
	// Events and bytes per answer, over every request served (events: of streamed answers only).
	EventsPerReq, BytesPerReq float64
	Busy                      float64 // the machine's CPUs busy, 0..1, meanwhile; 0 when not measured
}

// Medians are a row's figures in a scenario, each the median over rounds.
type Medians struct {
	RPS                       float64
	P50, P99, TTFB, CPUPerReq time.Duration
	EventsPerReq, BytesPerReq float64
	Busy                      float64
}

// MedianRound takes the median of each figure over rounds, each on its own.
func MedianRound(rs []RoundResult) Medians {
	var rps, p50, p99, ttfb, cpu, events, nBytes, busy []float64
	for _, r := range rs {
		busy = append(busy, r.Busy)
		rps = append(rps, r.RPS)
		p50 = append(p50, float64(r.P50))
		p99 = append(p99, float64(r.P99))
		ttfb = append(ttfb, float64(r.TTFB50))
		cpu = append(cpu, float64(r.CPUPerReq))
		events = append(events, r.EventsPerReq)
		nBytes = append(nBytes, r.BytesPerReq)
	}
	return Medians{RPS: Median(rps), P50: time.Duration(Median(p50)), P99: time.Duration(Median(p99)),
		TTFB: time.Duration(Median(ttfb)), CPUPerReq: time.Duration(Median(cpu)), EventsPerReq: Median(events), BytesPerReq: Median(nBytes),
		Busy: Median(busy)}
}

// Comparison is an edge row against the bare proxy, round by round: each figure is a ratio (or, for
// TTFB, a difference) to the bare proxy of the same round, so that load from elsewhere on the machine
// during a round weighs on both sides of it.
type Comparison struct {
	Throughput, P50 []float64 // edge / bare
	CPU             []float64 // edge / bare, only when every round measured both; else empty
	TTFB            []float64 // edge − bare, in nanoseconds
}

// Compare sets an edge row's rounds against the bare proxy's of the same rounds.
func Compare(edge, bare []RoundResult) Comparison {
	var c Comparison
	for k, e := range edge {
		b := bare[k]
		c.Throughput = append(c.Throughput, e.RPS/b.RPS)
		c.P50 = append(c.P50, float64(e.P50)/float64(b.P50))
		c.TTFB = append(c.TTFB, float64(e.TTFB50-b.TTFB50))
	}
	c.CPU = CPURatios(edge, bare)
	return c
}

// CPURatios are a row's CPU time per request over another row's, round by round; nil unless every
// round measured both (a ratio over some rounds only would not compare with the others).
func CPURatios(rows, base []RoundResult) []float64 {
	var out []float64
	for k, r := range rows {
		if r.CPUPerReq <= 0 || base[k].CPUPerReq <= 0 {
			return nil
		}
		out = append(out, float64(r.CPUPerReq)/float64(base[k].CPUPerReq))
	}
	return out
}

// EdgeFigures are the medians of a Comparison, which the budget checks judge.
type EdgeFigures struct {
	Throughput, P50, CPU float64       // edge/bare ratios (CPU: 0 when not measured)
	TTFB                 time.Duration // edge − bare
	// TTFBRounds are the rounds' Δttfb (edge − bare, in nanoseconds), in order (JudgeQuiet).
	TTFBRounds []float64
	// VsChat is a translated row's CPU per chunk over its relayed chat row's, the median of the
	// per-round ratios (PrintTranslated); 0 when not measured.
	VsChat float64
}

// Figures are the medians over rounds of the comparison.
func (c Comparison) Figures() EdgeFigures {
	f := EdgeFigures{Throughput: Median(c.Throughput), P50: Median(c.P50), TTFB: time.Duration(Median(c.TTFB))}
	if len(c.CPU) > 0 {
		f.CPU = Median(c.CPU)
	}
	return f
}

// SliceResult is what one or more slices of load on a row measured.
type SliceResult struct {
	Lat, TTFB []time.Duration // of the requests completed within the slice
	Window    time.Duration
	Served    int           // requests completed, those finished after the slice's end included
	Events    int64         // events of the streamed answers served
	Bytes     int64         // body bytes of the answers served
	CPU       time.Duration // CPU time of the row's server process meanwhile
	CPUOK     bool
	// Busy and Total are the machine's CPU time busy and in all meanwhile (MachineCPU), every process's.
	Busy, Total time.Duration
	slices      int
}

// Add pools another slice into s. The CPU time counts only if every slice measured it.
func (s *SliceResult) Add(o SliceResult) {
	s.Lat = append(s.Lat, o.Lat...)
	s.TTFB = append(s.TTFB, o.TTFB...)
	s.Window += o.Window
	s.Served += o.Served
	s.Events += o.Events
	s.Bytes += o.Bytes
	s.CPU += o.CPU
	s.CPUOK = o.CPUOK && (s.CPUOK || s.slices == 0)
	s.Busy += o.Busy
	s.Total += o.Total
	s.slices++
}

// Summary turns a round's pooled slices into throughput and percentiles: throughput counts the
// requests completed within the slices over their time, CPU time is shared among every request served.
// It needs at least one completed request.
func (s *SliceResult) Summary() RoundResult {
	sortDurations(s.Lat)
	sortDurations(s.TTFB)
	n := len(s.Lat)
	r := RoundResult{RPS: float64(n) / s.Window.Seconds(), P50: s.Lat[n/2], P99: s.Lat[n*99/100], TTFB50: s.TTFB[len(s.TTFB)/2]}
	if s.CPUOK && s.Served > 0 {
		r.CPUPerReq = s.CPU / time.Duration(s.Served)
	}
	if s.Served > 0 {
		r.EventsPerReq, r.BytesPerReq = float64(s.Events)/float64(s.Served), float64(s.Bytes)/float64(s.Served)
	}
	if s.Total > 0 {
		r.Busy = float64(s.Busy) / float64(s.Total)
	}
	return r
}

func sortDurations(d []time.Duration) { slices.Sort(d) }
