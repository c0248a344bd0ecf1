package studio

import (
	"context"
	"errors"
	"io/fs"
	"net/http"

	"github.com/svcdev/svc/cloudapi"
)

// The SDK client is built per request from the local files, so a `svc login` or an edited state
// file takes effect without restarting the studio.

// creatingClient is for the first call that needs a scope (creating a deployment): for anonymous
// credentials the SDK creates the scope and writes the state file lazily; for signed-in ones
// a missing file is missing_state.
func (s *Server) creatingClient(ctx context.Context) (*cloudapi.Client, error) {
	return s.local.ScopedClient(ctx)
}

// projectClient is for calls on things that already exist. Without a state file there is no
// project, so nothing can exist yet: answer without any upstream call, and without creating a
// scope just to find it empty. Without credentials nothing can exist for us either, and a freshly
// minted identity would not be a member of the state file's project: no mint here, so that no read
// (GET) ever writes the credentials file.
func (s *Server) projectClient(ctx context.Context) (*cloudapi.Client, error) {
	if !s.local.HasState() {
		if err := s.stateMissing(ctx); err != nil {
			return nil, err
		}
		return nil, &apiError{Status: http.StatusNotFound, Code: "not_found",
			Message: "No such endpoint: this project has no endpoints yet."}
	}
	if err := s.haveCredentials(ctx); err != nil {
		return nil, err
	}
	return s.local.ScopedClient(ctx)
}

// readClient is for reads outside any project (the model catalog). It never mints: a GET changes
// nothing. The page mints anonymous credentials with POST /api/credentials before it asks.
func (s *Server) readClient(ctx context.Context) (*cloudapi.Client, error) {
	if err := s.haveCredentials(ctx); err != nil {
		return nil, err
	}
	return s.local.Client(ctx, false)
}

// haveCredentials is nil when the credentials file holds credentials for this cloud, and otherwise
// the 401 that says how to get some.
func (s *Server) haveCredentials(ctx context.Context) error {
	_, err := s.local.Credentials(ctx, false)
	if errors.Is(err, fs.ErrNotExist) {
		return &apiError{Status: http.StatusUnauthorized, Code: "no_credentials", Cause: err,
			Message: "The studio has no credentials for " + s.apiBaseURL + " yet: POST /api/credentials creates anonymous ones " +
				"(the create form does it when it opens), or sign in with svc login."}
	}
	return err
}

// stateMissing is the missing_state error for signed-in credentials without a state file, and nil
// for anonymous or absent credentials (whose scope is created on the first create). It reads the
// credentials file only: no upstream call.
func (s *Server) stateMissing(ctx context.Context) error {
	creds, err := s.local.Credentials(ctx, false)
	if err == nil && creds.Kind != cloudapi.KindAnonymous {
		return cloudapi.MissingStateError(s.local.StatePath)
	}
	return nil
}
