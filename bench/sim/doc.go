// Package sim runs scenarios A, B, C and C2 of docs/performance.md on a
// virtual clock: a
// discrete-event loop in which time is a number, so a 300-second retry storm
// takes milliseconds and no test ever sleeps.
//
// The simulations call the real engine: delays come from the strategies of
// package backoff (Exponential, Decorrelated, Constant) and retry decisions
// from httpretry's budgets (TokenBucket, RatioBudget), which take the
// current time as an argument and so run on virtual time unchanged. Nothing
// here re-implements a delay formula or a budget.
//
// Scenarios:
//
//   - OCC (A): Brooker's optimistic-concurrency contention model, the one
//     behind "Exponential Backoff And Jitter" (2015), with his parameters.
//   - Herd (B): a synchronised herd of clients retrying against a server
//     that comes back with a fixed capacity per window.
//   - Storm (C): open-loop Poisson clients against a server failing at a
//     fixed rate, with and without retry budgets.
//   - Metastable (C2): Bronson et al.'s closed-loop retry example, in which
//     a 10 s blip leaves a server at 280/300 QPS overloaded for good unless
//     retries stop.
//
// The overload scenarios run the real httpretry.Transport instead, in
// front of a simulated Host, inside a testing/synctest bubble whose fake
// clock makes a minute of traffic take about a second:
//
//   - Overload (D): a host of capacity μ offered 2μ for a minute.
//   - C2 again, on the Transport (RunMetastableTransport), checked against
//     the event loop.
//   - Quota (E): a batch job against an API that allows 100 requests per
//     10 s window and announces what is left.
//
// Each compares Arms: the Transport without retries, without a budget,
// with its retry budget, and with each overload control of
// Policy.Overload added (Throttle, Limit, Pace), beside failsafe-go
// v0.9.8's adaptivethrottler and adaptivelimiter under the Transport.
// TestOverloadScenario, TestMetastableScenario and TestQuotaScenario check
// issue 16's goals in seconds; TestOverloadTable (HTTPRETRY_SIM=full)
// computes the full-length figures docs/performance.md shows.
//
// Every client draws from its own random stream, seeded from the run's seed
// and the client's number (see Stream), so runs are reproducible and no two
// clients share a sequence.
package sim
