package main

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/svcdev/svc/cloudapi"
)

func runLogin(c *cli, args []string) error {
	cmd := c.newCommand("svc login [--api URL] [--force]",
		"Mints an anonymous identity at the API and writes its token to ~/.svc/credentials.json.\n"+
			"Anonymous projects are created on first use; one-click endpoints of anonymous identities\n"+
			"expire after 7 days. Existing credentials for the same API are kept unless --force.")
	force := cmd.Bool("force", false, "mint a new anonymous identity even if credentials for this API exist")
	oauth := cmd.Bool("oauth", false, "sign in with an account (not available yet)")
	if _, err := c.parse(cmd, args, 0, false); err != nil {
		return err
	}
	if *oauth {
		return errors.New("OAuth sign-in is not available yet; run `svc login` without --oauth for an anonymous identity")
	}
	l, err := c.local()
	if err != nil {
		return err
	}
	// Credentials(false) only returns credentials issued by this API; another server's are "missing".
	existing, err := l.Credentials(c.ctx, false)
	switch {
	case err == nil && !*force:
		if c.asJSON {
			return c.printJSON(loginResult{l.CredentialsPath, existing.APIBaseURL, existing.Kind, false})
		}
		fmt.Fprintf(c.stdout, "Already signed in to %s (%s credentials in %s).\nRun `svc login --force` to mint a new anonymous identity.\n",
			c.api, existing.Kind, l.CredentialsPath)
		return nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	}
	tok, err := cloudapi.New(c.api, "").MintAnonymous(c.ctx)
	if err != nil {
		return err
	}
	creds := &cloudapi.Credentials{APIBaseURL: c.api, Kind: cloudapi.KindAnonymous, Token: tok.Token}
	if err := cloudapi.SaveCredentials(l.CredentialsPath, creds); err != nil {
		return err
	}
	if c.asJSON {
		return c.printJSON(loginResult{l.CredentialsPath, c.api, creds.Kind, true})
	}
	fmt.Fprintf(c.stdout, "Minted anonymous identity %s at %s.\nCredentials written to %s (readable by you only).\n",
		tok.Identity.ID, c.api, l.CredentialsPath)
	return nil
}

// loginResult is what `svc login --json` prints: never the token itself.
type loginResult struct {
	CredentialsPath string `json:"credentialsPath"`
	APIBaseURL      string `json:"apiBaseUrl"`
	Kind            string `json:"kind"`
	Minted          bool   `json:"minted"`
}
