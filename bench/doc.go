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
//   - compare_policies_test.go: default attempts, backoff shape, budgets,
//     breakers, hedging, per-host policies, per-attempt timeouts and
//     deadline-aware waits in the three HTTP libraries.
//   - compare_aws_test.go, compare_grpc_test.go: the same questions put to
//     the AWS SDK for Go v2's retryer and grpc-go's retry and throttling;
//     docs/comparison.md sets every library side by side.
//   - sim: the simulations of docs/performance.md on a virtual clock, and
//     the hedging scenarios (hedgeload.RunVirtual under synctest).
//   - quantile, cmd/estimators: the evidence for httpretry's latency
//     estimator; docs/hedging.md quotes it.
//   - hedgeload, cmd/hedgeload: hedging side by side on a loopback server
//     with injected latency.
//   - rounds: the order of side-by-side runs, each variant in its own
//     process, the order turned every round.
//   - cmd/report: runs all of it and writes docs/performance.md and its charts.
package bench
