package edgesync

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/svcdev/svc/internal/edgemodel"
	"github.com/svcdev/svc/internal/edgewire"
)

// An svc edge process stores feedback (POST /v1/feedback) as it reads stored runs: it asks its control
// plane (POST feedback of the internal API), which applies core's rule; the app gets the control
// plane's answer, or 503 when it cannot be asked.

// errFeedbackNotFound is a run the control plane will not let the deployment score.
var errFeedbackNotFound = &edgemodel.Error{Code: edgemodel.CodeNotFound, Message: "run not found"}

// EdgeFeedback sends feedback on a run of a deployment to the control plane (the edge handler's
// FeedbackWriter), within RunTimeout.
func (c *Cache) EdgeFeedback(ctx context.Context, deploymentID, id string, score int, comment string) error {
	c.mu.Lock()
	down, downErr := c.o.Now().Before(c.downUntil), c.downErr
	c.mu.Unlock()
	if down {
		return runsUnavailable(downErr)
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.RunTimeout)
	defer cancel()
	err := c.client.Feedback(ctx, edgewire.Feedback{DeploymentID: deploymentID, ID: id, Score: score, Comment: comment})
	if err != nil && isUnreachable(err) {
		return runsUnavailable(err)
	}
	return err
}

// Feedback posts one feedback. 204 is nil; a 404 saying the run is not there is errFeedbackNotFound; a
// 400 is the control plane's invalid_request, its message kept; anything else an unreachableError.
func (c *Client) Feedback(ctx context.Context, f edgewire.Feedback) error {
	body, err := json.Marshal(f)
	if err != nil {
		return err
	}
	req, err := c.newRequest(ctx, http.MethodPost, edgewire.FeedbackPath, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return transportError(ctx, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusOK:
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return nil
	case resp.StatusCode == http.StatusNotFound && resp.Header.Get(edgewire.NotFoundHeader) == "run":
		return errFeedbackNotFound
	case resp.StatusCode == http.StatusBadRequest:
		var env struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		if json.Unmarshal(b, &env) == nil && env.Error.Message != "" {
			return &edgemodel.Error{Code: edgemodel.CodeInvalidRequest, Message: env.Error.Message}
		}
	}
	return statusError(resp)
}
