package fleet_test

import (
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seedhq/httpretry/fleet"
	"github.com/seedhq/httpretry/fleet/fleettest"
)

// Symptom: bounded's goroutine cancels the command's context right after sending its result, so a caller not yet parked in select sees both ready and may pick ctx.Done(): "no answer within 1s: context canceled" for a reply that came at once, and the Fleet goes down with Redis healthy.
func TestRegressBoundedReportsSpuriousTimeouts(t *testing.T) {
	srv := fleettest.Start(t)
	var log syncBuffer
	a := process(t, srv, fleet.Options{Timeout: time.Second, Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	defer debug.SetGCPercent(debug.SetGCPercent(1)) // the GC preempts goroutines to scan their stacks: constantly
	stop := make(chan struct{})
	var sink sync.Map
	for g := range 4 { // allocation and CPU pressure, as a busy process has: a caller is preempted now and then
		go func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				sink.Store(g, make([]byte, 64<<10))
			}
		}()
	}
	defer close(stop)
	deadline := time.Now().Add(4 * time.Second)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline) && a.Stats().Downs == 0; i++ {
				a.Record("h"+string(rune('a'+g))+":443", i%2 == 0)
			}
		})
	}
	wg.Wait()
	if strings.Contains(log.String(), "context canceled") {
		t.Errorf("a command that was answered counted as a timeout (Downs %d):\n%s", a.Stats().Downs, log.String())
	}
}
