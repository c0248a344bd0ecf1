package bench

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"
)

// The budget of the edge's overhead. The checks are informative only.
const (
	BudgetThroughput = 0.9                    // median edge/bare throughput at the loaded connections, at least (issues 18, 19)
	BudgetP50        = 1.2                    // median edge/bare p50 latency, at most
	BudgetTTFB       = 300 * time.Microsecond // median streamed time-to-first-byte, edge − bare, at most
	// Shared limits (issue 27): CPU per request of the edge process and redis-server, at most, and
	// throughput, at least, against the same limits counted in the edge process (Row.Against).
	BudgetSharedCPU        = 1.15
	BudgetSharedThroughput = 0.9
)

// Row is one target of the load: a line of every scenario's table.
type Row struct {
	Name      string
	URL, Host string // Host, when set, names the deployment (the connection still goes to URL's address)
	Key       string
	Edge      bool   // compared with the bare proxy of the same round
	Records   bool   // the deployment records runs (the bench lets the recorder catch up after its slices)
	Ops       string // base URL of the process whose recorder (or run shipper) settles; "" for the server's
	PID       int    // the process that serves the row, whose CPU time is measured
	Skip      string // why the row is not measured, or ""
	// Surface is the API the row's requests speak (chat completions unless set). A translated row
	// (Messages or Responses) is measured in the streamed scenarios only, and judged against Chat, the
	// relayed chat row of the same deployment (PrintTranslated), not by the chat rows' budget.
	Surface Surface
	Chat    *Row
	// Body, when set, is the row's own streamed request (an agent's conversation, or the same one in
	// chat form for its translated rows' Chat): the row is measured in the streamed scenarios only.
	Body []byte
	// Budget is a translated row's CPU budget against its Chat row; 0 is BudgetTranslated.
	Budget float64
	// Feature names the opt-in feature the row adds to another edge row (tracing every request, Redis
	// limits): the budget shows what it costs, without judging it (docs/OPERATIONS.md, "Overhead").
	Feature string
	// Also are more processes whose CPU time counts for the row (the Redis row's redis-server).
	Also []int
	// Against is the row a Feature row's cost is judged against, at the loaded connections (the
	// Redis row against the same deployment's limits counted in an edge process: BudgetSharedCPU and
	// BudgetSharedThroughput); nil: not judged.
	Against *Row
	// Quiet is the same row without the Feature, whose streamed time to first byte this one's must stay
	// within the noise of (the shadow canary's row against the edge row: printQuietBudget).
	Quiet *Row
}

// ScenarioRows are the rows measured in a scenario, in order: every row in the streamed ones, the
// chat rows only in the others; in a paced one, only the rows that are not edges (the bare proxy), the
// rows with a Quiet row and those Quiet rows, which it is for (printQuietBudget).
func ScenarioRows(sc Scenario, rows []*Row) []*Row {
	if sc.Stream && sc.Pause == 0 {
		return rows
	}
	var out []*Row
	for _, r := range rows {
		switch {
		case sc.Pause > 0:
			if !r.Edge || r.Quiet != nil || slices.ContainsFunc(rows, func(o *Row) bool { return o.Quiet == r }) {
				out = append(out, r)
			}
		case r.Surface == SurfaceChat && r.Body == nil:
			out = append(out, r)
		}
	}
	return out
}

// RowNames lists the rows' names, in order.
func RowNames(rows []*Row) string {
	var names []string
	for _, r := range rows {
		names = append(names, r.Name)
	}
	return strings.Join(names, ", ")
}

// Scenario is one kind of load: streamed answers or not, at a number of connections.
type Scenario struct {
	Stream bool
	Conns  int
	// Pause is the time each connection waits after an answer before its next request: a paced
	// scenario leaves the CPUs room beside the requests (PacedPause), where a Quiet row is judged.
	Pause time.Duration
}

// PacedPause is the pause of the paced scenario: about what a request of the streamed scenario at 1
// connection takes, so that about half the load generator's time is spent waiting and the work a
// feature does beside the requests (a shadow copy: svc's and its upstream's) finds CPUs free.
const PacedPause = time.Millisecond

func (s Scenario) String() string {
	mode := "plain"
	if s.Stream {
		mode = "stream"
	}
	if s.Pause > 0 {
		return fmt.Sprintf("%s×%d paced", mode, s.Conns)
	}
	return fmt.Sprintf("%s×%d", mode, s.Conns)
}

// Title is the scenario's heading in the report.
func (s Scenario) Title() string {
	mode := "non-streamed"
	if s.Stream {
		mode = "streamed"
	}
	unit := "connections"
	if s.Conns == 1 {
		unit = "connection"
	}
	if s.Pause > 0 {
		return fmt.Sprintf("%s, %d %s, paced (%v between an answer and the next request)", mode, s.Conns, unit, s.Pause)
	}
	return fmt.Sprintf("%s, %d %s", mode, s.Conns, unit)
}

// Figures are the edge rows' medians: row name → scenario → figures, for the budget checks.
type Figures map[string]map[Scenario]EdgeFigures

// PrintScenario writes a scenario's table, and keeps the edge rows' medians in figures. res holds each
// row's rounds; bare is the index of the bare proxy's row.
func PrintScenario(w io.Writer, sc Scenario, rows []*Row, res [][]RoundResult, bare int, figures Figures) {
	var line strings.Builder
	printf := func(format string, a ...any) { fmt.Fprintf(&line, format, a...) }
	endLine := func() {
		fmt.Fprintln(w, strings.TrimRight(line.String(), " "))
		line.Reset()
	}
	printf("  %-22s %7s %8s %8s", "row", "req/s", "p50", "p99")
	if sc.Stream {
		printf(" %8s", "ttfb")
	}
	printf(" %8s %5s   %-15s %-15s %-15s", "cpu/req", "busy", "req/s ×bare", "p50 ×bare", "cpu/req ×bare")
	if sc.Stream {
		printf(" %s", "Δttfb")
	}
	endLine()
	for i, r := range rows {
		if r.Skip != "" {
			printf("  %-22s skipped: %s", r.Name, r.Skip)
			endLine()
			continue
		}
		m := MedianRound(res[i])
		printf("  %-22s %7.0f %8s %8s", r.Name, m.RPS, Ms(m.P50), Ms(m.P99))
		if sc.Stream {
			printf(" %8s", Ms(m.TTFB))
		}
		cpu := "-"
		if m.CPUPerReq > 0 {
			cpu = fmt.Sprintf("%.0fµs", float64(m.CPUPerReq.Nanoseconds())/1e3)
		}
		busy := "-"
		if m.Busy > 0 {
			busy = fmt.Sprintf("%.0f%%", 100*m.Busy)
		}
		printf(" %8s %5s", cpu, busy)
		if r.Edge {
			c := Compare(res[i], res[bare])
			cpuCell := "-"
			if len(c.CPU) > 0 {
				cpuCell = Spread(c.CPU, "%.2f")
			}
			printf("   %-15s %-15s %-15s", Spread(c.Throughput, "%.2f"), Spread(c.P50, "%.2f"), cpuCell)
			f := c.Figures()
			f.TTFBRounds = c.TTFB
			if sc.Stream {
				dt := slices.Clone(c.TTFB)
				sort.Float64s(dt)
				printf(" %s (%s..%s)", SignedMs(f.TTFB), SignedMs(time.Duration(dt[0])), SignedMs(time.Duration(dt[len(dt)-1])))
			}
			if figures[r.Name] == nil {
				figures[r.Name] = map[Scenario]EdgeFigures{}
			}
			figures[r.Name][sc] = f
		}
		endLine()
	}
}

// PrintBudget writes the budget checks, per edge row, with the medians they were judged on; conns is
// the connections of the loaded scenarios.
func PrintBudget(w io.Writer, conns int, rows []*Row, scenarios []Scenario, figures Figures) {
	fmt.Fprintf(w, "\nbudget checks (informative only: the exit code is 0 whatever they say; figures are medians over rounds, * = over budget)\n")
	type check struct {
		title string
		only  func(Scenario) bool
		cell  func(EdgeFigures) (string, bool)
		info  bool // no budget: shown for reference
	}
	checks := []check{
		{fmt.Sprintf("median throughput ≥ %.2f× bare at %d connections", BudgetThroughput, conns),
			func(s Scenario) bool { return s.Conns == conns },
			func(f EdgeFigures) (string, bool) {
				return fmt.Sprintf("%.2f×", f.Throughput), f.Throughput >= BudgetThroughput
			}, false},
		{fmt.Sprintf("p50 ≤ %.1f× bare", BudgetP50),
			func(Scenario) bool { return true },
			func(f EdgeFigures) (string, bool) { return fmt.Sprintf("%.2f×", f.P50), f.P50 <= BudgetP50 }, false},
		// TTFB is the latency the edge adds where the CPUs have room. Where the load saturates them, a
		// request's latency is connections / throughput (Little's law), so TTFB there is the throughput
		// ratio in other units (0.9× the bare proxy's throughput, within budget, adds ~0.6 ms at 5 ms):
		// shown, but judged by the throughput budget.
		{fmt.Sprintf("streamed TTFB adds ≤ %.1f ms (where the CPUs are not saturated)", BudgetTTFB.Seconds()*1000),
			func(s Scenario) bool { return s.Stream && !Saturated(s.Conns) },
			func(f EdgeFigures) (string, bool) { return SignedMs(f.TTFB), f.TTFB <= BudgetTTFB }, false},
		{fmt.Sprintf("for reference, no budget: streamed TTFB at %d connections, queueing for the saturated CPUs (tracks throughput)", conns),
			func(s Scenario) bool { return s.Stream && Saturated(s.Conns) },
			func(f EdgeFigures) (string, bool) { return SignedMs(f.TTFB), true }, true},
		{"for reference, no budget: CPU time per request ×bare (the figure least moved by other load on the machine)",
			func(Scenario) bool { return true },
			func(f EdgeFigures) (string, bool) {
				if f.CPU == 0 {
					return "-", true
				}
				return fmt.Sprintf("%.2f×", f.CPU), true
			}, true},
	}
	for i := range checks {
		// The paced scenario is for the Quiet rows' check alone (printQuietBudget).
		only := checks[i].only
		checks[i].only = func(s Scenario) bool { return s.Pause == 0 && only(s) }
	}
	for _, c := range checks {
		if !slices.ContainsFunc(scenarios, c.only) {
			continue
		}
		fmt.Fprintf(w, "  %s\n", c.title)
		for _, r := range rows {
			if !r.Edge || r.Surface != SurfaceChat {
				continue // translated rows have their own check (printTranslatedBudget)
			}
			if r.Skip != "" {
				fmt.Fprintf(w, "    SKIP  %-22s %s\n", r.Name, r.Skip)
				continue
			}
			pass := true
			judged := !c.info && r.Feature == ""
			var cells []string
			for _, sc := range scenarios {
				if !c.only(sc) {
					continue
				}
				s, ok := c.cell(figures[r.Name][sc])
				if !ok && judged {
					s += "*"
					pass = false
				}
				cells = append(cells, fmt.Sprintf("%-10s %-8s", sc.String(), s))
			}
			verdict := "PASS"
			if !judged {
				verdict = "    "
			} else if !pass {
				verdict = "FAIL"
			}
			line := strings.TrimSpace(strings.Join(cells, "  "))
			if r.Feature != "" && !c.info {
				line += "   (cost of " + r.Feature + ", not judged)"
			}
			fmt.Fprintf(w, "    %s  %-22s %s\n", verdict, r.Name, line)
		}
	}
	printTranslatedBudget(w, rows, scenarios, figures)
	printSharedBudget(w, conns, rows, scenarios, figures)
	printQuietBudget(w, rows, scenarios, figures)
	if Saturated(conns) {
		fmt.Fprintf(w, "  note: at %d connections the load saturates the %d CPUs, so p50 and TTFB there grow with each row's CPU cost\n", conns, runtime.NumCPU())
		fmt.Fprintf(w, "  per request (requests queue for the CPUs), not only with the latency the edge adds; 1 connection shows the latter\n")
	}
}

// Saturated reports whether load at this many connections saturates the machine's CPUs: each
// connection keeps the load generator, the upstream and the proxy busy in turn.
func Saturated(conns int) bool { return conns > runtime.NumCPU() }

// Ms formats a duration in milliseconds.
func Ms(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d.Nanoseconds())/1e6)
}

// SignedMs formats a difference in milliseconds, with its sign.
func SignedMs(d time.Duration) string {
	return fmt.Sprintf("%+.2fms", float64(d.Nanoseconds())/1e6)
}

// SelectRows keeps the rows whose names contain one of the comma-separated words of only (or are one,
// for a word that starts with =), with keep
// (the bare proxy every edge row is compared with) and each kept translated row's chat row, in their
// order; every row when only is empty.
func SelectRows(rows []*Row, only string, keep *Row) []*Row {
	var words []string
	for _, w := range strings.Split(only, ",") {
		if w = strings.TrimSpace(w); w != "" {
			words = append(words, w)
		}
	}
	if len(words) == 0 {
		return rows
	}
	chosen := map[*Row]bool{keep: true}
	for _, r := range rows {
		if slices.ContainsFunc(words, func(w string) bool {
			exact, ok := strings.CutPrefix(w, "=")
			return (ok && r.Name == exact) || (!ok && strings.Contains(r.Name, w))
		}) {
			chosen[r] = true
			if r.Chat != nil {
				chosen[r.Chat] = true
			}
			if r.Against != nil {
				chosen[r.Against] = true
			}
			if r.Quiet != nil {
				chosen[r.Quiet] = true
			}
		}
	}
	var out []*Row
	for _, r := range rows {
		if chosen[r] {
			out = append(out, r)
		}
	}
	return out
}

// printSharedBudget judges the rows with an Against row at the loaded connections: the ratio of
// their medians (each a ratio to the bare proxy of the same round) of CPU per request, the Also
// processes' included, and of throughput.
func printSharedBudget(w io.Writer, conns int, rows []*Row, scenarios []Scenario, figures Figures) {
	if !slices.ContainsFunc(rows, func(r *Row) bool { return r.Against != nil }) {
		return
	}
	fmt.Fprintf(w, "  shared limits: CPU per request (redis-server's included) ≤ %.2f×, throughput ≥ %.2f× the same limits counted in the process, at %d connections\n",
		BudgetSharedCPU, BudgetSharedThroughput, conns)
	for _, r := range rows {
		if r.Against == nil {
			continue
		}
		if r.Skip != "" || r.Against.Skip != "" {
			fmt.Fprintf(w, "    SKIP  %-22s %s\n", r.Name, r.Skip+r.Against.Skip)
			continue
		}
		verdict := "PASS"
		var cells []string
		for _, sc := range scenarios {
			if sc.Conns != conns {
				continue
			}
			f, a := figures[r.Name][sc], figures[r.Against.Name][sc]
			cpu, tput := "-", "-"
			if f.CPU > 0 && a.CPU > 0 {
				v := f.CPU / a.CPU
				cpu = fmt.Sprintf("%.2f×", v)
				if v > BudgetSharedCPU {
					cpu += "*"
					verdict = "FAIL"
				}
			}
			if a.Throughput > 0 {
				v := f.Throughput / a.Throughput
				tput = fmt.Sprintf("%.2f×", v)
				if v < BudgetSharedThroughput {
					tput += "*"
					verdict = "FAIL"
				}
			}
			cells = append(cells, fmt.Sprintf("%-10s cpu/req %-7s req/s %-7s", sc.String(), cpu, tput))
		}
		fmt.Fprintf(w, "    %s  %-22s %s\n", verdict, r.Name, strings.TrimSpace(strings.Join(cells, "  ")))
	}
}
