package studio

import "net/http"

// Test-only access to the studio's server.

// Handler is the studio's whole HTTP surface, Host and CSRF checks included.
func (s *Server) Handler() http.Handler { return s.echo }

// CSRFToken is the token pages carry in <meta name="csrf-token">.
func (s *Server) CSRFToken() string { return s.csrf }
