package invariants

import (
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/seedhq/httpretry"
)

// coverage counts what the scenarios exercised, so that the summary shows
// the checks had something to check.
var coverage struct {
	calls, attempts, retries, hedges, lost, timedOut    atomic.Int64
	responses, held, errors, cancelled, unsafeRetries   atomic.Int64
	budgetLevels, breakerOpen, bodiesRead, serverDelays atomic.Int64
	panics, protected, probes                           atomic.Int64

	// The spaces drawn, counted where they were played.
	panicked       [panicLast + 1]atomic.Int64     // calls whose panic reached their caller, by kind
	panicsLost     atomic.Int64                    // panics that would have ended the process (reported)
	seekBodies     atomic.Int64                    // calls with a seekable body, no GetBody
	sharedBodies   atomic.Int64                    // ... with a GetBody that rewinds the caller's one stream
	streamBodies   atomic.Int64                    // ... with a live stream
	bodiesChecked  atomic.Int64                    // attempts whose body, as received, was compared with the caller's
	rewindsRefused atomic.Int64                    // retries refused as their body could not be had again
	progress       [stageAnswered + 1]atomic.Int64 // errors of unknown type, by the stage the hooks told
	nopClose       atomic.Int64                    // responses whose Close does not end a Read
	multiHost      atomic.Int64                    // scenarios with several hosts and a small table
	nested         atomic.Int64                    // calls PrepareRetry made through the Transport
	unbounded      atomic.Int64                    // scenarios whose unbounded retries the harness cancelled at its bound
	prepared       atomic.Int64                    // PrepareRetry calls counted against the retries
	realCalls      [baseClient + 1]atomic.Int64    // calls by what Base is
	layered        [layersBoth + 1]atomic.Int64    // calls by Base's layers
	signed         atomic.Int64                    // bodies a signer read through GetBody
	redirects      atomic.Int64                    // redirects an http.Client in Base followed or refused
	receipts       atomic.Int64                    // request bodies a real server received
	paceProbes     atomic.Int64                    // pacing scenarios: a long pause, its probes, its 24 h bound
	hedgePanics    atomic.Int64                    // panics of Base on a hedge's goroutine that reached their caller
}

func (r *run) cover(recs []*baseRec, attempts []httpretry.Attempt, c *callRun) {
	coverage.calls.Add(1)
	coverage.attempts.Add(int64(len(recs)))
	for _, b := range recs {
		if b.timedOut() {
			coverage.timedOut.Add(1)
		}
	}
	for _, a := range attempts {
		switch {
		case a.Hedge:
			coverage.hedges.Add(1)
		case a.N > 1:
			coverage.retries.Add(1)
		}
		if a.Lost {
			coverage.lost.Add(1)
		}
		if a.Retry && a.DelaySource != httpretry.DelayBackoff {
			coverage.serverDelays.Add(1)
		}
	}
	if c.resp != nil {
		coverage.responses.Add(1)
		if len(attempts) > 0 && attempts[len(attempts)-1].Retry {
			coverage.held.Add(1)
		}
		if len(c.read) > 0 {
			coverage.bodiesRead.Add(1)
		}
	} else {
		coverage.errors.Add(1)
	}
	if !c.cancelled().IsZero() {
		coverage.cancelled.Add(1)
	}
	switch c.spec.body {
	case bodySeek, bodySeekSlow, bodySeekFails:
		coverage.seekBodies.Add(1)
	case bodySharedSeek:
		coverage.sharedBodies.Add(1)
	case bodyStream:
		coverage.streamBodies.Add(1)
	}
	if c.spec.nested {
		coverage.nested.Add(1)
	}
	coverage.realCalls[r.s.base].Add(1)
	coverage.layered[r.s.layers].Add(1)
	for _, b := range recs {
		coverage.receipts.Add(int64(len(b.receipts)))
		if b.out.redirect != 0 && b.served {
			coverage.redirects.Add(1)
		}
	}
	if len(attempts) > 0 && attempts[len(attempts)-1].Retry && len(c.onCalls) == 1 && c.onCalls[0].Stop == httpretry.StopNotReplayable {
		coverage.rewindsRefused.Add(1)
	}
	e := r.effective(c.spec)
	for _, b := range recs {
		if b.out.body == rbNopClose && b.resp != nil {
			coverage.nopClose.Add(1)
		}
		if _, modelled := r.modelClass(e, b); modelled && b.err != nil && b.bodyErr == nil && r.s.reach {
			if me := r.attemptError(e, b); me.kind == classUnknown && me.err != nil {
				coverage.progress[me.progress].Add(1)
			}
		}
	}
	if !idempotent(c.spec.method) && len(recs) > 1 && !r.effective(c.spec).keyed(recs[0].header) {
		coverage.unsafeRetries.Add(1)
	}
}

// coverageString formats the counts.
func coverageString() string {
	v := &coverage
	parts := []string{
		fmt.Sprintf("%d calls", v.calls.Load()),
		fmt.Sprintf("%d attempts", v.attempts.Load()),
		fmt.Sprintf("%d retries", v.retries.Load()),
		fmt.Sprintf("%d hedges (%d lost)", v.hedges.Load(), v.lost.Load()),
		fmt.Sprintf("%d attempts timed out", v.timedOut.Load()),
		fmt.Sprintf("%d server-set waits", v.serverDelays.Load()),
		fmt.Sprintf("%d responses (%d held through a refused retry, %d bodies read)", v.responses.Load(), v.held.Load(), v.bodiesRead.Load()),
		fmt.Sprintf("%d errors", v.errors.Load()),
		fmt.Sprintf("%d cancelled by the caller", v.cancelled.Load()),
		fmt.Sprintf("%d unkeyed unsafe calls sent again (not processed)", v.unsafeRetries.Load()),
		fmt.Sprintf("%d budget levels checked exactly", v.budgetLevels.Load()),
		fmt.Sprintf("%d breaker openings modelled", v.breakerOpen.Load()),
		fmt.Sprintf("%d unknown errors judged by httptrace progress (%d before a connection, %d on one unwritten, %d written, %d answered)",
			v.progress[0].Load()+v.progress[1].Load()+v.progress[2].Load()+v.progress[3].Load(),
			v.progress[0].Load(), v.progress[1].Load(), v.progress[2].Load(), v.progress[3].Load()),
		fmt.Sprintf("%d attempts' bodies compared as received", v.bodiesChecked.Load()),
		fmt.Sprintf("%d seekable, %d shared-stream and %d live-stream bodies", v.seekBodies.Load(), v.sharedBodies.Load(), v.streamBodies.Load()),
		fmt.Sprintf("%d retries refused for a body that cannot be had again", v.rewindsRefused.Load()),
		fmt.Sprintf("%d panics reached their caller (%s; %d from a hedge's goroutine), %d would have ended the process",
			v.panics.Load(), panicCounts(), v.hedgePanics.Load(), v.panicsLost.Load()),
		fmt.Sprintf("%d responses whose Close does not end a Read", v.nopClose.Load()),
		fmt.Sprintf("%d several-host scenarios with a small table (%d protections kept)", v.multiHost.Load(), v.protected.Load()),
		fmt.Sprintf("%d calls made by PrepareRetry through the Transport", v.nested.Load()),
		fmt.Sprintf("%d scenarios retrying without end as configured (no budget, MaxAttempts past the bound), cancelled at %d attempts", v.unbounded.Load(), maxUpstreamAttempts),
		fmt.Sprintf("%d PrepareRetry counts checked", v.prepared.Load()),
		fmt.Sprintf("%d probes of what is held", v.probes.Load()),
		fmt.Sprintf("%d scenarios of a long pause, its probes and its 24 h bound", v.paceProbes.Load()),
		fmt.Sprintf("%d calls through a real net/http client (%d of them in an http.Client, %d redirects), %d bodies received by its server",
			v.realCalls[baseReal].Load()+v.realCalls[baseClient].Load(), v.realCalls[baseClient].Load(), v.redirects.Load(), v.receipts.Load()),
		fmt.Sprintf("%d calls through a tracing layer, %d through a signer (%d bodies it read through GetBody)",
			v.layered[layersTrace].Load()+v.layered[layersBoth].Load(), v.layered[layersSigner].Load()+v.layered[layersBoth].Load(), v.signed.Load()),
	}
	return strings.Join(parts, ", ")
}

// panicCounts lists the panics that reached their caller, by kind.
func panicCounts() string {
	var parts []string
	for k := panicRoundTrip; k <= panicLast; k++ {
		parts = append(parts, fmt.Sprintf("%s %d", panicNames[k], coverage.panicked[k].Load()))
	}
	return strings.Join(parts, ", ")
}
