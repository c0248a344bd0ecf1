package logx

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// lines is a JSON log being written, read back line by line.
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lines) records(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// total is how many failures of msg the lines account for: each full line is one, each count line
// its repeats.
func total(recs []map[string]any, msg string) (full, counts, n int) {
	for _, r := range recs {
		switch m := r["msg"].(string); {
		case m == msg:
			full++
			n++
		case strings.HasPrefix(m, msg+": … "):
			counts++
			n += int(r["repeats"].(float64))
		}
	}
	return
}

func TestStormIsCountedExactly(t *testing.T) {
	var out lines
	l := New(slog.New(slog.NewJSONHandler(&out, nil)), 50*time.Millisecond)
	const goroutines, each = 8, 1250
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for i := range each {
				l.Log(context.Background(), slog.LevelWarn, "upstream failed", "demo 502", slog.Int("i", i))
				if i%100 == 0 {
					time.Sleep(2 * time.Millisecond) // spread over several intervals
				}
			}
		})
	}
	wg.Wait()
	l.Flush()
	recs := out.records(t)
	full, counts, n := total(recs, "upstream failed")
	if n != goroutines*each || len(recs) >= 100 || full != 1 || counts == 0 {
		t.Fatalf("%d failures wrote %d lines (%d full, %d counts) accounting for %d; want 1 full line, fewer than 100 in all, and %d counted",
			goroutines*each, len(recs), full, counts, n, goroutines*each)
	}
}

func TestKindsAndQuietIntervals(t *testing.T) {
	var out lines
	l := New(slog.New(slog.NewJSONHandler(&out, nil)), 30*time.Millisecond)
	ctx := context.Background()
	l.Log(ctx, slog.LevelWarn, "edge", "a 502")
	l.Log(ctx, slog.LevelWarn, "edge", "a 502")
	l.Log(ctx, slog.LevelWarn, "edge", "b 502") // another kind: written in full
	l.Log(ctx, slog.LevelError, "other", "a 502")
	time.Sleep(200 * time.Millisecond) // the count line of a, then a quiet interval: a is forgotten
	l.Log(ctx, slog.LevelWarn, "edge", "a 502")
	l.Flush()
	var got []string
	for _, r := range out.records(t) {
		s := r["level"].(string) + " " + r["msg"].(string)
		if k, ok := r["kind"]; ok {
			s += " [" + k.(string) + "]"
		}
		got = append(got, s)
	}
	want := []string{"WARN edge", "WARN edge", "ERROR other", "WARN edge: … 1 more in the last 30 ms [a 502]", "WARN edge"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestDisabledLevelsCostNothing(t *testing.T) {
	var out lines
	l := New(slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelError})), time.Hour)
	l.Log(context.Background(), slog.LevelWarn, "edge", "a")
	if l.kinds[kindKey{"edge", "a"}] != nil || out.buf.Len() != 0 {
		t.Fatal("a line below the logger's level was kept or written")
	}
}

func TestFormats(t *testing.T) {
	for n, want := range map[int]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 12345: "12,345", 1234567: "1,234,567", -1234: "-1,234"} {
		if got := Thousands(n); got != want {
			t.Errorf("Thousands(%d) = %q, want %q", n, got, want)
		}
	}
	for d, want := range map[time.Duration]string{10 * time.Second: "10 s", 1500 * time.Millisecond: "1.5 s", 200 * time.Millisecond: "200 ms"} {
		if got := Seconds(d); got != want {
			t.Errorf("Seconds(%v) = %q, want %q", d, got, want)
		}
	}
}
