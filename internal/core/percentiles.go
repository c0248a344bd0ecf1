package core

import (
	"math"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/internal/qsketch"
)

// Latency percentiles (docs/API.md, "Usage"): the recorder keeps, in each hourly row, a sketch of the
// latencies of the calls answered (internal/qsketch: within 1% of the true value at any count), which
// merge across hours, keys and arms. Rows written before the sketches have only the fixed-bucket
// histogram (of every call, refused ones included): a range holding such a row is estimated from the
// histograms, with the error that bucket widths allow, and says so.

// SketchErrorPct is the relative error, in percent, of a percentile read from the sketches.
const SketchErrorPct = 1

// Percentiles are the p50 and p95 of a set of latencies in milliseconds, nil without calls; ErrorPct
// is the largest relative error, in percent, they may carry (SketchErrorPct from the sketches, up to
// 100 from histograms), nil without calls.
type Percentiles struct {
	P50Ms, P95Ms *int64
	ErrorPct     *int
}

// latencies merges the latencies of hourly rows: their sketches, or for rows without one, their
// histograms.
type latencies struct {
	sketch qsketch.Sketch
	hist   Histogram
	legacy bool // some row had calls and no sketch
}

// add merges one row's latencies: its sketch when it has one, else its histogram.
func (l *latencies) add(sketch []byte, hist Histogram) {
	if sketch != nil {
		if s, err := qsketch.Decode(sketch); err == nil {
			l.sketch.Merge(s)
			return
		}
	}
	l.addHistogram(hist)
}

func (l *latencies) addHistogram(hist Histogram) {
	for i, n := range hist {
		if n > 0 {
			l.hist[i] += n
			l.legacy = true
		}
	}
}

func (l *latencies) merge(o *latencies) {
	l.sketch.Merge(&o.sketch)
	if o.legacy {
		l.addHistogram(o.hist)
	}
}

// percentiles reads p50 and p95: from the sketches alone when every row had one, else from the
// histograms with the sketches' values put into their buckets.
func (l *latencies) percentiles() Percentiles {
	if !l.legacy {
		p50, ok := l.sketch.Quantile(0.5)
		if !ok {
			return Percentiles{}
		}
		p95, _ := l.sketch.Quantile(0.95)
		e, r50, r95 := SketchErrorPct, int64(math.Round(p50)), int64(math.Round(p95))
		return Percentiles{P50Ms: &r50, P95Ms: &r95, ErrorPct: &e}
	}
	h := l.hist
	l.sketch.Each(func(v float64, n uint64) { h[db.LatencyBucket(int64(math.Round(v)))] += int64(n) })
	p50, ok := h.Quantile(0.5)
	if !ok {
		return Percentiles{}
	}
	p95, _ := h.Quantile(0.95)
	e := max(h.errorPct(p50), h.errorPct(p95))
	return Percentiles{P50Ms: &p50, P95Ms: &p95, ErrorPct: &e}
}

// errorPct is how far, in percent of v, the true value of a percentile estimated as v may lie: the
// farther end of v's bucket (100 at most, and for the open last bucket).
func (h Histogram) errorPct(v int64) int {
	if v <= 0 {
		return 100
	}
	i := db.LatencyBucket(v)
	if i >= len(db.LatencyBoundsMs) || (i == len(db.LatencyBoundsMs)-1 && v == db.LatencyBoundsMs[i]) {
		return 100
	}
	lo := int64(0)
	if i > 0 {
		lo = db.LatencyBoundsMs[i-1]
	}
	far := max(v-lo, db.LatencyBoundsMs[i]-v)
	return min(100, int(math.Ceil(100*float64(far)/float64(v))))
}
