package core

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/internal/conv"
	"github.com/svcdev/svc/internal/dataset"
	"github.com/svcdev/svc/internal/edgemodel"
	"github.com/svcdev/svc/internal/evalscore"
)

// The eval workers (docs/ARCHITECTURE.md, "A replay"): every svc server runs one (EvalWorker.Run).
// Work items live in the store, so that every replica sharing it takes work: a worker claims items
// with a lease (EvalItemClaim checks the item's state again on the row it updates, so two workers
// never hold one), renews the leases of those under way, and writes each one's result only while it
// holds it; a replica that dies leaves its items to be claimed again when their leases end. An item's
// eval run has an id made of the eval and the source run (evalRunID): a replay the dead replica
// recorded is read back rather than made again, so each run is replayed once.

// Replayer sends a replay's chat request to the deployment as d serves it, through the edge's path in
// the admission eval lane, recording its run (handlers/edge Handler.Replay). Status ReplayYielded: the
// replay gave its place to a caller before it was answered and nothing was recorded (EvalWorker.send
// sends it again).
type Replayer interface {
	Replay(ctx context.Context, d *edgemodel.EdgeDeployment, body []byte, evalID, evalOf, runID string) (status int, answer []byte)
}

// Eval worker timings: how often open evals are looked for (an eval created in this process wakes
// its worker at once; one created on another replica is found by this poll, or a killed replica's
// items once their lease ends), how long a claim holds, and the longest a replay may take.
const (
	evalPoll          = 2 * time.Second
	evalClaimEvery    = 100 * time.Millisecond // a runner's look for items to claim while its eval is open
	DefaultEvalLease  = 30 * time.Second
	evalReplayTimeout = 5 * time.Minute
)

// EvalWorker replays the items of open evals.
type EvalWorker struct {
	S        *Service
	Replayer Replayer
	// ID names this worker in its claims (unique per process).
	ID string
	// Lease is how long a claim holds without renewal (DefaultEvalLease when 0).
	Lease time.Duration

	mu      sync.Mutex
	running map[string]bool // evals this worker has a runner for
}

// Run works until ctx ends; the runners it started finish their replays under way first.
func (w *EvalWorker) Run(ctx context.Context) {
	if w.Lease <= 0 {
		w.Lease = DefaultEvalLease
	}
	w.running = map[string]bool{}
	var wg sync.WaitGroup
	t := time.NewTicker(evalPoll)
	defer t.Stop()
	for {
		ids, err := w.S.q.EvalOpenIDs(ctx, w.S.db, 16)
		if err != nil && ctx.Err() == nil {
			w.S.log.Warn("evals: cannot read the open evals", "err", err)
		}
		for _, id := range ids {
			w.mu.Lock()
			busy := w.running[id]
			w.running[id] = true
			w.mu.Unlock()
			if busy {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				w.runEval(ctx, id)
				w.mu.Lock()
				delete(w.running, id)
				w.mu.Unlock()
			}()
		}
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-t.C:
		case <-w.S.evalCreated:
		}
	}
}

// evalJob is what a runner reads once of its eval.
type evalJob struct {
	row       dbsqlc.Eval
	candidate *edgemodel.EdgeDeployment
	judge     *edgemodel.EdgeDeployment
}

// runEval works one eval until it has no item left to claim here: it claims up to its concurrency,
// replays them, and once every item is done (by any replica) writes the summary.
func (w *EvalWorker) runEval(ctx context.Context, id string) {
	s := w.S
	job, err := w.prepare(ctx, id)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("evals: the eval cannot run", "eval", id, "err", err)
			w.end(ctx, id, EvalFailed, nil, err.Error())
		}
		return
	}
	if job == nil {
		return
	}
	if err := s.q.EvalStart(ctx, s.db, dbsqlc.EvalStartParams{Now: sql.NullInt64{Int64: ms(s.now()), Valid: true}, ID: id}); err != nil {
		return
	}
	sem := make(chan struct{}, job.row.Concurrency)
	var wg sync.WaitGroup
	var held sync.Map // source run id → true while under way here
	renew := time.NewTicker(w.Lease / 3)
	defer renew.Stop()
	for ctx.Err() == nil {
		cur, err := s.q.EvalGetByID(ctx, s.db, id)
		if err != nil || (cur.State != EvalQueued && cur.State != EvalRunning) {
			break // canceled (or ended elsewhere): claim nothing more
		}
		var claimed []dbsqlc.EvalItemClaimRow
		if free := cap(sem) - len(sem); free > 0 {
			claimed, err = w.claim(ctx, id, free)
			if err != nil && ctx.Err() == nil {
				s.log.Warn("evals: cannot claim items", "eval", id, "err", err)
			}
		}
		for _, c := range claimed {
			sem <- struct{}{}
			held.Store(c.SourceRunID, true)
			wg.Add(1)
			go func() {
				var once sync.Once
				free := func() { once.Do(func() { <-sem }) }
				defer func() { free(); held.Delete(c.SourceRunID); wg.Done() }()
				w.replayItem(ctx, job, c.SourceRunID, free)
			}()
		}
		if len(claimed) == 0 && len(sem) == 0 {
			p, err := s.q.EvalProgress(ctx, s.db, id)
			if err == nil && p.Done+p.Failed >= p.Total {
				w.finish(ctx, job)
				break
			}
			// Else other replicas hold the items left: they finish them, or their leases end and
			// they are claimed again here.
		}
		select {
		case <-ctx.Done():
		case <-renew.C:
			w.renew(ctx, id, &held)
		case <-time.After(evalClaimEvery):
		}
	}
	wg.Wait()
}

// claim takes up to free of an eval's items here, within the eval's concurrency across every replica
// sharing the store: in one transaction that locks the eval's row (PostgreSQL; SQLite's write
// transactions are one at a time), the items whose model calls are under way anywhere are counted
// (EvalItemsCalling: claimed with a live lease and not yet answered) and at most the rest claimed.
func (w *EvalWorker) claim(ctx context.Context, evalID string, free int) ([]dbsqlc.EvalItemClaimRow, error) {
	s := w.S
	var claimed []dbsqlc.EvalItemClaimRow
	err := db.Tx(ctx, s.db, func(tx *sql.Tx) error {
		concurrency, err := s.q.EvalLockForClaim(ctx, tx, evalID)
		if err != nil {
			return err
		}
		now := s.now()
		calling, err := s.q.EvalItemsCalling(ctx, tx, dbsqlc.EvalItemsCallingParams{EvalID: evalID, Now: ms(now)})
		if err != nil {
			return err
		}
		lim := min(int64(free), concurrency-calling)
		if lim <= 0 {
			return nil
		}
		claimed, err = s.q.EvalItemClaim(ctx, tx, dbsqlc.EvalItemClaimParams{Worker: w.ID, EvalID: evalID,
			LeaseUntil: ms(now.Add(w.Lease)), Now: ms(now), Lim: lim})
		return err
	})
	return claimed, err
}

// renew extends the leases of the items under way here.
func (w *EvalWorker) renew(ctx context.Context, evalID string, held *sync.Map) {
	until := ms(w.S.now().Add(w.Lease))
	held.Range(func(k, _ any) bool {
		_ = w.S.q.EvalItemRenew(ctx, w.S.db, dbsqlc.EvalItemRenewParams{LeaseUntil: until, EvalID: evalID, SourceRunID: k.(string), Worker: w.ID})
		return true
	})
}

// prepare reads an eval and the deployment views its replays (and its judge's calls) are served on;
// nil, nil when it is no longer open.
func (w *EvalWorker) prepare(ctx context.Context, id string) (*evalJob, error) {
	s := w.S
	row, err := s.q.EvalGetByID(ctx, s.db, id)
	if err != nil {
		return nil, nil
	}
	if row.State != EvalQueued && row.State != EvalRunning {
		return nil, nil
	}
	dep, err := s.q.EvalDeployment(ctx, s.db, row.DeploymentID)
	if err != nil {
		return nil, errors.New("the deployment was deleted")
	}
	base, err := s.EdgeDeployment(ctx, dep.Slug)
	if err != nil {
		return nil, fmt.Errorf("the deployment cannot serve: %w", err)
	}
	var c edgemodel.Target
	_ = json.Unmarshal([]byte(row.Candidate), &c)
	job := &evalJob{row: row}
	if job.candidate, err = s.viewOf(ctx, base, c); err != nil {
		return nil, prefixed("candidate", err)
	}
	if row.JudgeModel != "" {
		if job.judge, err = s.viewOf(ctx, base, edgemodel.Target{Kind: edgemodel.TargetBaseModel, Model: row.JudgeModel}); err != nil {
			return nil, prefixed("judge.model", err)
		}
	}
	return job, nil
}

// viewOf is a deployment as target t serves it (as a canary's arm is, edgeCanary).
func (s *Service) viewOf(ctx context.Context, base *edgemodel.EdgeDeployment, t edgemodel.Target) (*edgemodel.EdgeDeployment, error) {
	r, err := s.resolveTarget(ctx, s.db, base.ProjectID, t)
	if err != nil {
		return nil, err
	}
	v := *base
	v.Canary = nil
	v.Target, v.BaseModel, v.Adapter, v.AdapterName = r.Target, r.BaseModel, r.Adapter, r.AdapterName
	return &v, nil
}

// replayItem replays one source run and writes its result, while this worker holds the item. free
// gives the eval's concurrency back once the model has answered: the wait for the recorder to store the
// replay's run (awaitStored) holds the item, not a place among the calls to the model.
func (w *EvalWorker) replayItem(ctx context.Context, job *evalJob, sourceID string, free func()) {
	s := w.S
	res, runID, failure, asked := w.replay(ctx, job, sourceID)
	if asked && failure == "" && job.candidate.Retention.Records() {
		// The model has answered: while its run reaches the store the item no longer counts against
		// the eval's concurrency, here (free) nor on any replica (EvalItemsCalling).
		_ = s.q.EvalItemAnswered(ctx, s.db, dbsqlc.EvalItemAnsweredParams{EvalRunID: runID, EvalID: job.row.ID, SourceRunID: sourceID, Worker: w.ID})
		free()
		w.awaitStored(ctx, job.row.DeploymentID, runID)
	}
	free()
	if ctx.Err() != nil {
		return // stopping: the lease ends and another worker takes the item
	}
	p := dbsqlc.EvalItemDoneParams{State: "done", EvalRunID: runID, EvalID: job.row.ID, SourceRunID: sourceID, Worker: w.ID}
	if failure != "" {
		p.State, p.Error = "failed", failure
	}
	if res != nil {
		b, _ := json.Marshal(res)
		p.Result = sql.NullString{String: string(b), Valid: true}
	}
	if _, err := s.q.EvalItemDone(ctx, s.db, p); err != nil && ctx.Err() == nil {
		s.log.Warn("evals: cannot write an item's result", "eval", job.row.ID, "run", sourceID, "err", err)
	}
}

// replay reads a source run, sends it to the candidate (unless a replay of it is stored already),
// compares the answers and asks the judge; failure says why the run could not be replayed.
// asked says whether the candidate was asked now (its run is then on its way to the store).
func (w *EvalWorker) replay(ctx context.Context, job *evalJob, sourceID string) (res *EvalResult, runID, failure string, asked bool) {
	s := w.S
	d := job.row.DeploymentID
	src, err := s.q.RunResponse(ctx, s.db, dbsqlc.RunResponseParams{ID: sourceID, DeploymentID: d})
	if err != nil {
		return nil, "", "the run is no longer stored", false
	}
	var f EvalRuns
	_ = json.Unmarshal([]byte(job.row.Filter), &f)
	opt := dataset.Options{Cut: f.Status == ExportStatusAll, Secret: s.ThinkingSecret,
		Previous: func(responseID string) (dataset.Run, bool) { return s.exportPrevious(ctx, d, responseID) }}
	rp, err := dataset.ReplayOf(dataset.Run{ID: src.ID, Status: src.Status, Request: []byte(src.Request), Response: []byte(src.Response)}, opt)
	if err != nil {
		return nil, "", "the run cannot be replayed: " + err.Error(), false
	}
	runID = evalRunID(job.row.ID, job.row.CreatedAt, sourceID)
	answer, failure, asked := w.candidateAnswer(ctx, job, rp.Body, sourceID, runID)
	if failure != "" {
		return nil, runID, failure, asked
	}
	cand, err := dataset.ChatAnswer(answer)
	if err != nil {
		return nil, runID, "the candidate's answer cannot be read: " + err.Error(), asked
	}
	ask := evalscore.Ask{Tools: rp.Conversation.Tools, ResponseFormat: rp.ResponseFormat}
	base := evalscore.Answer(rp.Answer)
	ca := evalscore.Answer(cand)
	res = &EvalResult{BaselineAnswer: answerShown(rp.Answer), CandidateAnswer: answerShown(cand)}
	res.Identical, res.Checks = evalscore.Compare(ask, base, ca)
	if src.FeedbackScore.Valid {
		res.Feedback = int(src.FeedbackScore.Int64)
	}
	if job.judge != nil {
		first := w.judge(ctx, job, rp.Conversation, base, ca, sourceID, runID+"a")
		swapped := w.judge(ctx, job, rp.Conversation, ca, base, sourceID, runID+"b")
		res.Verdict = evalscore.Combine(first, swapped)
	}
	return res, runID, "", asked
}

// candidateAnswer is the candidate's answer to a replay: read back when a replay of the run is stored
// already (a replica that died after recording it), else asked now (asked).
func (w *EvalWorker) candidateAnswer(ctx context.Context, job *evalJob, body []byte, sourceID, runID string) (answer []byte, failure string, asked bool) {
	s := w.S
	if prev, err := s.q.RunResponse(ctx, s.db, dbsqlc.RunResponseParams{ID: runID, DeploymentID: job.row.DeploymentID}); err == nil && prev.Status == "ok" && prev.Response != "" {
		return []byte(prev.Response), "", false
	}
	status, answer := w.send(ctx, job.candidate, body, job.row.ID, sourceID, runID)
	if status != http.StatusOK {
		return nil, fmt.Sprintf("the candidate answered %d: %s", status, errorMessage(answer)), true
	}
	return answer, "", true
}

// evalStoredWait bounds how long a worker waits for its replay's run to reach the store.
const evalStoredWait = 15 * time.Second

// awaitStored waits until the recorder has written a replay's run (it writes in batches, off the
// request path), so that an item is marked done only once its run is stored: a replica killed before
// that leaves the item to another, which replays it, and one killed after leaves a stored run, which
// the other reads back (candidateAnswer). Either way the run is recorded once.
func (w *EvalWorker) awaitStored(ctx context.Context, deploymentID, runID string) {
	deadline := time.Now().Add(evalStoredWait)
	// The recorder writes every 200 ms: look first after 50 ms, then less often, up to every 200 ms.
	pause := 50 * time.Millisecond
	for ctx.Err() == nil && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
		if _, err := w.S.q.RunResponse(ctx, w.S.db, dbsqlc.RunResponseParams{ID: runID, DeploymentID: deploymentID}); err == nil {
			return
		}
		pause = min(2*pause, 200*time.Millisecond)
	}
	if ctx.Err() == nil {
		w.S.log.Warn("evals: a replay's run did not reach the store in time; its item is done all the same", "run", runID)
	}
}

// ReplayYielded is the status of a replay that gave the place it borrowed from the callers' reserve
// back to a caller (admission.Loan): not an answer, not recorded, sent again.
const ReplayYielded = 0

// send sends a replay, again while it gives its place to a caller: each time it waits in the eval lane
// like any other replay, and only the attempt answered is recorded, so the run is replayed once.
func (w *EvalWorker) send(ctx context.Context, d *edgemodel.EdgeDeployment, body []byte, evalID, sourceID, runID string) (int, []byte) {
	for {
		rctx, cancel := context.WithTimeout(ctx, evalReplayTimeout)
		status, answer := w.Replayer.Replay(rctx, d, body, evalID, sourceID, runID)
		cancel()
		if status != ReplayYielded || ctx.Err() != nil {
			return status, answer
		}
	}
}

// judge asks the judge once, answers a and b in that order; "" when it cannot be read.
func (w *EvalWorker) judge(ctx context.Context, job *evalJob, c conv.Conversation, a, b evalscore.Answer, sourceID, runID string) string {
	body := evalscore.JudgeBody(job.judge.Served(), job.row.JudgeRubric, c, a, b)
	status, answer := w.send(ctx, job.judge, body, job.row.ID, sourceID, runID)
	if status != http.StatusOK {
		return ""
	}
	ans, err := dataset.ChatAnswer(answer)
	if err != nil {
		return ""
	}
	choice, _ := evalscore.ParseJudge(ans.Text)
	return choice
}

// finish writes an eval's summary once every item is done: summarized by evalscore under the
// deployment's gate's minWinRate (0.5 without one).
func (w *EvalWorker) finish(ctx context.Context, job *evalJob) {
	s := w.S
	var results []evalscore.Result
	var after int64
	for {
		rows, err := s.q.EvalItemPage(ctx, s.db, dbsqlc.EvalItemPageParams{EvalID: job.row.ID, After: after, Lim: 500})
		if err != nil {
			return
		}
		for _, row := range rows {
			after = row.Seq
			if row.State != "done" {
				continue
			}
			r := resultOf(row)
			results = append(results, evalscore.Result{Identical: r.Identical, Checks: r.Checks, Verdict: r.Verdict, Feedback: r.Feedback})
		}
		if len(rows) < 500 {
			break
		}
	}
	minWinRate := defaultMinWinRate
	if g, err := s.gateOf(ctx, job.row.DeploymentID); err == nil && g != nil {
		minWinRate = g.MinWinRate
	}
	sum := evalscore.Summarize(results, job.judge != nil, minWinRate)
	w.end(ctx, job.row.ID, EvalDone, &sum, "")
}

// end ends an open eval once (a replica that ends it second changes nothing).
func (w *EvalWorker) end(ctx context.Context, id, state string, sum *evalscore.Summary, why string) {
	p := dbsqlc.EvalEndParams{State: state, Error: why, ID: id, Now: sql.NullInt64{Int64: ms(w.S.now()), Valid: true}}
	if sum != nil {
		b, _ := json.Marshal(sum)
		p.Summary = sql.NullString{String: string(b), Valid: true}
	}
	_, _ = w.S.q.EvalEnd(ctx, w.S.db, p)
}

// answerShown is an answer as a result shows it: its text, then each tool call as name(arguments).
func answerShown(a dataset.Answer) string {
	var b strings.Builder
	b.WriteString(a.Text)
	for _, c := range a.ToolCalls {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString(c.Function.Name + "(" + c.Function.Arguments + ")")
	}
	return b.String()
}

// errorMessage is the message of an error envelope (OpenAI's), else the answer's start.
func errorMessage(answer []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(answer, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	if len(answer) > 200 {
		answer = answer[:200]
	}
	return string(answer)
}
