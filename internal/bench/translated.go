package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
)

// BudgetTranslated is the translated streams' budget (docs/OPERATIONS.md, "Overhead"): CPU per chunk
// at most this many times a relayed chat stream's, the median of the per-round ratios. The check is
// informative only, like the others.
const BudgetTranslated = 1.3

// BudgetTranslatedAgent is the budget of the agent rows (an agent's whole request, translated, against
// the same conversation sent as chat): CPU per request, which the translation of a large request with
// tools weighs on more than a short one's (docs/OPERATIONS.md, "Overhead").
const BudgetTranslatedAgent = 1.2

// budget is a translated row's budget.
func (r *Row) budget() float64 {
	if r.Budget > 0 {
		return r.Budget
	}
	return BudgetTranslated
}

// JudgeTranslated says whether a translated row's VsChat figure is within budget; a figure of 0 (CPU
// time not measured) is not judged.
func JudgeTranslated(vsChat, budget float64) (judged, ok bool) {
	if vsChat <= 0 {
		return false, false
	}
	return true, vsChat <= budget
}

// UpstreamChunks counts the chat chunks the upstream at url streams in answer to RequestBody with
// stream usage asked, as the edge always asks it on streams (so that runs are counted): the chunks
// every streamed row's answer is made of, whatever its surface, as its request asks the same
// completion. "data: [DONE]" is not a chunk.
func UpstreamChunks(ctx context.Context, url string) (int, error) {
	r := &Row{Name: "upstream", URL: url}
	tr := &http.Transport{Proxy: nil}
	defer tr.CloseIdleConnections()
	s, err := one(ctx, &http.Client{Transport: tr, Timeout: 30 * time.Second}, r, RequestBody(true, true), true,
		make([]byte, 32<<10), make([]byte, 0, 64), &countingReader{})
	if err != nil {
		return 0, fmt.Errorf("counting the upstream's chunks: %w", err)
	}
	return s.events - 1, nil
}

// PrintTranslated writes, after a streamed scenario's table, each translated row against its relayed
// chat row: events and bytes per answer, CPU per upstream chunk (chunks per answer, from
// UpstreamChunks; 0 prints per answer) and the per-round ratios to the chat row, whose median it keeps
// in figures for PrintBudget. rows and res are the scenario's (ScenarioRows).
func PrintTranslated(w io.Writer, sc Scenario, rows []*Row, res [][]RoundResult, chunks int, figures Figures) {
	var chats, translated []int
	for i, r := range rows {
		if r.Chat == nil || r.Skip != "" {
			continue
		}
		c := slices.Index(rows, r.Chat)
		if c < 0 || rows[c].Skip != "" {
			continue
		}
		translated = append(translated, i)
		if !slices.Contains(chats, c) {
			chats = append(chats, c)
		}
	}
	if len(translated) == 0 {
		return
	}
	unit, per := "cpu/chunk", time.Duration(chunks)
	if chunks <= 0 {
		unit, per = "cpu/req", 1
	}
	fmt.Fprintf(w, "  translated streams against the relayed chat stream of the same deployment")
	if chunks > 0 {
		fmt.Fprintf(w, " (every answer is %d chat chunks from upstream)", chunks)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  %-22s %9s %9s %10s   %s\n", "row", "events", "bytes", unit, unit+" ×chat")
	cpuCell := func(m Medians) string {
		if m.CPUPerReq <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.1fµs", float64((m.CPUPerReq/per).Nanoseconds())/1e3)
	}
	for _, c := range chats {
		m := MedianRound(res[c])
		fmt.Fprintf(w, "  %-22s %9.0f %9.0f %10s   %s\n", rows[c].Name, m.EventsPerReq, m.BytesPerReq, cpuCell(m), "(relayed chat)")
	}
	for _, i := range translated {
		r := rows[i]
		m := MedianRound(res[i])
		ratios := CPURatios(res[i], res[slices.Index(rows, r.Chat)])
		cell := "-"
		f := figures[r.Name][sc]
		f.VsChat = 0
		if len(ratios) > 0 {
			cell = Spread(ratios, "%.2f") + " vs " + r.Chat.Name
			f.VsChat = Median(ratios)
		}
		fmt.Fprintf(w, "  %-22s %9.0f %9.0f %10s   %s\n", r.Name, m.EventsPerReq, m.BytesPerReq, cpuCell(m), cell)
		if figures[r.Name] == nil {
			figures[r.Name] = map[Scenario]EdgeFigures{}
		}
		figures[r.Name][sc] = f
	}
}

// printTranslatedBudget writes the translated rows' check: CPU per chunk within BudgetTranslated of the
// relayed chat stream's, in each streamed scenario.
func printTranslatedBudget(w io.Writer, rows []*Row, scenarios []Scenario, figures Figures) {
	if !slices.ContainsFunc(rows, func(r *Row) bool { return r.Chat != nil }) || !slices.ContainsFunc(scenarios, func(s Scenario) bool { return s.Stream }) {
		return
	}
	fmt.Fprintf(w, "  translated streams: CPU per chunk (= per request: the same chunks) ≤ %.1f× the relayed chat stream's (the chat row of the same deployment, same rounds); agent rows ≤ %.1f×\n", BudgetTranslated, BudgetTranslatedAgent)
	for _, r := range rows {
		if r.Chat == nil {
			continue
		}
		if r.Skip != "" || r.Chat.Skip != "" {
			fmt.Fprintf(w, "    SKIP  %-22s %s\n", r.Name, r.Skip+r.Chat.Skip)
			continue
		}
		verdict := "PASS"
		judgedAny := false
		var cells []string
		for _, sc := range scenarios {
			if !sc.Stream {
				continue
			}
			f := figures[r.Name][sc]
			judged, ok := JudgeTranslated(f.VsChat, r.budget())
			s := "-"
			if judged {
				judgedAny = true
				s = fmt.Sprintf("%.2f×", f.VsChat)
				if !ok {
					s += "*"
					verdict = "FAIL"
				}
			}
			cells = append(cells, fmt.Sprintf("%-10s %-8s", sc.String(), s))
		}
		if !judgedAny {
			verdict = "    " // no CPU time to judge (not Linux)
		}
		fmt.Fprintf(w, "    %s  %-22s %s\n", verdict, r.Name, strings.TrimSpace(strings.Join(cells, "  ")))
	}
}
