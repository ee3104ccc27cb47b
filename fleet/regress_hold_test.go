package fleet_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/seedhq/httpretry/fleet"
	"github.com/seedhq/httpretry/fleet/fleettest"
)

// Symptom: a Hold less than 1 µs ahead sends "0" µs; holdScript's ZREMRANGEBYSCORE removes the entry just added, ZRANGE returns nothing, last[2] is nil and the script errors: the Fleet goes down.
func TestRegressHoldUnderAMicrosecondTakesFleetDown(t *testing.T) {
	srv := fleettest.Start(t)
	a := process(t, srv, fleet.Options{})
	for i := range 200 {
		a.Hold(fmt.Sprint("h", i, ":443"), time.Now().Add(time.Microsecond+time.Duration(i%10)*100*time.Nanosecond), false)
		if st := a.Stats(); !st.Up {
			t.Fatalf("after a Hold %v ahead the fleet is down: %+v", time.Microsecond+time.Duration(i%10)*100*time.Nanosecond, st)
		}
	}
}
