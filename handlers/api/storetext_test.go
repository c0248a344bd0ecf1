package api_test

import (
	"context"
	"database/sql"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/storetest"
)

// errorLog is a logger that keeps every record at ERROR or above, for tests that assert a caller's
// bad input is never an ERROR line.
type errorLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *errorLog) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelError }
func (l *errorLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
	l.mu.Lock()
	l.lines = append(l.lines, b.String())
	l.mu.Unlock()
	return nil
}
func (l *errorLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *errorLog) WithGroup(string) slog.Handler      { return l }

func (l *errorLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.lines
	l.lines = nil
	return out
}

// routeBodies is the body each route of the management API is sent with when one of its path
// parameters is poisoned: one a real id would be served with. A route missing here fails the test, so
// that a new route is probed too.
var routeBodies = map[string]string{
	"POST /v1/auth/anonymous":                                                     ``,
	"POST /v1/auth/anonymous/scope":                                               ``,
	"POST /v1/auth/anonymous/claim":                                               `{"anonymousToken":"x"}`,
	"GET /v1/me":                                                                  ``,
	"GET /v1/models":                                                              ``,
	"GET /v1/models/:id":                                                          ``,
	"POST /v1/one-click":                                                          `{}`,
	"POST /v1/orgs":                                                               `{"slug":"neworg"}`,
	"POST /v1/orgs/:org/projects":                                                 `{"slug":"newproject"}`,
	"GET /v1/orgs/:org/projects/:project/deployments":                             ``,
	"POST /v1/orgs/:org/projects/:project/deployments":                            `{"slug":"fresh","target":{"kind":"base_model","model":"base-a"}}`,
	"POST /v1/orgs/:org/projects/:project/deployments/bulk":                       `{"action":"disable","ids":[]}`,
	"GET /v1/orgs/:org/projects/:project/deployments/:id":                         ``,
	"PATCH /v1/orgs/:org/projects/:project/deployments/:id":                       `{"enabled":true}`,
	"DELETE /v1/orgs/:org/projects/:project/deployments/:id":                      ``,
	"POST /v1/orgs/:org/projects/:project/deployments/:id/canary/promote":         ``,
	"GET /v1/orgs/:org/projects/:project/deployments/:id/canaries":                ``,
	"GET /v1/orgs/:org/projects/:project/deployments/:id/canaries/:canaryId":      ``,
	"GET /v1/orgs/:org/projects/:project/deployments/:id/evals":                   ``,
	"POST /v1/orgs/:org/projects/:project/deployments/:id/evals":                  `{"candidate":{"kind":"base_model","model":"base-a"}}`,
	"GET /v1/orgs/:org/projects/:project/deployments/:id/evals/:evalId":           ``,
	"GET /v1/orgs/:org/projects/:project/deployments/:id/evals/:evalId/results":   ``,
	"GET /v1/orgs/:org/projects/:project/deployments/:id/evals/:evalId/export":    ``,
	"POST /v1/orgs/:org/projects/:project/deployments/:id/evals/:evalId/cancel":   ``,
	"GET /v1/orgs/:org/projects/:project/deployments/:id/keys":                    ``,
	"POST /v1/orgs/:org/projects/:project/deployments/:id/keys":                   `{"label":"ci"}`,
	"GET /v1/orgs/:org/projects/:project/deployments/:id/keys/:keyId":             ``,
	"PATCH /v1/orgs/:org/projects/:project/deployments/:id/keys/:keyId":           `{"limits":null}`,
	"POST /v1/orgs/:org/projects/:project/deployments/:id/keys/:keyId/revoke":     ``,
	"GET /v1/orgs/:org/projects/:project/deployments/:id/runs":                    ``,
	"GET /v1/orgs/:org/projects/:project/deployments/:id/runs/:runId":             ``,
	"DELETE /v1/orgs/:org/projects/:project/deployments/:id/runs/:runId/feedback": ``,
	"GET /v1/orgs/:org/projects/:project/deployments/:id/runs/export":             ``,
	"PUT /v1/orgs/:org/projects/:project/deployments/:id/runs/:runId/feedback":    `{"score":1}`,
	"GET /v1/orgs/:org/projects/:project/deployments/:id/usage":                   ``,
	"GET /v1/orgs/:org/projects/:project/jobs":                                    ``,
	"POST /v1/orgs/:org/projects/:project/jobs":                                   `{"baseModel":"base-a"}`,
	"GET /v1/orgs/:org/projects/:project/jobs/:id":                                ``,
	"PATCH /v1/orgs/:org/projects/:project/jobs/:id":                              `{"status":"running"}`,
}

// poisoned are the values PostgreSQL's TEXT refuses and SQLite stores: a NUL and invalid UTF-8.
var poisoned = []string{"%00", "run_%00", "%FF", "a%C3%28"}

// A probe is one request of TestStoreRefusedTextIsNotFound.
type probe struct{ method, path, body string }

// perItem tells a bulk request, answered 200 with each id's own result, from the rest: its poisoned
// ids must be not_found there.
func (p probe) perItem() bool { return strings.HasSuffix(p.path, "/deployments/bulk") }

// Every route of the management API, with each of its path parameters in turn a value PostgreSQL's
// TEXT refuses (a NUL, invalid UTF-8), and the query and body values that name stored things, answers
// a 4xx, the same on SQLite and on PostgreSQL, and logs no ERROR: a caller's bad id is not an internal
// error, and cannot fill the logs.
func TestStoreRefusedTextIsNotFound(t *testing.T) {
	answers := map[probe]int{}
	for _, engine := range []db.Engine{db.SQLite, db.Postgres} {
		t.Run(string(engine), func(t *testing.T) {
			var sqldb *sql.DB
			if engine == db.Postgres {
				sqldb = storetest.Postgres(t).Open(t)
			} else {
				var err error
				if sqldb, err = db.OpenFile(context.Background(), filepath.Join(t.TempDir(), "svc.db")); err != nil {
					t.Fatal(err)
				}
			}
			logs := &errorLog{}
			e := newEnvOn(t, sqldb, slog.New(logs))
			ctx := context.Background()
			c := e.member("nul@example.com")
			d := must(c.CreateDeployment(ctx, base("poison")))
			k := must(c.IssueDeploymentKey(ctx, d.ID, "first"))
			job := e.completedJob(c)
			ev := must(c.CreateEval(ctx, d.ID, cloudapi.CreateEvalRequest{Candidate: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "base-a"}}))
			const runID = "run_00000000000000nul"
			if _, err := sqldb.Exec(storetest.Rebind(sqldb, `INSERT INTO runs (id, deployment_id, model, status, latency_ms, prompt_tokens, completion_tokens, created_at, request, response)
				VALUES (?, ?, 'base-a', 'ok', 1, 1, 1, ?, '{}', '{}')`), runID, d.ID, time.Now().UnixMilli()); err != nil {
				t.Fatal(err)
			}
			logs.take()

			var probes []probe
			routes := e.echo.Routes()
			sort.Slice(routes, func(i, j int) bool { return routes[i].Method+routes[i].Path < routes[j].Method+routes[j].Path })
			for _, r := range routes {
				body, ok := routeBodies[r.Method+" "+r.Path]
				if !ok {
					t.Errorf("route %s %s has no body in routeBodies: add one so that it is probed", r.Method, r.Path)
					continue
				}
				real := map[string]string{"org": c.OrgSlug, "project": c.ProjectSlug, "id": d.ID, "keyId": k.Key.ID, "runId": runID, "evalId": ev.ID}
				if strings.Contains(r.Path, "/jobs/:id") {
					real["id"] = job.ID
				}
				segs := strings.Split(r.Path, "/")
				for i, s := range segs {
					if !strings.HasPrefix(s, ":") {
						continue
					}
					for _, bad := range poisoned {
						out := make([]string, len(segs))
						for j, s := range segs {
							switch {
							case j == i:
								out[j] = bad
							case strings.HasPrefix(s, ":"):
								out[j] = real[s[1:]]
							default:
								out[j] = s
							}
						}
						probes = append(probes, probe{r.Method, strings.Join(out, "/"), body})
					}
				}
			}
			p := "/v1/orgs/" + c.OrgSlug + "/projects/" + c.ProjectSlug
			dp := p + "/deployments/" + d.ID
			for _, bad := range poisoned {
				probes = append(probes,
					probe{"GET", dp + "/usage?keyId=" + bad, ""},
					probe{"GET", dp + "/usage?groupBy=arm&keyId=" + bad, ""},
					probe{"GET", dp + "/runs?cursor=" + bad, ""},
					probe{"GET", dp + "/runs/export?arm=" + bad, ""},
					probe{"GET", dp + "/runs/export?status=" + bad, ""},
					probe{"GET", p + "/deployments?cursor=" + bad, ""},
					probe{"GET", p + "/jobs?cursor=" + bad, ""},
				)
			}
			for _, body := range []struct{ method, path, body string }{
				{"POST", p + "/deployments/bulk", `{"action":"disable","ids":["\u0000"]}`},
				{"POST", p + "/deployments/bulk", `{"action":"enable","ids":["dep_\u0000", "` + d.ID + `"]}`},
				{"POST", p + "/deployments", `{"slug":"fromjob","target":{"kind":"checkpoint","jobId":"\u0000","step":100}}`},
				{"POST", p + "/deployments", `{"slug":"fromjob","target":{"kind":"final_adapter","jobId":"job_\u0000"}}`},
				{"POST", p + "/deployments", `{"slug":"frommodel","target":{"kind":"base_model","model":"base-a\u0000"}}`},
				{"POST", dp + "/keys", `{"label":"ci\u0000"}`},
				{"POST", p + "/jobs", `{"id":"job_\u0000","baseModel":"base-a"}`},
				{"POST", p + "/jobs", `{"baseModel":"base-a\u0000"}`},
				{"POST", p + "/jobs", `{"baseModel":"base-a","status":"completed","finalAdapter":"file:///tmp/\u0000"}`},
				{"PUT", dp + "/runs/" + runID + "/feedback", `{"score":1,"comment":"a\u0000b"}`},
				{"POST", "/v1/one-click", `{"orgSlug":"` + c.OrgSlug + `\u0000","projectSlug":"main"}`},
				{"POST", "/v1/orgs", `{"slug":"a\u0000b"}`},
				{"POST", dp + "/evals", `{"candidate":{"kind":"base_model","model":"base-a\u0000"}}`},
				{"POST", dp + "/evals", `{"candidate":{"kind":"base_model","model":"base-a"},"judge":{"model":"j\u0000"}}`},
				{"POST", dp + "/canary/promote", `{"override":{"reason":"a\u0000b"}}`},
				{"POST", "/v1/auth/anonymous/claim", `{"anonymousToken":"anon_\u0000"}`},
			} {
				probes = append(probes, probe(body))
			}

			for _, pr := range probes {
				status, text := e.rawURL(c, pr.method, pr.path, pr.body)
				if pr.perItem() && status == 200 && strings.Contains(text, `"ok":false,"error":{"status":404,"code":"not_found"`) {
					// each poisoned id is not found; the real one is served
				} else if status < 400 || status >= 500 {
					t.Errorf("%s %s %.60s: HTTP %d, want a 4xx: %.200s", pr.method, pr.path, pr.body, status, text)
				}
				if engine == db.SQLite {
					answers[pr] = status
				} else if want, ok := answers[pr]; ok && want != status {
					t.Errorf("%s %s %.60s: HTTP %d on PostgreSQL, %d on SQLite: %.200s", pr.method, pr.path, pr.body, status, want, text)
				}
				for _, l := range logs.take() {
					t.Errorf("%s %s %.60s: logged an ERROR: %.300s", pr.method, pr.path, pr.body, l)
				}
			}
			t.Logf("%d probes over %d routes", len(probes), len(routes))
		})
	}
}
