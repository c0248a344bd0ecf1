package bench

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},           // unsorted, odd
		{[]float64{4, 1, 3, 2}, 2.5},      // even: the mean of the middle two
		{[]float64{1, 1, 100, 1, 1}, 1},   // an outlier does not move it
		{[]float64{-2, 0.5, 10, 7}, 3.75}, // negative values (ttfb differences)
	} {
		in := slices.Clone(c.in)
		if got := Median(in); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.in, got, c.want)
		}
		if !slices.Equal(in, c.in) {
			t.Errorf("Median reordered its input: %v", in)
		}
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("Median of nothing is not NaN")
	}
	if got := Spread([]float64{1.5, 0.9, 1.1, 1.0, 2}, "%.2f"); got != "0.90/1.10/2.00" {
		t.Errorf("Spread = %q, want min/median/max 0.90/1.10/2.00", got)
	}
}

// TestCompareIsPerRound: each edge round is set against the bare proxy's round of the same index, so
// that a slow round on the machine cancels out, and the medians are taken over those ratios.
func TestCompareIsPerRound(t *testing.T) {
	ms := time.Millisecond
	bare := []RoundResult{
		{RPS: 1000, P50: 1 * ms, TTFB50: 500 * time.Microsecond, CPUPerReq: 100 * time.Microsecond},
		{RPS: 500, P50: 2 * ms, TTFB50: 900 * time.Microsecond, CPUPerReq: 100 * time.Microsecond}, // a noisy round
		{RPS: 1000, P50: 1 * ms, TTFB50: 500 * time.Microsecond, CPUPerReq: 100 * time.Microsecond},
	}
	edge := []RoundResult{
		{RPS: 900, P50: 1100 * time.Microsecond, TTFB50: 600 * time.Microsecond, CPUPerReq: 150 * time.Microsecond},
		{RPS: 450, P50: 2200 * time.Microsecond, TTFB50: 1000 * time.Microsecond, CPUPerReq: 150 * time.Microsecond},
		{RPS: 800, P50: 1300 * time.Microsecond, TTFB50: 800 * time.Microsecond, CPUPerReq: 200 * time.Microsecond},
	}
	c := Compare(edge, bare)
	near := func(a, b []float64) bool {
		if len(a) != len(b) {
			return false
		}
		for i := range a {
			if math.Abs(a[i]-b[i]) > 1e-9 {
				return false
			}
		}
		return true
	}
	if want := []float64{0.9, 0.9, 0.8}; !near(c.Throughput, want) {
		t.Errorf("throughput ratios %v, want %v (the noisy round compares with its own bare round)", c.Throughput, want)
	}
	if want := []float64{1.1, 1.1, 1.3}; !near(c.P50, want) {
		t.Errorf("p50 ratios %v, want %v", c.P50, want)
	}
	if want := []float64{1.5, 1.5, 2}; !near(c.CPU, want) {
		t.Errorf("cpu ratios %v, want %v", c.CPU, want)
	}
	f := c.Figures()
	if math.Abs(f.Throughput-0.9) > 1e-9 || math.Abs(f.P50-1.1) > 1e-9 || f.CPU != 1.5 || f.TTFB != 100*time.Microsecond {
		t.Errorf("figures %+v, want throughput 0.9×, p50 1.1×, cpu 1.5×, ttfb +0.1ms", f)
	}

	// A round where the CPU time could not be read leaves the CPU ratio out altogether.
	edge[1].CPUPerReq = 0
	if c := Compare(edge, bare); c.CPU != nil || c.Figures().CPU != 0 {
		t.Errorf("cpu ratios %v with a round unmeasured, want none", c.CPU)
	}
}

// TestRotation: in every slice each row has exactly one turn, and over as many slices as rows each row
// has every position once, so that no row always follows the same one.
func TestRotation(t *testing.T) {
	const n = 7
	seen := make([][n]int, n) // row -> position -> times
	for turn := 1; turn <= n; turn++ {
		order := Rotation(turn, n)
		sorted := slices.Sorted(slices.Values(order))
		if !slices.Equal(sorted, []int{0, 1, 2, 3, 4, 5, 6}) {
			t.Fatalf("turn %d: order %v is not each row once", turn, order)
		}
		for pos, row := range order {
			seen[row][pos]++
		}
		if turn > 1 && Rotation(turn, n)[0] == Rotation(turn-1, n)[0] {
			t.Fatalf("turn %d starts with the same row as the turn before", turn)
		}
	}
	for row, positions := range seen {
		for pos, times := range positions {
			if times != 1 {
				t.Errorf("row %d took position %d %d times in %d slices, want once", row, pos, times, n)
			}
		}
	}
}

func TestSlicing(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		n    int
		each time.Duration
	}{
		{1500 * time.Millisecond, 3, 500 * time.Millisecond},
		{1600 * time.Millisecond, 4, 400 * time.Millisecond},
		{300 * time.Millisecond, 1, 300 * time.Millisecond},
		{500 * time.Millisecond, 1, 500 * time.Millisecond},
	} {
		n, each := Slicing(c.d)
		if n != c.n || each != c.each || each > MaxSlice {
			t.Errorf("Slicing(%v) = %d × %v, want %d × %v", c.d, n, each, c.n, c.each)
		}
	}
}

// TestSummaryPoolsSlices: percentiles come from every request of the round's slices, throughput from
// the requests completed over the slices' time, CPU time per request from every request served.
func TestSummaryPoolsSlices(t *testing.T) {
	var acc SliceResult
	lat := func(from, to int) (out []time.Duration) {
		for i := from; i <= to; i++ {
			out = append(out, time.Duration(i)*time.Millisecond)
		}
		return out
	}
	// 100 requests in two slices of 500ms, in no particular order; 4 more served after the ends.
	a, b := lat(51, 100), lat(1, 50)
	slices.Reverse(a)
	acc.Add(SliceResult{Lat: a, TTFB: a, Window: 500 * time.Millisecond, Served: 52, CPU: 26 * time.Millisecond, CPUOK: true})
	acc.Add(SliceResult{Lat: b, TTFB: b, Window: 500 * time.Millisecond, Served: 52, CPU: 26 * time.Millisecond, CPUOK: true})
	r := acc.Summary()
	if r.RPS != 100 || r.P50 != 51*time.Millisecond || r.P99 != 100*time.Millisecond || r.TTFB50 != 51*time.Millisecond {
		t.Errorf("summary %+v, want 100 req/s, p50 51ms, p99 100ms, ttfb 51ms", r)
	}
	if r.CPUPerReq != 500*time.Microsecond {
		t.Errorf("cpu per request %v, want 52ms / 104 served = 500µs", r.CPUPerReq)
	}
	// One slice whose CPU time could not be read makes the round's CPU time unknown.
	acc.Add(SliceResult{Lat: lat(1, 1), TTFB: lat(1, 1), Window: time.Millisecond, Served: 1, CPUOK: false})
	if r := acc.Summary(); r.CPUPerReq != 0 {
		t.Errorf("cpu per request %v with a slice unmeasured, want 0 (not measured)", r.CPUPerReq)
	}
}

// TestReportJudgesTheBudget renders a scenario and the budget checks from known rounds: the figures
// are the per-round ratios' medians, a row over budget is marked FAIL, and a row that adds an opt-in
// feature shows its cost without a verdict.
func TestReportJudgesTheBudget(t *testing.T) {
	rows := []*Row{{Name: "bare proxy"}, {Name: "edge", Edge: true}, {Name: "slow edge", Edge: true}, {Name: "skipped edge", Edge: true, Skip: "no limits"},
		{Name: "traced edge", Edge: true, Feature: "tracing"}}
	round := func(rps float64, p50 time.Duration) RoundResult {
		return RoundResult{RPS: rps, P50: p50, P99: 2 * p50, TTFB50: p50 / 2}
	}
	var res [][]RoundResult
	for _, r := range [][2]float64{{1000, 1}, {950, 1.05}, {600, 1.6}} {
		res = append(res, []RoundResult{round(r[0], time.Duration(r[1]*1e6)), round(r[0], time.Duration(r[1]*1e6)), round(r[0], time.Duration(r[1]*1e6))})
	}
	res = append(res, nil, res[2])
	sc := Scenario{Stream: false, Conns: 1}
	figures := Figures{}
	var out bytes.Buffer
	PrintScenario(&out, sc, rows, res, 0, figures)
	PrintBudget(&out, 1, rows, []Scenario{sc}, figures)
	text := out.String()
	for _, want := range []string{
		"edge                       950",
		"0.95/0.95/0.95",
		"skipped edge           skipped: no limits",
		"PASS  edge                   plain×1    0.95×",
		"FAIL  slow edge              plain×1    0.60×*",
		"FAIL  slow edge              plain×1    1.60×*",
		"SKIP  skipped edge           no limits",
		"      traced edge            plain×1    0.60×   (cost of tracing, not judged)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the report lacks %q:\n%s", want, text)
		}
	}
	if f := figures["slow edge"][sc]; math.Abs(f.Throughput-0.6) > 1e-9 || math.Abs(f.P50-1.6) > 1e-9 {
		t.Errorf("figures of the slow edge %+v, want 0.6× and 1.6×", f)
	}
}

func TestSelectRows(t *testing.T) {
	bare := &Row{Name: "bare proxy"}
	chat := &Row{Name: "edge, retention none"}
	rows := []*Row{{Name: "direct"}, bare, {Name: "edge"}, chat, {Name: "edge process"}, {Name: "edge process, no spool"},
		{Name: "edge, messages", Chat: chat}}
	names := func(rs []*Row) string { return RowNames(rs) }
	if got := names(SelectRows(rows, "", bare)); got != names(rows) {
		t.Errorf("no words: %s", got)
	}
	if got, want := names(SelectRows(rows, "process", bare)), "bare proxy, edge process, edge process, no spool"; got != want {
		t.Errorf("process: %s, want %s", got, want)
	}
	if got, want := names(SelectRows(rows, "=edge,=edge process", bare)), "bare proxy, edge, edge process"; got != want {
		t.Errorf("=edge,=edge process: %s, want %s", got, want)
	}
	if got, want := names(SelectRows(rows, " messages ,direct", bare)), "direct, bare proxy, edge, retention none, edge, messages"; got != want {
		t.Errorf("messages,direct: %s, want %s", got, want)
	}
}

// The Redis row is judged against the row of the same limits counted in the process: a row within
// the budget passes, one that costs more CPU per request or serves less fails; only the loaded
// connections are judged.
func TestReportJudgesSharedLimits(t *testing.T) {
	local := &Row{Name: "edge process + limits", Edge: true, Feature: "limits in the process"}
	rows := []*Row{{Name: "bare proxy"}, local,
		{Name: "edge process + Redis", Edge: true, Feature: "Redis", Against: local},
		{Name: "slow Redis", Edge: true, Feature: "Redis", Against: local}}
	loaded, one := Scenario{Conns: 16}, Scenario{Conns: 1}
	figures := Figures{
		"edge process + limits": {loaded: {Throughput: 0.8, CPU: 1.2}, one: {Throughput: 0.9, CPU: 1.2}},
		"edge process + Redis":  {loaded: {Throughput: 0.76, CPU: 1.3}, one: {Throughput: 0.1, CPU: 5}},
		"slow Redis":            {loaded: {Throughput: 0.6, CPU: 1.5}, one: {Throughput: 0.9, CPU: 1.2}},
	}
	var out bytes.Buffer
	printSharedBudget(&out, 16, rows, []Scenario{loaded, one}, figures)
	text := out.String()
	for _, want := range []string{
		"PASS  edge process + Redis   plain×16   cpu/req 1.08×   req/s 0.95×",
		"FAIL  slow Redis             plain×16   cpu/req 1.25×*  req/s 0.75×*",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the report lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "×1 ") {
		t.Errorf("a scenario at 1 connection was judged:\n%s", text)
	}
}
