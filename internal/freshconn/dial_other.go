//go:build !go1.26

package freshconn

import (
	"context"
	"errors"
	"net/http"
)

// Before Go 1.26, net/http has no way to get a connection outside its pool.

func supported(http.RoundTripper) bool { return false }

func dial(context.Context, http.RoundTripper, string, string) (Conn, error) {
	return nil, errors.New("freshconn: needs Go 1.26")
}
