// Package e2e holds httpretry's end-to-end tests: faults injected by a real
// fault injector (Shopify toxiproxy, run in-process), a real gateway (nginx,
// started on a free loopback port), HTTP/2 over TLS (GOAWAY, REFUSED_STREAM),
// response bodies resumed and read ahead, a soak under flapping faults and
// a table of hostile inputs.
//
// It is its own module so that none of this reaches the go.mod of a user of
// httpretry. Everything runs on loopback with free ports:
//
//	cd e2e && go test -race -shuffle=on -count=1 ./...
//
// nginx comes from the system (Debian's nginx package, installed by .ci/run);
// without it the gateway tests skip, except under CI=true where they fail.
// The figures of docs/reliability.md come from one run of the whole suite:
//
//	cd e2e && E2E_REPORT=../docs/reliability.md go test -race -count=1 -v ./...
package e2e
