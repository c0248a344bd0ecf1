package inference

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"
)

// A name's lookups: addresses sorted without duplicates; a run of failures (an error, or no address)
// logged once when it begins and once when the name resolves again.
func TestHostLookupLogsARunOfFailuresOnce(t *testing.T) {
	var answer []string
	var fail error
	var logs bytes.Buffer
	h := newHostLookup("vllm-headless", func(context.Context, string) ([]string, error) { return answer, fail }, time.Second,
		slog.New(slog.NewTextHandler(&logs, nil)))
	ctx := context.Background()
	answer = []string{"10.0.0.3", "10.0.0.1", "10.0.0.3"}
	if got, err := h.addrs(ctx); err != nil || !slices.Equal(got, []string{"10.0.0.1", "10.0.0.3"}) {
		t.Fatalf("addrs = %v, %v", got, err)
	}
	fail = errors.New("no such host")
	for range 3 {
		if got, err := h.addrs(ctx); err == nil || got != nil {
			t.Fatalf("a failed lookup gave %v, %v", got, err)
		}
	}
	fail, answer = nil, nil
	if _, err := h.addrs(ctx); err == nil {
		t.Fatal("a lookup without an address is no error")
	}
	answer = []string{"10.0.0.2"}
	if got, err := h.addrs(ctx); err != nil || len(got) != 1 {
		t.Fatalf("addrs = %v, %v", got, err)
	}
	if n := strings.Count(logs.String(), "does not resolve"); n != 1 {
		t.Errorf("the failures were logged %d times, want once:\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), "resolves again"); n != 1 {
		t.Errorf("the recovery was logged %d times, want once:\n%s", n, logs.String())
	}
}
