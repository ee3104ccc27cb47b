// Package xnet tests httpretry over an *http.Transport whose HTTP/2 is
// golang.org/x/net's, installed by its ConfigureTransports, at a version
// older than v0.48 (this module pins v0.43.0): that HTTP/2 cannot make the
// connection of its own that a retry after a stream failure asks for.
// It is a module of its own because the e2e module needs a newer x/net.
package xnet
