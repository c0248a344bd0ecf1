package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/svcdev/svc/cloudapi"
)

// signedIn is a client for the routes of signed-in users: it never mints an anonymous identity,
// which could not use them anyway.
func (c *cli) signedIn() (*cloudapi.Client, error) {
	l, err := c.local()
	if err != nil {
		return nil, err
	}
	cl, err := l.Client(c.ctx, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("not signed in to %s: run `svc login --api %s` first", c.api, c.api)
	}
	if err != nil {
		return nil, err
	}
	cl.UserAgent = "svc-cli"
	return cl, nil
}

func runOrgsCreate(c *cli, args []string) error {
	cmd := c.newCommand("svc orgs create SLUG", "Creates an org; you become its member. Slugs follow the rules of endpoint slugs\n(2-50 lowercase letters, digits and hyphens) and are unique on the server.")
	pos, err := c.parse(cmd, args, 1, false)
	if err != nil {
		return err
	}
	cl, err := c.signedIn()
	if err != nil {
		return err
	}
	org, err := cl.CreateOrg(c.ctx, pos[0])
	if err != nil {
		return err
	}
	if c.asJSON {
		return c.printJSON(org)
	}
	fmt.Fprintf(c.stdout, "Created org %s.\nNext: svc projects create --org %s PROJECT\n", org.Slug, org.Slug)
	return nil
}

func runOrgsList(c *cli, args []string) error {
	cmd := c.newCommand("svc orgs list", "Lists your orgs and their projects.")
	if _, err := c.parse(cmd, args, 0, false); err != nil {
		return err
	}
	cl, err := c.signedIn()
	if err != nil {
		return err
	}
	me, err := cl.Me(c.ctx)
	if err != nil {
		return err
	}
	if c.asJSON {
		return c.printJSON(me.Orgs)
	}
	rows := [][]string{{"ORG", "PROJECT", "PROJECT ID"}}
	for _, o := range me.Orgs {
		if len(o.Projects) == 0 {
			rows = append(rows, []string{o.Slug, "-", "-"})
		}
		for _, p := range o.Projects {
			rows = append(rows, []string{o.Slug, p.Slug, p.ID})
		}
	}
	return c.table(rows)
}

func runProjectsCreate(c *cli, args []string) error {
	cmd := c.newCommand("svc projects create --org ORG SLUG", "Creates a project in one of your orgs.")
	org := cmd.String("org", "", "the org of the project (required)")
	pos, err := c.parse(cmd, args, 1, false)
	if err != nil {
		return err
	}
	if *org == "" {
		return cmd.fail("--org is required")
	}
	cl, err := c.signedIn()
	if err != nil {
		return err
	}
	p, err := cl.CreateProject(c.ctx, *org, pos[0])
	if err != nil {
		return err
	}
	if c.asJSON {
		return c.printJSON(p)
	}
	fmt.Fprintf(c.stdout, "Created project %s/%s (%s).\nNext: svc use --org %s --project %s\n", *org, p.Slug, p.ID, *org, p.Slug)
	return nil
}

// runUse writes .svc/state.json for a project the user belongs to: how signed-in users pick the
// project of a folder without writing the file by hand.
func runUse(c *cli, args []string) error {
	cmd := c.newCommand("svc use --org ORG --project PROJECT",
		"Makes ORG/PROJECT the project of the current folder: writes .svc/state.json, which the CLI\nand the studio read.")
	org := cmd.String("org", "", "org slug (required)")
	project := cmd.String("project", "", "project slug (required)")
	if _, err := c.parse(cmd, args, 0, false); err != nil {
		return err
	}
	if *org == "" || *project == "" {
		return cmd.fail("--org and --project are required")
	}
	l, err := c.local()
	if err != nil {
		return err
	}
	cl, err := c.signedIn()
	if err != nil {
		return err
	}
	me, err := cl.Me(c.ctx)
	if err != nil {
		return err
	}
	var scope *cloudapi.Scope
	var known []string
	for _, o := range me.Orgs {
		for _, p := range o.Projects {
			known = append(known, o.Slug+"/"+p.Slug)
			if o.Slug == *org && p.Slug == *project {
				scope = &cloudapi.Scope{OrgSlug: o.Slug, ProjectSlug: p.Slug, ProjectID: p.ID}
			}
		}
	}
	if scope == nil {
		msg := fmt.Sprintf("you have no project %s/%s", *org, *project)
		if len(known) > 0 {
			msg += "; yours: " + strings.Join(known, ", ")
		} else {
			msg += "; create one with svc orgs create and svc projects create"
		}
		return errors.New(msg)
	}
	if err := cloudapi.SaveState(l.StatePath, scope); err != nil {
		return err
	}
	if c.asJSON {
		return c.printJSON(scope)
	}
	fmt.Fprintf(c.stdout, "Using project %s/%s; wrote %s.\n", scope.OrgSlug, scope.ProjectSlug, l.StatePath)
	return nil
}
