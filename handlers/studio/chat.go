package studio

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/views"
)

// chatRequest is the playground's question. APIKey is sent to the edge for this one request and
// then forgotten: it is never logged, stored or echoed back.
type chatRequest struct {
	DeploymentID string `json:"deploymentId"`
	Message      string `json:"message"`
	APIKey       string `json:"apiKey"`
}

// chatReply is the JSON answer of the playground route.
type chatReply struct {
	Model string `json:"model"`
	Reply string `json:"reply"`
}

// maxChatAnswer bounds what is read from the edge.
const maxChatAnswer = 1 << 20

// chat is POST /api/inference/chat: the studio server, not the browser, calls the deployment's edge
// (the path form under localhost, docs/ARCHITECTURE.md, "Processes"), so the page works whatever the
// browser resolves.
func (s *Server) chat(c echo.Context) error {
	var in chatRequest
	if sentJSON(c) {
		if err := decodeJSON(c, &in); err != nil {
			return err
		}
	} else {
		in = chatRequest{DeploymentID: formValue(c, "deploymentId"), Message: formValue(c, "message"), APIKey: formValue(c, "apiKey")}
	}
	in.APIKey = strings.TrimSpace(in.APIKey)
	if in.DeploymentID == "" {
		return badRequest("invalid_request", "deploymentId is required.")
	}
	if strings.TrimSpace(in.Message) == "" {
		return badRequest("invalid_request", "Type a message to send.")
	}

	reply, err := s.askEdge(c, in)
	if err != nil {
		if isHTMX(c) {
			// The answer area shows the error, next to the question, instead of the flash.
			e := s.toAPIError(err)
			return renderHTML(c, e.Status, views.ErrorAlert(e.problem()))
		}
		return err
	}
	return render(c, http.StatusOK, views.ChatAnswer(views.ChatReply{Model: reply.Model, Reply: reply.Reply}), reply)
}

func (s *Server) askEdge(c echo.Context, in chatRequest) (*chatReply, error) {
	ctx := c.Request().Context()
	cl, err := s.projectClient(ctx)
	if err != nil {
		return nil, err
	}
	d, err := cl.GetDeployment(ctx, in.DeploymentID)
	if err != nil {
		return nil, err
	}
	body, _ := json.Marshal(map[string]any{
		"model":    sampleModel(*d),
		"messages": []map[string]string{{"role": "user", "content": in.Message}},
	})
	target := views.EdgeBaseURL(s.apiBaseURL, d.URL, d.Slug) + "/chat/completions"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if in.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+in.APIKey)
	}
	resp, err := s.http.Do(req)
	if err != nil {
		// The error names the URL only; the key is in a header, which errors never print.
		return nil, &apiError{Status: http.StatusBadGateway, Code: "edge_unreachable",
			Message: "Could not reach the endpoint at " + target + ".", Cause: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxChatAnswer))
	if err != nil {
		return nil, &apiError{Status: http.StatusBadGateway, Code: "edge_unreachable", Message: "The endpoint's answer was cut off.", Cause: err}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, edgeError(resp.StatusCode, raw)
	}
	var completion struct {
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(raw, &completion); err != nil || len(completion.Choices) == 0 {
		return nil, &apiError{Status: http.StatusBadGateway, Code: "edge_answer",
			Message: "The endpoint answered with something that is not a chat completion.", Cause: errors.Join(err, fmt.Errorf("%d bytes", len(raw)))}
	}
	return &chatReply{Model: completion.Model, Reply: completion.Choices[0].Message.Content}, nil
}

// edgeError keeps the edge's status and its OpenAI-shaped message, in the studio's envelope.
func edgeError(status int, raw []byte) *apiError {
	var env struct {
		Error struct {
			Message string `json:"message"`
			Code    any    `json:"code"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	e := &apiError{Status: status, Code: "edge_error", Message: fmt.Sprintf("The endpoint answered HTTP %d.", status)}
	if json.Unmarshal(raw, &env) == nil && env.Error.Message != "" {
		e.Message = env.Error.Message
		if code, ok := env.Error.Code.(string); ok && code != "" {
			e.Code = code
		} else if env.Error.Type != "" {
			e.Code = env.Error.Type
		}
	}
	return e
}
