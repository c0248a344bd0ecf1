package cli

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/svcdev/svc/cloudapi"
)

func runModelsList(c *cli, args []string) error {
	cmd := c.newCommand("svc models list", "Lists the catalog: public models (served by multi-model deployments) and the\nbase models registered for inference.")
	if _, err := c.parse(cmd, args, 0, false); err != nil {
		return err
	}
	cl, err := c.unscoped()
	if err != nil {
		return err
	}
	models, err := cl.ListModels(c.ctx)
	if err != nil {
		return err
	}
	if c.asJSON {
		return c.printJSON(models)
	}
	rows := [][]string{{"ID", "RUNTIME", "PUBLIC", "DEFAULT", "MESSAGES API"}}
	for _, m := range models {
		runtime := m.Runtime
		if m.Simulated {
			runtime += " (simulated)"
		}
		rows = append(rows, []string{m.ID, runtime, fmtBool(m.Public, "yes", "no"),
			fmtBool(m.Default, "yes", ""), fmtBool(m.SupportsMessages, "yes", "no")})
	}
	return c.table(rows)
}

func runModelsGet(c *cli, args []string) error {
	cmd := c.newCommand("svc models get MODEL", "Shows one model of the catalog. A model served by replicas (the models file's replicas:)\n"+
		"gets a table of them as the server's edge sees them: healthy or out and why, calls in flight,\n"+
		"ejections, pace (its calls' time over the fastest replica's), the adapters running on each and,\n"+
		"for a model reading KV events (kvEvents:), each replica's KV-cache state and blocks held.")
	pos, err := c.parse(cmd, args, 1, false)
	if err != nil {
		return err
	}
	cl, err := c.unscoped()
	if err != nil {
		return err
	}
	m, err := cl.GetModel(c.ctx, pos[0])
	if err != nil {
		return err
	}
	if c.asJSON {
		return c.printJSON(m)
	}
	runtime := m.Runtime
	if m.Simulated {
		runtime += " (simulated)"
	}
	if err := c.fields("id", m.ID, "runtime", runtime, "public", fmtBool(m.Public, "yes", "no"),
		"messages api", fmtBool(m.SupportsMessages, "yes", "no")); err != nil {
		return err
	}
	if m.Fleet == nil {
		fmt.Fprintln(c.stdout, "\nreplicas: none (one upstream)")
		return nil
	}
	f := m.Fleet
	loras := "no LoRA slots"
	if f.MaxLoras > 0 {
		loras = fmt.Sprintf("%d LoRA slots each", f.MaxLoras)
	}
	fmt.Fprintf(c.stdout, "\nreplicas: %d, routing %s, cache signal %s, %s\n\n", len(f.Replicas), f.Routing, f.CacheSignal, loras)
	kv := slices.ContainsFunc(f.Replicas, func(r cloudapi.Replica) bool { return r.KV != nil })
	head := []string{"REPLICA", "STATE", "IN FLIGHT", "WAITING", "EJECTIONS", "PACE", "ADAPTERS"}
	if kv {
		head = append(head, "KV CACHE")
	}
	rows := [][]string{head}
	for _, r := range f.Replicas {
		state := r.State
		if r.State == cloudapi.ReplicaOut {
			state = "out: " + orDash(r.OutReason)
		}
		pace := "-"
		if r.Pace > 0 {
			pace = fmt.Sprintf("%.1fx (%d ms)", r.Pace, r.MeanCallMs)
		}
		adapters := strings.Join(r.Adapters, ",")
		if len(r.ResidentAdapters) > 0 {
			adapters = strings.TrimPrefix(adapters+" (idle in a slot: "+strings.Join(r.ResidentAdapters, ",")+")", " ")
		}
		if len(r.UnreadyAdapters) > 0 {
			adapters = strings.TrimPrefix(adapters+" (loading: "+strings.Join(r.UnreadyAdapters, ",")+")", " ")
		}
		row := []string{r.Addr, state, strconv.Itoa(r.InFlight), strconv.Itoa(r.Waiting),
			strconv.FormatInt(r.Ejections, 10), pace, orDash(adapters)}
		if kv {
			cache := "-"
			if r.KV != nil {
				cache = fmt.Sprintf("%s, %d blocks", r.KV.State, r.KV.Blocks)
			}
			row = append(row, cache)
		}
		rows = append(rows, row)
	}
	return c.table(rows)
}
