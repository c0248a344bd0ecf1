package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/svcdev/svc/internal/conv"
	"github.com/svcdev/svc/internal/edgemodel"
	"github.com/svcdev/svc/internal/inference"
	"github.com/svcdev/svc/internal/jsonx"
	"github.com/svcdev/svc/internal/runs"
	"github.com/svcdev/svc/internal/translate"
)

// The OpenAI Responses API (POST /v1/responses, GET /v1/responses/{id}): passed through to upstreams
// that serve it (supportsResponses), else translated to chat completions and back by package
// translate (docs/API.md, "Responses API"). A translated response's id is its run's id, so that
// previous_response_id and GET /v1/responses/{id} read the deployment's stored runs.

// RunReader is implemented by services that read a deployment's stored runs: core's on the control
// plane, and an svc edge process's cache (edgesync.Cache), which reads them from its control plane and
// fails with a core unavailable error when it cannot (answered 503, as an unreachable control plane
// is everywhere on the edge).
type RunReader interface {
	EdgeRun(ctx context.Context, deploymentID, id string) (request, response []byte, err error)
}

// maxPrevious bounds the chain of previous responses a request may continue.
const maxPrevious = 100

// recentResponses keeps the latest translated responses of this process (at most 1024, and 64 MiB) (request and response, as
// their runs record them), because runs are written in batches, after the answer (and an svc edge
// ships them later still): a client that continues a response at once (previous_response_id) must
// find it before its run is written. It is read before the stored runs.
type recentResponses struct {
	mu    sync.Mutex
	byKey map[string]translate.Turn
	order []string // oldest first
	bytes int      // of the requests and responses kept
}

// maxRecent and maxRecentBytes bound the responses kept, in number and in size.
const (
	maxRecent      = 1024
	maxRecentBytes = 64 << 20
)

func (c *recentResponses) put(deploymentID, runID string, request, response []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byKey == nil {
		c.byKey = map[string]translate.Turn{}
	}
	key := deploymentID + "/" + runID
	if old, ok := c.byKey[key]; ok {
		c.bytes -= len(old.Request) + len(old.Response)
	} else {
		c.order = append(c.order, key)
	}
	c.byKey[key] = translate.Turn{Request: request, Response: response}
	c.bytes += len(request) + len(response)
	for len(c.order) > 0 && (len(c.order) > maxRecent || c.bytes > maxRecentBytes) {
		old := c.byKey[c.order[0]]
		c.bytes -= len(old.Request) + len(old.Response)
		delete(c.byKey, c.order[0])
		c.order = c.order[1:]
	}
}

func (c *recentResponses) get(deploymentID, runID string) (translate.Turn, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.byKey[deploymentID+"/"+runID]
	return t, ok
}

// keep remembers a translated response that its run records; response is called only then.
func (x *exchange) keep(response func() []byte) {
	if x.recording() {
		x.h.recent.put(x.d.ID, x.runID, x.reqBody, response())
	}
}

// responseID is the response id of a run id, and runIDOf the reverse.
func responseID(runID string) string { return runs.ResponseID(runID) }

func runIDOf(responseID string) string { return "run_" + strings.TrimPrefix(responseID, "resp_") }

func (h *Handler) responses(x *exchange) {
	fields, depth, t, ok := h.readModelBody(x, false)
	if !ok {
		return
	}
	body := x.reqBody
	if p, ok := t.rt.(inference.Passthrough); ok && p.Passes(inference.SurfaceResponses) {
		stream := string(fields["stream"]) == "true"
		call := t.call(&inference.Call{Body: fields, Stream: stream}, x)
		if stream {
			st, err := p.PassStream(x.r.Context(), inference.SurfaceResponses, call, x.r.Header)
			x.relay(inference.SurfaceResponses, t, call, st, err)
			return
		}
		comp, err := p.PassComplete(x.r.Context(), inference.SurfaceResponses, call, x.r.Header)
		if comp != nil {
			x.upstream.response = comp.ID
		}
		x.complete(call, comp, err)
		return
	}
	previous := translate.PreviousResponseIDOf(fields)
	if previous != "" {
		turns, e := x.canary.chain, (*apiError)(nil)
		if x.canary.chainOf != previous {
			turns, e = h.previous(x, previous)
		}
		if e != nil {
			x.fail(e)
			return
		}
		var terr *translate.Error
		if body, terr = translate.WithPrevious(body, turns); terr != nil {
			x.fail(badRequest(terr.Param, terr.Message))
			return
		}
	}
	// With previous turns, body is one svc made of the request and the stored runs: checked again.
	checked := fields
	if previous != "" {
		checked, depth = nil, 0
	}
	chat, info, terr := translate.ResponsesToChat(body, h.translation(t, checked, depth))
	if terr != nil && terr.References {
		// The input holds item references: the items are read from their runs and put in place, and
		// the request so made is translated (and checked) again.
		if refs := translate.ItemReferences(body); len(refs) > 0 {
			found, e := h.referencedItems(x, len(body), refs)
			if e != nil {
				x.fail(e)
				return
			}
			if body, terr = translate.WithItems(body, found); terr == nil {
				chat, info, terr = translate.ResponsesToChat(body, h.translation(t, nil, 0))
			}
		}
	}
	if terr != nil {
		x.fail(badRequest(terr.Param, terr.Message))
		return
	}
	call, e := translatedCall(chat)
	if e != nil {
		x.fail(badRequest(e.param, e.message))
		return
	}
	t.call(call, x)
	x.answerID(call)
	x.ignored(info.Ignored, false)
	id := responseID(x.runID)
	if call.Stream {
		h.responsesStream(x, t, call, info, id)
		return
	}
	out := x.completeTranslated(t, call, "Responses", func(comp *inference.Completion) ([]byte, error) {
		out, _, err := translate.ChatToResponse(comp.JSON, id, t.served, x.start.Unix(), info)
		return out, err
	})
	if out != nil {
		x.keep(func() []byte { return out })
	}
}

// responsesStream translates a chat completion stream into Responses API events as it arrives. An
// error after the start is a response.failed event.
func (h *Handler) responsesStream(x *exchange, t *target, call *inference.Call, info *translate.ResponsesInfo, id string) {
	tr := translate.NewResponsesStream(id, t.served, x.start.Unix(), info, inference.PromptTokensOf(t.rt, call, info.InputTokensEstimate()))
	fail := func(write func([]translate.Event, bool), e *apiError) {
		code := "server_error"
		if e.status == http.StatusTooManyRequests {
			code = "rate_limit_exceeded"
		}
		write(tr.Fail(code, e.message), false)
	}
	x.translateStream(t, call, "Responses", tr, translatedResponse{tr}, fail, func() {
		tr.Release() // the last events have been written
		x.keep(tr.Response)
	})
}

// translatedResponse is the run's answer of a translated Responses stream: the response object as the
// stream left it (completed, incomplete, or failed with its error).
type translatedResponse struct{ tr *translate.ResponsesStream }

func (translatedResponse) Add(*inference.Chunk) {}

func (a translatedResponse) JSON(_ inference.Usage, _ []byte) []byte { return a.tr.Response() }

// responseIDForm tells whether id has the form of a response id svc makes: resp_ and the run id's tail,
// letters and digits (64 at most, more than any svc makes).
func responseIDForm(id string) bool {
	tail, ok := strings.CutPrefix(id, "resp_")
	if !ok || tail == "" || len(tail) > 64 {
		return false
	}
	for _, c := range []byte(tail) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// shownID is an id as an error message repeats it: cut after 80 bytes, so that a 64 KiB id is not
// echoed whole.
func shownID(id string) string {
	if len(id) > 80 {
		return id[:80] + "…"
	}
	return id
}

// notKept is the answer to a previous_response_id or a GET of a response svc cannot read.
func notKept(id, why string) *apiError {
	id = shownID(id)
	e := &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "previous_response_not_found", param: "previous_response_id",
		message: fmt.Sprintf("Previous response with id '%s' not found: %s", id, why)}
	return e
}

// storedUnavailable answers a response that cannot be read now: an svc edge process's control plane,
// where runs are stored, cannot be reached. 503, as an unreachable control plane is everywhere on the
// edge (502 is an inference upstream's failure), with Retry-After.
func storedUnavailable(id string, cause error) *apiError {
	e := unavailable(cause)
	e.message = fmt.Sprintf("the response with id '%s' cannot be read right now: this edge cannot reach the control plane that stores responses; try again shortly", id)
	return e
}

// stored reads the request and response of a translated response of the exchange's deployment: from
// the responses this process answered lately, else from the stored runs.
func (h *Handler) stored(x *exchange, id string) (request, response []byte, why string, err error) {
	if !responseIDForm(id) {
		// Judged here, before any store is asked: an svc edge process would otherwise put the id in its
		// control plane's URL and answer a malformed one 503, which SDKs retry.
		return nil, nil, "no response of this endpoint has this id (a response id is resp_ and up to 64 letters and digits)", nil
	}
	if !x.d.Retention.Records() {
		return nil, nil, "this endpoint keeps no runs (its retention is none), so no response is stored; send the whole conversation as input", nil
	}
	// The id is svc's (its run's id), or the upstream's of a passed-through answer, which this process
	// remembers lately (passedResponses) and the store finds by its run's upstreamResponseId.
	runID, asked := runIDOf(id), id
	if r, ok := h.passed.get(x.d.ID, id); ok {
		runID, asked = r, r
	}
	if t, ok := h.recent.get(x.d.ID, runID); ok {
		return t.Request, t.Response, "", nil
	}
	req, resp, err := h.svc.EdgeRun(x.r.Context(), x.d.ID, asked)
	if err != nil {
		if edgemodel.CodeOf(err) == edgemodel.CodeNotFound {
			return nil, nil, "no response of this endpoint has this id, or it expired with the endpoint's retention", nil
		}
		return nil, nil, "", err
	}
	return req, resp, "", nil
}

// storedError answers a failed read of a stored response.
func storedError(id string, err error) *apiError {
	if edgemodel.CodeOf(err) == edgemodel.CodeUnavailable {
		return storedUnavailable(id, err)
	}
	return internalError(err)
}

// previous loads the stored responses that a request continues: the one it names, and the ones that
// one continued, oldest first.
func (h *Handler) previous(x *exchange, id string) ([]translate.Turn, *apiError) {
	var turns []translate.Turn
	size := len(x.reqBody)
	for next := id; next != ""; {
		if len(turns) == maxPrevious {
			return nil, badRequest("previous_response_id", fmt.Sprintf("the conversation continues more than %d responses; send it as input", maxPrevious))
		}
		req, resp, why, err := h.stored(x, next)
		if err != nil {
			return nil, storedError(next, err)
		}
		if why != "" {
			return nil, notKept(next, why)
		}
		turn := translate.Turn{Request: req, Response: resp}
		// The conversation assembled is bounded as a request body is (docs/OPERATIONS.md, "Bounds"): the
		// chain is read no further once it is past it.
		if size += translate.TurnBytes(turn); size > conv.MaxBytes {
			return nil, conversationTooLong("previous_response_id")
		}
		turns = append(turns, turn)
		next = translate.PreviousResponseID(req)
	}
	for i, j := 0, len(turns)-1; i < j; i, j = i+1, j-1 {
		turns[i], turns[j] = turns[j], turns[i]
	}
	return turns, nil
}

// conversationTooLong is the 400 of a request whose assembled conversation is past conv.MaxBytes.
func conversationTooLong(param string) *apiError {
	terr := translate.ConversationTooLong(param, conv.MaxBytes)
	e := badRequest(terr.Param, terr.Message)
	e.code = "conversation_too_long"
	return e
}

// referencedItems reads the items that a request's item references name, from the responses that hold
// them (each read once). An item svc cannot read (an id it did not make, a response not kept or
// expired, an item the response does not hold) is a 400 naming it, in OpenAI's words. size is the
// request's as assembled so far; past conv.MaxBytes with the items, the request is refused.
func (h *Handler) referencedItems(x *exchange, size int, refs []translate.ItemReference) (map[string]json.RawMessage, *apiError) {
	found := make(map[string]json.RawMessage, len(refs))
	responses := map[string][]byte{}
	for _, ref := range refs {
		if _, ok := found[ref.ID]; ok {
			continue
		}
		var item json.RawMessage
		if ref.ResponseID != "" {
			resp, ok := responses[ref.ResponseID]
			if !ok {
				_, r, why, err := h.stored(x, ref.ResponseID)
				if err != nil {
					return nil, storedError(ref.ResponseID, err)
				}
				if why == "" {
					resp = r
				}
				responses[ref.ResponseID] = resp
			}
			if resp != nil {
				item = translate.OutputItem(resp, ref.ID)
			}
		}
		if item == nil {
			terr := translate.ItemNotFound(ref.Path, ref.ID)
			return nil, badRequest(terr.Param, terr.Message)
		}
		if size += len(item); size > conv.MaxBytes {
			return nil, conversationTooLong(ref.Path)
		}
		found[ref.ID] = item
	}
	return found, nil
}

// responsesInputTokens answers POST /v1/responses/input_tokens as count_tokens answers the Messages API
// (countPrompt).
func (h *Handler) responsesInputTokens(x *exchange) {
	h.countPrompt(x, inference.SurfaceResponsesInputTokens, translate.ResponsesCountTokens, `{"object":"response.input_tokens","input_tokens":`)
}

// storedResponse answers GET /v1/responses/{id}: a translated response as it was answered.
func (h *Handler) storedResponse(x *exchange) {
	id := strings.TrimPrefix(x.r.URL.Path, "/v1/responses/")
	_, resp, why, err := h.stored(x, id)
	if err != nil {
		x.fail(storedError(id, err))
		return
	}
	if why == "" && jsonx.String(jsonx.Field(resp, "object")) != "response" {
		why = "the call with this id was not a response"
	}
	if why != "" {
		x.fail(notFound("not_found", fmt.Sprintf("Response with id '%s' not found: %s", shownID(id), why)))
		return
	}
	writeJSON(x.w, http.StatusOK, resp)
	x.ok(nil)
}
