package edgesync

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"
	"github.com/svcdev/svc/internal/edgewire"
)

// An svc edge process answers the Responses API's previous_response_id and GET /v1/responses/{id}
// as the control plane does: from the deployment's stored runs, which it reads from the control plane
// (GET runs/{deploymentId}/{runId} of the internal API; docs/API.md, "Responses API"). The edge
// handler keeps the responses it answered lately in front of this, since runs are shipped in batches
// after the answer.

// DefaultRunTimeout bounds one read of a stored run (Options.RunTimeout).
const DefaultRunTimeout = 5 * time.Second

// errRunNotFound is a run the control plane does not hold: never stored (retention none), deleted,
// expired, or not yet shipped by the edge that answered it.
var errRunNotFound = &edgemodel.Error{Code: edgemodel.CodeNotFound, Message: "run not found"}

// runsUnavailable is a stored run that cannot be read now: the control plane is unreachable (or refuses
// the edge token). The edge answers 503 with Retry-After.
func runsUnavailable(err error) error {
	return &edgemodel.Error{Code: edgemodel.CodeUnavailable, RetryAfter: 5 * time.Second,
		Message: "the stored run cannot be read: " + err.Error()}
}

// EdgeRun returns the request and response of one stored run of a deployment, named by its run id or
// an id its caller got (core.Service.EdgeRun), read from the control plane (the edge handler's
// RunReader), within RunTimeout: a core not_found error when the control plane
// holds no such run, a core unavailable error when it cannot be asked. Right after a failed contact
// (RetryDown) it does not try.
func (c *Cache) EdgeRun(ctx context.Context, deploymentID, id string) (request, response []byte, err error) {
	c.mu.Lock()
	down, downErr := c.o.Now().Before(c.downUntil), c.downErr
	c.mu.Unlock()
	if down {
		return nil, nil, runsUnavailable(downErr)
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.RunTimeout)
	defer cancel()
	request, response, err = c.client.StoredRun(ctx, deploymentID, id)
	if err != nil && isUnreachable(err) {
		return nil, nil, runsUnavailable(err)
	}
	return request, response, err
}

// StoredRun fetches one stored run. A 404 that says the run is not there is errRunNotFound; anything
// else but a usable answer is an unreachableError (a 404 without Svc-Not-Found comes from something
// that is not this route: a control plane older than the edge, a proxy).
func (c *Client) StoredRun(ctx context.Context, deploymentID, runID string) (request, response []byte, err error) {
	req, err := c.newRequest(ctx, http.MethodGet, edgewire.StoredRunsPath+url.PathEscape(deploymentID)+"/"+url.PathEscape(runID), nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, nil, transportError(ctx, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode == http.StatusNotFound && resp.Header.Get(edgewire.NotFoundHeader) == "run":
		return nil, nil, errRunNotFound
	default:
		return nil, nil, statusError(resp)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, edgewire.MaxStoredRunBytes+1))
	if err != nil {
		return nil, nil, transportError(ctx, err)
	}
	if len(raw) > edgewire.MaxStoredRunBytes {
		return nil, nil, &unreachableError{reason: "the stored run is larger than the edge reads"}
	}
	var sr edgewire.StoredRun
	if err := json.Unmarshal(raw, &sr); err != nil {
		return nil, nil, &unreachableError{reason: "unreadable stored run: " + err.Error()}
	}
	return []byte(sr.Request), []byte(sr.Response), nil
}
