package httpretry

import (
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/seedhq/httpretry/backoff"
)

// TestInheritCoversEveryField: inherit is written out field by field, so
// that a reader sees which fields inherit and how; this test fails when a
// field is added to Policy and inherit does not take it from the parent.
// Every field of a zero Policy inherits the parent's, and no field of a
// full Policy is replaced.
func TestInheritCoversEveryField(t *testing.T) {
	t.Parallel()
	full := Policy{
		MaxAttempts: 2, Backoff: backoff.Constant(time.Second), AttemptTimeout: time.Second,
		MaxRetryAfter: time.Second, MaxReplayBytes: 1, ReadBodyBytes: 1, MaxResumes: 1,
		Classify:     func(*http.Request, *http.Response, error) Class { return ClassDefault },
		PrepareRetry: func(Attempt, *http.Request) error { return nil },
		Keys:         KeyPolicy{Quoted: true}, AttemptHeader: "X-Attempt", NewBudget: NoBudget,
		Breaker: BreakerPolicy{ConsecutiveFailures: 1}, Overload: OverloadPolicy{Pace: true},
		Hedge: HedgePolicy{Delay: time.Second}, Hints: HintPolicy{IgnoreRateLimit: true},
		Endpoints: []string{"us.example.com"},
	}
	v := reflect.ValueOf(full)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("set Policy.%s in this test", v.Type().Field(i).Name)
		}
	}
	got := reflect.ValueOf(Policy{}.inherit(full))
	kept := reflect.ValueOf(full.inherit(Policy{MaxAttempts: 9}))
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if got.Field(i).IsZero() {
			t.Errorf("inherit does not take Policy.%s from the parent", name)
		}
		if kept.Field(i).IsZero() {
			t.Errorf("inherit replaced Policy.%s, which the child set", name)
		}
	}
}
