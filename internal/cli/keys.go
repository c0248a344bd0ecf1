package cli

import (
	"fmt"
	"strconv"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/core"
)

func runKeysList(c *cli, args []string) error {
	cmd := c.newCommand("svc keys list DEPLOYMENT", "Lists a deployment's keys, revoked ones included, with when each was last used\n(best effort: for \"used recently?\", not for audit). DEPLOYMENT is its id or its slug.")
	pos, err := c.parse(cmd, args, 1, false)
	if err != nil {
		return err
	}
	cl, id, err := c.scopedDeployment(pos[0])
	if err != nil {
		return err
	}
	keys, err := cl.ListDeploymentKeys(c.ctx, id)
	if err != nil {
		return err
	}
	if c.asJSON {
		return c.printJSON(keys)
	}
	rows := [][]string{{"ID", "LABEL", "PREFIX", "STATUS", "CREATED", "LAST USED", "LIMITS", "USED/BUDGET", "WEIGHT"}}
	for _, k := range keys {
		rows = append(rows, []string{k.ID, k.Label, k.Prefix, fmtBool(k.Enabled, "enabled", "revoked"),
			fmtTime(k.CreatedAt), fmtTimePtr(k.LastUsedAt), fmtLimits(k.Limits), fmtUsedBudget(k.Budget), strconv.Itoa(k.Weight)})
	}
	return c.table(rows)
}

func runKeysIssue(c *cli, args []string) error {
	cmd := c.newCommand("svc keys issue DEPLOYMENT --label LABEL",
		"Issues a key, with a token budget if --budget-tokens N --budget-period day|month are given. Its\n"+
			"plaintext is printed once and can never be read again. DEPLOYMENT is its id or its slug.")
	label := cmd.String("label", "", "1-80 characters, unique among the deployment's enabled keys")
	budget := cmd.budgetFlags()
	weight := cmd.Int("weight", 0, "its share of its model's turns against other keys, 1 to 100 (default 1)")
	pos, err := c.parse(cmd, args, 1, false)
	if err != nil {
		return err
	}
	if *label == "" {
		return cmd.fail("--label is required")
	}
	b, removed, err := budget.set(cmd)
	if err != nil {
		return err
	}
	if removed {
		return cmd.fail("--budget-tokens none removes a budget (svc keys update); a new key without a budget needs no flag")
	}
	if *weight != 0 && (*weight < 1 || *weight > core.MaxKeyWeight) {
		return cmd.fail("--weight must be a whole number from 1 to %d (got %d)", core.MaxKeyWeight, *weight)
	}
	cl, id, err := c.scopedDeployment(pos[0])
	if err != nil {
		return err
	}
	k, err := cl.IssueDeploymentKeyWith(c.ctx, id, cloudapi.IssueKeyRequest{Label: *label, Budget: b, Weight: *weight})
	if err != nil {
		return err
	}
	if c.asJSON {
		return c.printJSON(k)
	}
	fmt.Fprintf(c.stdout, "Issued key %s (%s). Copy it now: it is never shown again.\n\n  %s\n\n", k.Key.ID, k.Key.Label, k.Plaintext)
	return nil
}

func runKeysRevoke(c *cli, args []string) error {
	cmd := c.newCommand("svc keys revoke DEPLOYMENT KEY", "Revokes a key. The edge stops accepting it within about 30 seconds.\nDEPLOYMENT is its id or its slug; KEY is the key's id (svc keys list shows it).")
	pos, err := c.parse(cmd, args, 2, false)
	if err != nil {
		return err
	}
	cl, id, err := c.scopedDeployment(pos[0])
	if err != nil {
		return err
	}
	k, err := cl.RevokeDeploymentKey(c.ctx, id, pos[1])
	if err != nil {
		return err
	}
	if c.asJSON {
		return c.printJSON(k)
	}
	fmt.Fprintf(c.stdout, "revoked %s (%s)\n", k.ID, k.Label)
	return nil
}
