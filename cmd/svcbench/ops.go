package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// recorderCatchUp is how long the run recorder may hold a partial batch before it writes it (the
// default recorder.Options.FlushInterval, 200ms), plus time for the write.
const recorderCatchUp = 250 * time.Millisecond

// settle lets the edge write the runs a slice left behind, so that the work does not weigh on the next
// row's slice: it waits until the recorder's queue is empty (for at most 3 seconds), then for the
// recorder's partial batch, which /metrics does not show, to be written.
func settle(ctx context.Context, base string) {
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		m, err := scrape(ctx, base)
		if err != nil || m["svc_recorder_queue_depth"] == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(recorderCatchUp)
}

var opsClient = &http.Client{Timeout: 5 * time.Second}

// scrape reads the unlabelled series of the server's /metrics.
func scrape(ctx context.Context, base string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := opsClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: status %d", resp.StatusCode)
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			m[name] = v
		}
	}
	return m, sc.Err()
}

func getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := opsClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}
