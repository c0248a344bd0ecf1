package cli

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
