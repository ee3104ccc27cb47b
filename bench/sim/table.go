package sim

import (
	"cmp"
	"slices"
	"time"
)

// OverloadTable holds the full-length figures of scenarios D, C2 (on the
// Transport) and E for every arm, one row per run. TestOverloadTable
// computes it inside synctest bubbles and, with HTTPRETRY_SIM_OUT set,
// writes it as JSON for cmd/report, which cannot open a bubble itself.
type OverloadTable struct {
	D  []OverloadRow
	C2 []MetastableRow
	E  []QuotaRow
}

// OverloadRow is one run of scenario D (DefaultOverload).
type OverloadRow struct {
	Arm     string
	Sheds   bool    // the host sheds with 503 what would wait over 0.5 s
	Seed    uint64  // the run's seed
	Load    float64 // requests reaching the host, in units of μ
	Goodput float64 // 2xx answers, in units of μ
	Refused float64 // local refusals per second
}

// MetastableRow is one run of scenario C2 on the Transport
// (DefaultMetastable). Durations are counted from the blip's end; −1
// means never.
type MetastableRow struct {
	Arm          string
	Seed         uint64
	Backlog      float64       // requests queued when the blip cleared
	Limit        time.Duration // backlog/(μ − λ)
	Recovered    time.Duration
	FirstGoodput time.Duration
	Attempts     float64 // attempts per second reaching the host, t = 40–120 s
	Goodput      []int   // per second, from t = 0
}

// QuotaRow is one run of scenario E (DefaultQuota).
type QuotaRow struct {
	Headers  QuotaHeaders
	Arm      string
	Done     int
	TooMany  int
	Makespan time.Duration
}

// Names of QuotaHeaders, for reports.
func (h QuotaHeaders) String() string {
	switch h {
	case LegacyHeaders:
		return "X-RateLimit-Remaining and -Reset"
	case RateLimitField:
		return "RateLimit field"
	case RetryAfterOnly:
		return "Retry-After only"
	}
	return "unknown"
}

// OverloadArms are the arms of scenarios D and C2 in TestOverloadTable:
// no protection, the retry budget, each integrated control, and
// failsafe-go's adaptive policies under the Transport.
func OverloadArms() []Arm {
	return []Arm{NoRetries(), RetriesNoBudget(), RetryBudget(), Throttle(0), Throttle(1.1),
		Limit(false), Limit(true), FailsafeThrottler(), FailsafeLimiter()}
}

// QuotaArms are the arms of scenario E.
func QuotaArms() []Arm { return []Arm{RetriesNoBudget(), RetryBudget(), Pace()} }

// TableSeeds are the run seeds of scenarios D and C2 in TestOverloadTable.
var TableSeeds = []uint64{1, 2, 3}

// NewMetastableRow summarises a run of RunMetastableTransport.
func NewMetastableRow(arm string, seed uint64, c MetastableConfig, r MetastableRun) MetastableRow {
	after := func(t time.Duration) time.Duration {
		if t == 0 {
			return -1
		}
		return t - c.BlipEnd
	}
	return MetastableRow{Arm: arm, Seed: seed, Backlog: r.Backlog, Limit: c.RecoveryLimit(r.Backlog),
		Recovered: after(r.Recovered), FirstGoodput: after(r.FirstGoodput),
		Attempts: MeanRate(r.Sent, 40*time.Second, 120*time.Second), Goodput: r.Goodput}
}

// Sort orders the rows by scenario, arm (in the order of arms) and seed,
// whatever order the parallel runs finished in.
func (t *OverloadTable) Sort(arms []Arm) {
	rank := func(name string) int {
		return slices.IndexFunc(arms, func(a Arm) bool { return a.Name == name })
	}
	slices.SortFunc(t.D, func(a, b OverloadRow) int {
		if a.Sheds != b.Sheds {
			if a.Sheds {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(rank(a.Arm), rank(b.Arm)), cmp.Compare(a.Seed, b.Seed))
	})
	slices.SortFunc(t.C2, func(a, b MetastableRow) int {
		return cmp.Or(cmp.Compare(rank(a.Arm), rank(b.Arm)), cmp.Compare(a.Seed, b.Seed))
	})
	slices.SortFunc(t.E, func(a, b QuotaRow) int {
		return cmp.Or(cmp.Compare(a.Headers, b.Headers), cmp.Compare(rank(a.Arm), rank(b.Arm)))
	})
}
