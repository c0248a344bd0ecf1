package edge

import (
	"bytes"
	"context"
	"fmt"
	"net/http"

	"github.com/svcdev/svc/internal/admission"
	"github.com/svcdev/svc/internal/edgemodel"
	"github.com/svcdev/svc/internal/reqid"
)

// Replay evals (docs/API.md, "Evals"): the control plane's eval workers send each stored run's request
// again, through the same path a shadow copy takes: the chat route serves it as a caller's call, into a
// buffer nobody else reads, its model's turn taken in admission's eval lane (behind callers and shadow
// copies), its run recorded with the arm "eval", the eval and the run it replays, counted as the
// deployment's copies (runs.CopiesKey), never a key's usage. A replay let into the callers' reserve
// while no caller was about gives its place back when a caller finds none (admission.Loan): it is cut,
// not recorded, and answered with status 0, which the worker sends again.

// replayRoute is the route replays are served on: every stored run is read into chat form.
const replayRoute = "/v1/chat/completions"

// Replay serves a replay of a stored run: body is a chat completions request, d the deployment as the
// candidate target serves it, runID the id its run takes (the worker chooses it, so that a replay
// recorded by a replica that died before it said so is found again). It returns the status and the
// answer as a caller would have got them, or status 0 and no answer when the replay gave its place to a
// caller before it was answered (nothing recorded: send it again).
func (h *Handler) Replay(ctx context.Context, d *edgemodel.EdgeDeployment, body []byte, evalID, evalOf, runID string) (int, []byte) {
	rt := routes[replayRoute]
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	r, err := http.NewRequestWithContext(callCtx, http.MethodPost, replayRoute, bytes.NewReader(body))
	if err != nil {
		return http.StatusInternalServerError, nil
	}
	r.Header.Set("Content-Type", "application/json")
	w := &bufferWriter{header: http.Header{}, status: http.StatusOK}
	x := &exchange{h: h, w: w, r: r, f: rt.format, route: replayRoute, start: h.now(), id: reqid.From(""),
		slug: d.Slug, d: d, run: true, queued: rt.queued, runID: runID, eval: evalRef{id: evalID, of: evalOf},
		canary: armChoice{arm: edgemodel.ArmEval, target: d.Served()}}
	x.turn.loan = admission.NewLoan(cancel)
	yielded := false
	func() {
		defer func() {
			if p := recover(); p != nil {
				x.fail(internalError(fmt.Errorf("eval replay panicked: %v", p)))
			}
			if ctx.Err() != nil && (!x.out.finished || x.out.failed) {
				// Cut by the worker's stop (a server shutting down): not recorded, as a shadow copy the
				// shutdown cut is not, so that the replica that takes the item over records the replay.
				x.release()
				return
			}
			if x.turn.loan.Yielded() && (!x.out.finished || x.out.failed) {
				// Gave its place to a caller: not recorded either, sent again by the worker.
				x.release()
				yielded = true
				return
			}
			x.end()
		}()
		rt.serve(h, x)
	}()
	if yielded {
		return 0, nil
	}
	return w.status, w.body.Bytes()
}

// bufferWriter keeps a replay's answer for the eval worker.
type bufferWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *bufferWriter) Header() http.Header         { return w.header }
func (w *bufferWriter) Write(b []byte) (int, error) { return w.body.Write(b) }
func (w *bufferWriter) WriteHeader(status int)      { w.status = status }
func (w *bufferWriter) Flush()                      {}
