//go:build go1.26

package freshconn

import (
	"context"
	"errors"
	"net/http"
)

// supported leaves out a Transport whose MaxConnsPerHost bounds its
// connections: NewClientConn's do not count against the bound.
func supported(rt http.RoundTripper) bool {
	t, ok := rt.(*http.Transport)
	return ok && t.MaxConnsPerHost <= 0
}

func dial(ctx context.Context, rt http.RoundTripper, scheme, addr string) (Conn, error) {
	t, ok := rt.(*http.Transport)
	if !ok {
		return nil, errors.New("freshconn: Base is not an *http.Transport")
	}
	cc, err := t.NewClientConn(ctx, scheme, addr)
	if err != nil {
		return nil, err // not a nil *ClientConn in a non-nil Conn
	}
	return cc, nil
}
