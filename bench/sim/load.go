package sim

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/adaptivethrottler"

	"github.com/seedhq/httpretry"
)

// Traffic is an open-loop Poisson source: requests arrive at Rate per
// second over [0, Duration) whatever happens to earlier ones, as users of
// a service do.
type Traffic struct {
	Rate     float64
	Duration time.Duration
	// Deadline bounds each request through its context; 0 means none.
	Deadline time.Duration
}

// Outcome is what the callers saw, per second of the run (by the time
// each request ended).
type Outcome struct {
	Requests int   // requests made
	Goodput  []int // requests that ended with a 2xx response
	Refused  []int // requests refused locally, before or between attempts (throttle, limit, pacing, failsafe-go's policies)
	Failed   []int // requests that ended with any other error or status
	Host     HostCounts
}

// DriveTraffic sends t's requests through client to url and waits for all
// of them to end. It must run inside a synctest bubble; the arrivals come
// from the run's random stream, so they are the same for every client.
func DriveTraffic(client http.RoundTripper, host *Host, t Traffic, runSeed uint64) Outcome {
	r := &randStream{Stream(runSeed, 0)}
	start := time.Now()
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		out Outcome
	)
	for at := time.Duration(0); ; {
		at += time.Duration(r.ExpFloat64() / t.Rate * float64(time.Second))
		if at >= t.Duration {
			break
		}
		time.Sleep(time.Until(start.Add(at)))
		out.Requests++
		wg.Go(func() {
			kind := call(client, t.Deadline)
			end := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			switch kind {
			case callOK:
				out.Goodput = bump(out.Goodput, end)
			case callRefused:
				out.Refused = bump(out.Refused, end)
			default:
				out.Failed = bump(out.Failed, end)
			}
		})
	}
	wg.Wait()
	out.Host = host.Counts()
	return out
}

// Batch is a closed-loop job: Workers goroutines work through Total
// requests, each sending its next when the last one ended.
type Batch struct {
	Workers, Total int
	Deadline       time.Duration // per request; 0 means none
}

// BatchOutcome is what a batch job saw.
type BatchOutcome struct {
	Done, Refused, Failed int           // requests by how they ended
	Makespan              time.Duration // until the last request ended
	Host                  HostCounts
}

// DriveBatch runs b through client and waits for it to finish. It must
// run inside a synctest bubble.
func DriveBatch(client http.RoundTripper, host *Host, b Batch) BatchOutcome {
	start := time.Now()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		next int
		out  BatchOutcome
	)
	for range b.Workers {
		wg.Go(func() {
			for {
				mu.Lock()
				if next == b.Total {
					mu.Unlock()
					return
				}
				next++
				mu.Unlock()
				kind := call(client, b.Deadline)
				mu.Lock()
				switch kind {
				case callOK:
					out.Done++
				case callRefused:
					out.Refused++
				default:
					out.Failed++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	out.Makespan = time.Since(start)
	out.Host = host.Counts()
	return out
}

type callKind int

const (
	callOK callKind = iota
	callRefused
	callFailed
)

// call sends one GET through client.
func call(client http.RoundTripper, deadline time.Duration) callKind {
	ctx := context.Background()
	if deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, deadline)
		defer cancel()
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://sim.test/", nil)
	resp, err := client.RoundTrip(req)
	switch {
	case err != nil && refused(err):
		return callRefused
	case err != nil:
		return callFailed
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		return callOK
	}
	return callFailed
}

// refused reports whether err is a local refusal: one of httpretry's
// overload controls, or failsafe-go's throttler or limiter.
func refused(err error) bool {
	return errors.Is(err, httpretry.ErrThrottled) || errors.Is(err, httpretry.ErrConcurrencyLimit) ||
		errors.Is(err, httpretry.ErrRateLimited) ||
		errors.Is(err, adaptivethrottler.ErrExceeded) || errors.Is(err, adaptivelimiter.ErrExceeded)
}
