package invariants

import (
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/seedhq/httpretry"
)

// The checks of per-host state: budgets, breakers, and (with several
// hosts and a small table) that no protection is lost to other hosts'
// traffic.

// checkLevels checks that every budget is within its bounds.
func (r *run) checkLevels(when string) {
	for _, st := range r.stats() {
		if st.HasBudget && st.BudgetCapacity > 0 && (st.BudgetAvailable < 0 || st.BudgetAvailable > st.BudgetCapacity) {
			r.violate("budget of %s at %v of %v %s", st.Host, st.BudgetAvailable, st.BudgetCapacity, when)
		}
	}
	r.mu.Lock()
	buckets, ratios := r.buckets, r.ratios
	r.mu.Unlock()
	for _, b := range buckets {
		if n := tokens(b); n < 0 || n > tinyBucket.Capacity {
			r.violate("token bucket at %d of %d %s", n, tinyBucket.Capacity, when)
		}
	}
	for _, b := range ratios {
		if avail, capacity := level(b); avail < 0 || avail > capacity {
			r.violate("ratio budget at %v of %v %s", avail, capacity, when)
		}
	}
}

// checkBudget checks what budgets were charged: only retries actually
// sent, and, for a single call, exactly the level the model predicts.
func (r *run) checkBudget(byCall [][]*baseRec) {
	p := &r.s.pol
	// The retry budget pays for retries only: hedges have a budget of
	// their own.
	retries := make([]int, len(r.calls))
	sent := map[string]int{}      // by host: retries sent
	successes := map[string]int{} // by host: calls that succeeded after retries
	made := 0
	for i, c := range r.calls {
		if !c.made() {
			continue
		}
		made++
		c.mu.Lock()
		for _, a := range c.attempts {
			if a.N > 1 && !a.Hedge {
				retries[i]++
			}
		}
		ok := len(c.onCalls) == 1 && c.onCalls[0].Stop == httpretry.StopSuccess
		c.mu.Unlock()
		sent[c.spec.hostKey()] += retries[i]
		if ok && retries[i] > 0 {
			successes[c.spec.hostKey()]++
		}
	}
	r.mu.Lock()
	ledgers := r.ledgers
	r.mu.Unlock()
	byHost := map[string][]*ledger{}
	for _, l := range ledgers {
		byHost[l.host] = append(byHost[l.host], l)
	}
	// With a small table of host state, a host may go without state (no
	// budget charged) or lose state at rest and get a new budget later.
	// So may a host whose state came back to rest, and went unused for a
	// minute (the pacing scenarios span a day).
	bounded := r.s.hostLimit > 0 || r.s.paced != ""
	for host, ls := range byHost {
		if len(ls) > 1 && !bounded {
			r.violate("host %s got %d budgets", host, len(ls))
		}
		charged, succRetry := 0, 0
		for _, l := range ls {
			l.mu.Lock()
			charged += l.allowed - l.refunds
			succRetry += l.succRetry
			l.mu.Unlock()
		}
		if (charged > sent[host] || charged < sent[host] && !bounded) && !r.uncharged(byCall) && !r.panicked() {
			r.violate("budget of %s charged for %d retries, %d were sent", host, charged, sent[host])
		}
		if succRetry > successes[host] || succRetry < successes[host] && !bounded {
			r.violate("budget of %s told of %d successes after retries, there were %d", host, succRetry, successes[host])
		}
	}
	if made != 1 || r.panicked() || (p.budget != budgetDefault && p.budget != budgetTiny && p.budget != budgetLedger) {
		return
	}
	c, recs := r.calls[0], byCall[0]
	if len(c.onCalls) != 1 || c.panicked != "" || len(recs) == 0 {
		return
	}
	cfg := tinyBucket
	if p.budget == budgetDefault {
		cfg = httpretry.TokenBucketConfig{Capacity: 500, RetryCost: 5, TimeoutCost: 10, SuccessCredit: 1}
	}
	cost := func(timeout bool) int {
		if timeout {
			return cfg.TimeoutCost
		}
		return cfg.RetryCost
	}
	// Pair each retry decision with the attempt it sent.
	var decisions []bool // timeout flag of each decision to retry, in order
	hedges := map[int]bool{}
	for _, a := range c.attempts {
		if a.Retry {
			decisions = append(decisions, errors.Is(a.Err, httpretry.ErrAttemptTimeout))
		}
		hedges[a.N] = a.Hedge
	}
	level, lastTimeout, d := cfg.Capacity, false, 0
	for _, b := range recs[1:] {
		if hedges[b.n] {
			continue // paid by the hedge budget
		}
		if d >= len(decisions) {
			r.violate("call0: attempt %d was sent without a decision to retry", b.n)
			return
		}
		level -= cost(decisions[d])
		lastTimeout = decisions[d]
		d++
	}
	stop := c.onCalls[0].Stop
	if stop == httpretry.StopBudget {
		flag := errors.Is(c.attempts[len(c.attempts)-1].Err, httpretry.ErrAttemptTimeout)
		if level >= cost(flag) {
			r.violate("call0: stopped by the budget with %d tokens left, a retry costs %d", level, cost(flag))
		}
	}
	var st *flatStats
	for _, s := range r.stats() {
		if s.Host == r.calls[0].spec.hostKey() {
			st = &s
		}
	}
	if st == nil {
		if level != cfg.Capacity {
			r.violate("call0: retries were charged (level %d) but the host keeps no state", level)
		}
		return
	}
	if stop == httpretry.StopSuccess {
		add := cfg.SuccessCredit
		if retries[0] > 0 {
			add = cost(lastTimeout)
		}
		level = min(level+add, cfg.Capacity)
	}
	coverage.budgetLevels.Add(1)
	if got := int(st.BudgetAvailable); got != level || int(st.BudgetCapacity) != cfg.Capacity {
		r.violate("call0: budget at %d of %v, the model says %d of %d", got, st.BudgetCapacity, level, cfg.Capacity)
	}
}

// uncharged reports whether a retry may have been sent before the host had
// state to charge it to: after an error that a breaker below reported
// (which a classifier may make transient), which is not the host's
// failure and so creates no state.
func (r *run) uncharged(byCall [][]*baseRec) bool {
	for _, recs := range byCall {
		for _, b := range recs {
			if b.out.err >= 0 && errKinds[b.out.err].name == "breaker-below" {
				return true
			}
		}
	}
	return false
}

// checkBreaker checks that no attempt is sent once the breaker has seen
// enough failures to open, when calls do not hedge.
func (r *run) checkBreaker(all []*baseRec) {
	p := &r.s.pol
	if p.breaker == 0 || p.hedgeDelay > 0 || p.overload != overloadNone || r.s.hostLimit > 0 || r.s.base != baseScripted {
		// Hedges, a host with state from its first request, and a host
		// that may go without state for want of room, are not modelled.
		return
	}
	byHost := map[string][]*baseRec{}
	for _, b := range all {
		key := r.calls[b.call].spec.hostKey()
		byHost[key] = append(byHost[key], b)
	}
	for _, recs := range byHost {
		r.checkHostBreaker(recs)
	}
}

// checkHostBreaker checks checkBreaker's rule for the attempts of one
// host.
func (r *run) checkHostBreaker(recs []*baseRec) {
	p := &r.s.pol
	sorted := slices.Clone(recs)
	slices.SortStableFunc(sorted, func(a, b *baseRec) int { return a.end.Compare(b.end) })
	// The host gets state, and its breaker, at its first failure. A call
	// loads the state when it starts, or gets it at its own first failure:
	// until then its successes are not counted.
	consecutive, failures, total := 0, 0, 0
	var opened, stateAt time.Time
	hasState := map[int]bool{}
	openedBy := -1
	for i, b := range sorted {
		if !opened.IsZero() {
			if b.end.Equal(opened) && b.call != openedBy {
				return // another call's answer in the same instant: heard first or not
			}
			break
		}
		if i > 0 && sorted[i-1].end.Equal(b.end) && sorted[i-1].call != b.call {
			return // the order in which the breaker heard them is not defined
		}
		failed, excluded := r.breakerCounts(r.effective(r.calls[b.call].spec), b)
		if excluded {
			continue
		}
		c := r.calls[b.call]
		if !hasState[b.call] && !stateAt.IsZero() {
			// The call loads the state when it starts.
			loads := c.began
			if loads.Equal(stateAt) {
				return // whether the call found the state is not defined
			}
			hasState[b.call] = loads.After(stateAt)
		}
		if failed {
			hasState[b.call] = true
			if stateAt.IsZero() {
				stateAt = b.end
			}
		}
		if !hasState[b.call] {
			continue
		}
		total++
		if failed {
			consecutive++
			failures++
		} else {
			consecutive = 0
		}
		// The trip rules are evaluated when a failure is counted.
		switch {
		case !failed:
		case p.breaker <= 3 && consecutive >= p.breaker,
			p.breaker == 4 && total >= 3 && float64(failures) >= 0.5*float64(total):
			opened, openedBy = b.end, b.call
		}
	}
	if opened.IsZero() {
		return
	}
	coverage.breakerOpen.Add(1)
	for _, b := range recs {
		if b.start.After(opened) {
			r.violate("call%d: attempt %d was sent at %v, after the breaker opened at %v", b.call, b.n, b.start.Sub(r.start), opened.Sub(r.start))
		}
	}
}

// checkProtection checks that no host lost what protects it to the
// traffic of other hosts: the state a host had when its last call ended
// (a budget that is not full, a breaker that is not closed or counted
// failures) is there, as it was, once every call has ended, whatever
// other hosts did meanwhile with a table of state that holds only a few.
func (r *run) checkProtection() {
	if r.s.nHosts <= 1 {
		return
	}
	if r.s.hostLimit > 0 {
		coverage.multiHost.Add(1)
	}
	r.mu.Lock()
	quiets := maps.Clone(r.quiets)
	r.mu.Unlock()
	tokens := r.s.pol.budget == budgetDefault || r.s.pol.budget == budgetTiny || r.s.pol.budget == budgetLedger
	now := time.Now()
	for _, key := range slices.Sorted(maps.Keys(quiets)) {
		q := quiets[key]
		was := q.st
		if !q.found || now.Sub(q.at) >= 10*time.Minute { // idle that long, state may go whatever it holds
			continue
		}
		spent := tokens && was.HasBudget && was.BudgetCapacity > 0 && was.BudgetAvailable < was.BudgetCapacity
		tripped := was.HasBreaker && (was.BreakerState != httpretry.BreakerClosed || was.BreakerFailures > 0)
		if !spent && !tripped {
			continue
		}
		coverage.protected.Add(1)
		is, ok := r.hostStats(key)
		switch {
		case !ok:
			r.violate("%s lost its state (budget %v of %v, breaker %v with %d failures) to other hosts' traffic",
				key, was.BudgetAvailable, was.BudgetCapacity, was.BreakerState, was.BreakerFailures)
		case spent && is.BudgetAvailable != was.BudgetAvailable:
			r.violate("%s's budget went from %v to %v without a call of its own", key, was.BudgetAvailable, is.BudgetAvailable)
		case tripped && (is.BreakerState != was.BreakerState || is.BreakerFailures != was.BreakerFailures ||
			is.BreakerSuccesses != was.BreakerSuccesses || is.ConsecutiveFailures != was.ConsecutiveFailures):
			r.violate("%s's breaker went from %v (%d failures, %d in a row) to %v (%d, %d) without a call of its own",
				key, was.BreakerState, was.BreakerFailures, was.ConsecutiveFailures, is.BreakerState, is.BreakerFailures, is.ConsecutiveFailures)
		}
	}
}

// tokens returns the tokens a budget holds, from the level it reports.
func tokens(b httpretry.Budget) int {
	available, _ := level(b)
	return int(available)
}

// level is the level b reports (see httpretry.Budget), or -1, -1 if it
// reports none.
func level(b httpretry.Budget) (available, capacity float64) {
	l, ok := b.(interface {
		Level() (available, capacity float64)
	})
	if !ok {
		return -1, -1
	}
	return l.Level()
}
