// Package bench holds httpretry's benchmarks against other retrying HTTP
// clients and the behaviour tests that compare them, in a module of its own
// so that competitor libraries and plotting never reach the root go.mod.
//
//   - overhead_test.go: the cost of the success path over loopback for the
//     bare http.Transport, httpretry, go-retryablehttp and failsafe-go's
//     failsafehttp, in one run.
//   - compare_test.go: what each library does to the caller's request,
//     discarded responses, a one-hour Retry-After, an unkeyed POST, a TLS
//     certificate error and exhaustion; docs/comparison-tests.md tabulates it.
//   - sim: the simulations of papers.md §8 on a virtual clock.
//   - cmd/report: runs all of it and writes docs/performance.md and its charts.
package bench
