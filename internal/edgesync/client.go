// Package edgesync keeps an svc edge process in step with its control plane, without a database
// (docs/DEPLOY.md): a cache of deployment snapshots that serves the edge handler, the change feed that
// drops what changed, and the shipper that sends runs and key uses back in batches.
package edgesync

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/svcdev/svc/internal/edgemodel"
	"github.com/svcdev/svc/internal/edgewire"
)

// Client calls the control plane's internal API with an edge token. The token travels in the
// Authorization header only; it is never part of an error or a log line.
type Client struct {
	base  string // the first control plane's base URL; failover.go sends requests to the one in use
	token string
	http  *http.Client // snapshots and run batches: each call under its own deadline
	lines atomic.Bool  // the control plane reads run batches in lines (its hello said so)
}

// NewClient returns a client of the control plane at baseURL (its management API base URL), or of
// several replicas of one, comma-separated: it stays with one while it answers and moves to the next
// when it does not (failover.go).
func NewClient(baseURL, token string) (*Client, error) {
	var bases []string
	for _, b := range strings.Split(baseURL, ",") {
		b = strings.TrimSpace(b)
		u, err := url.Parse(b)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("control plane URL %q: give the control plane's base URL, e.g. https://cp.internal:8080 (or several replicas' URLs, comma-separated)", b)
		}
		bases = append(bases, strings.TrimRight(b, "/"))
	}
	if !strings.HasPrefix(token, edgemodel.EdgeTokenPrefix) {
		return nil, fmt.Errorf("the edge token must start with %s (make one with `svc edge-tokens create NAME` on the control-plane host)", edgemodel.EdgeTokenPrefix)
	}
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 5 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	return &Client{base: bases[0], token: token, http: &http.Client{Transport: newFailover(bases, tr)}}, nil
}

// Close releases idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// unreachableError is a call that did not get an answer the edge can use: the control plane is down
// or overloaded, the network failed, or the edge token is refused. The edge then serves what it last
// confirmed, for --max-stale.
type unreachableError struct {
	reason string
	status int // HTTP status when one came back
}

func (e *unreachableError) Error() string {
	if e.tokenRefused() {
		return e.reason
	}
	if e.status != 0 {
		// It answered: say what it answered, not that it could not be reached.
		return "control plane answered " + e.reason
	}
	return "control plane unreachable: " + e.reason
}

// tokenRefused reports whether the control plane refused the edge token (revoked, or wrong).
func (e *unreachableError) tokenRefused() bool {
	return e.status == http.StatusUnauthorized || e.status == http.StatusForbidden
}

func isUnreachable(err error) bool {
	var ue *unreachableError
	return errors.As(err, &ue)
}

// transportError describes a failed round trip without the request (whose URL is harmless, but whose
// wrapping by net/http differs by Go version).
func transportError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return &unreachableError{reason: "no answer in time"}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &unreachableError{reason: "no answer in time"}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return &unreachableError{reason: err.Error()}
}

// statusError turns an unusable answer into an unreachableError naming the status and, when the
// body is the API's envelope, its code and message (which never carry the token).
func statusError(resp *http.Response) error {
	var env struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	reason := resp.Status
	if json.Unmarshal(b, &env) == nil && env.Error.Code != "" {
		reason += ": " + env.Error.Code + ": " + env.Error.Message
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		reason = "the control plane refuses the edge token (" + reason + ")"
	}
	return &unreachableError{reason: reason, status: resp.StatusCode}
}

func (c *Client) newRequest(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("User-Agent", "svc-edge")
	return req, nil
}

// snapshot is a snapshot as the cache keeps it; d is nil for a slug that serves nothing. raw is the
// answer it was read from, kept so that the cache can write it to disk as it came (snapfile.go).
type snapshot struct {
	changeID int64
	d        *edgemodel.EdgeDeployment
	keys     []edgemodel.EdgeSnapshotKey
	raw      []byte
	// disabled: d is a disabled endpoint's, answered 404 with the call counted in its usage.
	disabled bool
}

// serves reports whether the snapshot has a deployment to serve (not disabled; expiry aside).
func (s *snapshot) serves() bool { return s.d != nil && !s.disabled }

// Snapshot fetches the snapshot of slug. A slug that serves nothing is a snapshot without a
// deployment; anything but a usable answer is an unreachableError.
func (c *Client) Snapshot(ctx context.Context, slug string) (*snapshot, error) {
	req, err := c.newRequest(ctx, http.MethodGet, edgewire.DeploymentsPath+url.PathEscape(slug), nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, transportError(ctx, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		id, err := strconv.ParseInt(resp.Header.Get(edgewire.ChangeIDHeader), 10, 64)
		if err != nil {
			// A 404 without the header is not the internal API's (a proxy, an older server): not an answer.
			return nil, &unreachableError{reason: "404 without " + edgewire.ChangeIDHeader + " (is the URL the control plane's base URL?)", status: 404}
		}
		return disabledSnapshot(id, resp.Body), nil
	default:
		return nil, statusError(resp)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, transportError(ctx, err)
	}
	return decodeSnapshot(raw)
}

// disabledSnapshot reads the 404 of a slug that serves nothing: a snapshot without a deployment, or,
// for a disabled endpoint (edgewire.Disabled), its deployment and keys marked disabled. A body it
// cannot read is the first: the endpoint is answered 404 either way, only its usage misses the call.
func disabledSnapshot(changeID int64, body io.Reader) *snapshot {
	raw, err := io.ReadAll(io.LimitReader(body, 1<<20))
	var in edgewire.Disabled
	if err != nil || json.Unmarshal(raw, &in) != nil || in.Disabled.ID == "" {
		return &snapshot{changeID: changeID}
	}
	s, err := snapshotOf(edgewire.Snapshot{ChangeID: changeID, Deployment: in.Disabled})
	if err != nil {
		return &snapshot{changeID: changeID}
	}
	s.disabled = true
	return s
}

// decodeSnapshot reads a snapshot answer.
func decodeSnapshot(raw []byte) (*snapshot, error) {
	var in edgewire.Snapshot
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, &unreachableError{reason: "unreadable snapshot: " + err.Error()}
	}
	s, err := snapshotOf(in)
	if err != nil {
		return nil, err
	}
	s.raw = raw
	return s, nil
}

// snapshotOf rebuilds the deployment the edge handler serves from its wire form.
func snapshotOf(in edgewire.Snapshot) (*snapshot, error) {
	w := in.Deployment
	d := &edgemodel.EdgeDeployment{
		ID: w.ID, Slug: w.Slug, ProjectID: w.ProjectID,
		Target:    edgemodel.Target{Kind: w.Target.Kind, JobID: w.Target.JobID, Step: w.Target.Step, Model: w.Target.Model},
		BaseModel: w.BaseModel, Adapter: w.Adapter, AdapterName: w.AdapterName, AuthMode: w.AuthMode,
		Retention: edgemodel.Retention{Mode: w.RunRetentionMode, Days: w.RunRetentionDays}, CreatedAt: w.CreatedAt,
		Limits: limitsOf(w.Limits), Budget: budgetOf(w.Budget), QueueTimeout: time.Duration(w.QueueTimeoutMs) * time.Millisecond,
	}
	if w.ExpiresAt != nil {
		d.SetExpiresAt(*w.ExpiresAt)
	}
	if c := w.Canary; c != nil {
		arm := *d
		arm.Target = edgemodel.Target{Kind: c.Target.Kind, JobID: c.Target.JobID, Step: c.Target.Step, Model: c.Target.Model}
		arm.BaseModel, arm.Adapter, arm.AdapterName = c.BaseModel, c.Adapter, c.AdapterName
		d.Canary = &edgemodel.EdgeCanary{ID: c.ID, Percent: c.Percent, Mode: c.Mode, Deployment: &arm}
	}
	s := &snapshot{changeID: in.ChangeID, d: d, keys: make([]edgemodel.EdgeSnapshotKey, 0, len(w.Keys))}
	for _, k := range w.Keys {
		b, err := hex.DecodeString(k.Hash)
		if err != nil || len(b) != 32 {
			return nil, &unreachableError{reason: "unreadable snapshot: a key hash is not hex SHA-256"}
		}
		sk := edgemodel.EdgeSnapshotKey{ID: k.ID, Limits: limitsOf(k.Limits), Budget: budgetOf(k.Budget), Weight: k.Weight}
		copy(sk.Hash[:], b)
		s.keys = append(s.keys, sk)
	}
	return s, nil
}

func budgetOf(b *edgewire.Budget) *edgemodel.Budget {
	if b == nil {
		return nil
	}
	return &edgemodel.Budget{Tokens: b.Tokens, Period: b.Period}
}

func limitsOf(l edgewire.Limits) edgemodel.RateLimits {
	return edgemodel.RateLimits{RequestsPerMinute: l.RequestsPerMinute, TokensPerMinute: l.TokensPerMinute}
}

// PostRunBatch sends one batch (in lines, batch.go), gzipped: in lines to a control plane whose hello
// announced them, in the first form to any other. It returns nil once the control plane has applied it
// (now or before); a permanentError when it never will (the batch is refused as malformed or too
// large); an unreachableError otherwise, and the batch is to be sent again.
func (c *Client) PostRunBatch(ctx context.Context, batch []byte) (*edgewire.RunBatchResult, error) {
	if c.lines.Load() {
		res, err := c.postRunBatch(ctx, batch, edgewire.ContentTypeRuns)
		var pe *permanentError
		if !errors.As(err, &pe) || pe.status != http.StatusBadRequest {
			return res, err
		}
		// Refused as malformed: the control plane that announced lines may have been replaced by an
		// older one since (a rollback, a replica of another version behind the same URL). The first
		// form tells; it stays in use until a hello announces lines again.
		c.lines.Store(false)
	}
	v1, err := batchV1(batch)
	if err != nil {
		return nil, &permanentError{reason: "convert the batch to the first form: " + err.Error()}
	}
	return c.postRunBatch(ctx, v1, "application/json")
}

// readsLines notes which run batch forms the control plane announced in its hello.
func (c *Client) readsLines(forms []string) {
	c.lines.Store(slices.Contains(forms, edgewire.RunFormLines))
}

func (c *Client) postRunBatch(ctx context.Context, batch []byte, contentType string) (*edgewire.RunBatchResult, error) {
	var buf bytes.Buffer
	zw := gzipWriters.Get().(*gzip.Writer)
	zw.Reset(&buf)
	zw.Write(batch)
	err := zw.Close()
	gzipWriters.Put(zw)
	if err != nil {
		return nil, &permanentError{reason: "compress the batch: " + err.Error()}
	}
	req, err := c.newRequest(ctx, http.MethodPost, edgewire.RunsPath, bytes.NewReader(buf.Bytes()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Content-Encoding", "gzip")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, transportError(ctx, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
		var out edgewire.RunBatchResult
		_ = json.NewDecoder(io.LimitReader(resp.Body, 4<<10)).Decode(&out)
		return &out, nil
	case resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusRequestEntityTooLarge:
		err := statusError(resp).(*unreachableError)
		return nil, &permanentError{reason: err.reason, status: resp.StatusCode}
	default:
		return nil, statusError(resp)
	}
}

// gzipWriters keeps the batches' compressors (klauspost/compress: plain gzip on the wire, at half the
// CPU of compress/gzip's fastest level; a writer's state is some 100 KiB, so it is reused).
var gzipWriters = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return zw
}}

// permanentError is a batch the control plane will never take: sending it again would not help.
type permanentError struct {
	reason string
	status int // the control plane's answer (400, 413); 0 when the edge gave up by itself
}

func (e *permanentError) Error() string { return "run batch refused: " + e.reason }

// openFeed opens the change feed after position after (-1: no position yet).
func (c *Client) openFeed(ctx context.Context, after int64) (*http.Response, error) {
	path := edgewire.ChangesPath
	if after >= 0 {
		path += "?after=" + strconv.FormatInt(after, 10)
	}
	req, err := c.newRequest(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, transportError(ctx, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, statusError(resp)
	}
	return resp, nil
}
