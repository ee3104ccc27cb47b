package invariants

import (
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
)

// A scenario is drawn from a seed: the policy of a Transport, one to three
// calls through it, and what the upstream answers to each attempt of each
// call. It holds no time and no state: run builds and plays it inside a
// synctest bubble, so the same seed gives the same scenario.
type scenario struct {
	seed   uint64
	pol    polSpec
	calls  []*callSpec
	reach  bool // Base calls the request's httptrace hooks as net/http's client does
	logger bool // a Logger is set, and checked for secrets
	panic  panicSpec

	base      int  // what Base is: baseScripted, baseReal, baseClient
	keepAlive bool // a real Base keeps connections alive
	layers    int  // Base's layers: layersNone, layersTrace, layersSigner, layersBoth
	signReads bool // the signer reads the body through GetBody

	paced      string // a pacing scenario (pacing.go): the t of the pause; "" for none
	fuzzed     bool   // the first answer is a fuzzer's (fuzz.go), not the one drawn
	reannounce bool   // ... whose probe's answer announces the pause again

	nHosts    int     // hosts called; 0 or 1: api.example.com alone
	hostLimit int     // SetHostLimit's bound on hosts with state; 0: the default
	opts      Options // how the harness reaches into the Transport
}

const ms = time.Millisecond

// polSpec is the drawn policy.
type polSpec struct {
	maxAttempts    int
	backoff        int
	attemptTimeout time.Duration
	maxRetryAfter  time.Duration
	maxReplay      int64
	keys           int
	attemptHeader  string
	budget         int
	breaker        int
	hedgeDelay     time.Duration
	maxHedges      int
	adaptive       int // 0: fixed Delay; 1: adaptive, 100 samples first; 2: adaptive after 2 samples, bounded
	overload       int
	should         bool // Hints.ShouldRetryHeader = X-Should-Retry
	reset          int  // 0: no ResetHeader, 1: ResetHeader set
	ignoreRL       bool
	classifier     int
	prepare        int
	prepareN       int
	placement      int
}

var backoffs = []struct {
	name string
	s    backoff.Strategy
	max  time.Duration // the longest delay it returns
}{
	{"const0", backoff.Constant(0), 0},
	{"const5ms", backoff.Constant(5 * ms), 5 * ms},
	{"exp2ms", backoff.Exponential{Base: 2 * ms, Cap: 40 * ms, Jitter: backoff.NoJitter}, 40 * ms},
	{"exp3ms-full", backoff.Exponential{Base: 3 * ms, Cap: 50 * ms, Jitter: backoff.FullJitter}, 50 * ms},
	{"default", nil, 3 * time.Second},
	{"decorrelated", backoff.Decorrelated{Base: ms, Cap: 20 * ms}, 20 * ms},
}

const (
	keysDefault = iota
	keysOff
	keysHeader // Keys.Header = X-Request-Key
	keysQuoted
	keysMethods // POST, PATCH, DELETE
	keysNew     // Keys.New of our own
	keysEmpty   // Keys.New returns "": invalid
)

var keysNames = []string{"default", "off", "header", "quoted", "methods", "new", "empty"}

const customKeyHeader = "X-Request-Key"

const (
	budgetDefault = iota
	budgetNone
	budgetRatio
	budgetTiny
	budgetLedger
)

var budgetNames = []string{"default", "none", "ratio", "tiny", "ledger"}

// The small token bucket: odd numbers, so that a cost taken for another is
// seen.
var tinyBucket = httpretry.TokenBucketConfig{Capacity: 10, RetryCost: 4, TimeoutCost: 7, SuccessCredit: 2}

const (
	classifyNone = iota
	classify404
	classifyOdd
)

var classifierNames = []string{"none", "404-transient", "odd"}

// classifiers are the Policy.Classify functions, as functions of what the
// model knows of an outcome: the status (0 for an error) and the error.
var classifiers = []func(status int, err error) httpretry.Class{
	nil,
	func(status int, err error) httpretry.Class {
		if status == http.StatusNotFound {
			return httpretry.ClassTransient
		}
		return httpretry.ClassDefault
	},
	func(status int, err error) httpretry.Class {
		switch {
		case status == http.StatusOK:
			return httpretry.Class(42)
		case status == http.StatusInternalServerError:
			return httpretry.ClassNotProcessed
		case status == http.StatusServiceUnavailable:
			return httpretry.ClassSuccess
		case status == http.StatusNotFound:
			return httpretry.Class(-1)
		case err != nil && errors.Is(err, httpretry.ErrAttemptTimeout):
			return httpretry.ClassFatal
		}
		return httpretry.ClassDefault
	},
}

const (
	prepareNone = iota
	prepareEdit
	prepareRefuse
	prepareCancel
	prepareNested // calls through the same Transport first, as a token refresh does
)

var prepareNames = []string{"none", "edit", "refuse", "cancel", "nested"}

var placementNames = []string{"policy", "host", "wildcard", "host:port", "split", "paths"}

const (
	overloadNone = iota
	overloadThrottle
	overloadLimit
	overloadPace
	overloadPaceFailFast
	overloadAll
)

var overloadNames = []string{"none", "throttle", "limit", "pace", "pace-fail-fast", "all"}

// callSpec is one drawn call.
type callSpec struct {
	idx       int
	method    string
	body      int
	bodyLen   int
	failAt    int // the body breaks after this many bytes; -1: never
	clDelta   int // ContentLength minus the body's length, for a lying request
	clUnknown bool
	callerKey int
	keyLower  bool // the caller sets its key under a lower-case name
	nilHeader bool
	deadline  time.Duration
	cancel    int
	cancelAt  time.Duration
	cancelN   int
	cause     int
	override  int
	start     time.Duration
	script    []*outcome
	host      int  // which host of the scenario: 0 is api.example.com
	form      int  // how the URL writes it
	pathForm  int  // how the URL writes its path: "/cN/pay", "/cN//pay", "/cN/./pay"
	nested    bool // made by PrepareRetry, not by the scenario
	inAttempt bool // ... under the context of the retry it prepares
}

const (
	bodyNone = iota
	bodyNoBody
	bodyGetBody
	bodyOpaque
	bodySlow
	bodyGetBodySlow
	bodyGetBodyFails  // GetBody returns an error
	bodyGetBodyBreaks // every body breaks half-way
	bodyOpaqueBreaks
	bodySeek       // an io.ReadSeekCloser without GetBody
	bodySeekSlow   // the same, 4 bytes every 7 ms
	bodySeekFails  // Seek tells where it is, but cannot move
	bodySharedSeek // GetBody seeks the caller's one stream back to 0 and returns it (azcore)
	bodyStream     // an io.Pipe that a goroutine of the caller's writes, 4 bytes every 7 ms
)

var bodyNames = []string{"none", "NoBody", "GetBody", "opaque", "slow", "GetBody-slow", "GetBody-fails", "GetBody-breaks", "opaque-breaks",
	"seek", "seek-slow", "seek-fails", "shared-seek", "stream"}

const (
	keyNone = iota
	keyStandard
	keyX
	keyCustom
)

var callerKeyHeaders = []string{"", "Idempotency-Key", "X-Idempotency-Key", customKeyHeader}

const (
	cancelNone = iota
	cancelBefore
	cancelAtTime
	cancelAtAttempt // when Base receives attempt cancelN
	cancelAtRetry   // when OnAttempt hears that attempt cancelN will be retried: during the wait
)

var cancelNames = []string{"none", "before", "at", "at-attempt", "at-retry"}

const (
	causeNone = iota
	causeError
	causeUncomparable
)

const (
	overrideNone = iota
	overrideWithoutRetries
	overrideAttempts2
	overrideTimeout
	overrideNoHedge
	overrideBudget // changes a per-host field: invalid unless it changes nothing
	overrideBoth   // WithPolicy(attempts 2) inside WithoutRetries
)

var overrideNames = []string{"none", "WithoutRetries", "attempts=2", "timeout=31ms", "no-hedge", "NewBudget", "both"}

// outcome is what the upstream answers to one attempt.
type outcome struct {
	status  int
	headers []hdr
	body    int
	err     int // index into errKinds; -1 for a response
	broken  int
	delay   time.Duration
	late    bool // answered at once when the attempt's context ends during delay
	raw     bool // status used as is, even where Script would choose another
	stage   int  // how far an error got, as the httptrace hooks tell it (reach only)

	redirect int  // an http.Client's Base: 0, redirectFollowed, redirectRefused
	early    bool // a real server answers without reading the body
}

// The stages an attempt that fails with an error reached, as a Base that
// calls the request's httptrace hooks tells them. The request body is read
// once the header is written.
const (
	stageNone     = iota // failed before any connection: a layer above net/http
	stageConn            // got a connection (GetConn), wrote nothing on it
	stageWritten         // the request was written (WroteHeaders, then the body); no answer began
	stageAnswered        // an answer began (GotFirstResponseByte), then it failed
)

var stageNames = []string{"before-conn", "conn", "written", "answered"}

const (
	brokenNone    = iota
	brokenBoth    // a response and an error
	brokenNeither // neither
)

// hdr is a response header. A date or an epoch is written relative to the
// start of the scenario, when it is played.
type hdr struct {
	name  string
	value string
	kind  int
	off   int64 // seconds from the start, for hdrDate and hdrEpoch
}

const (
	hdrLit = iota
	hdrDate
	hdrEpoch
	hdrFuzz // a fuzzer's value: the model reads it with the public parser only
)

const (
	rbText = iota
	rbEmpty
	rbLarge
	rb64K
	rbEndless
	rbTrickleShort
	rbTrickleLong
	rbBreaks
	rbSlowEndless
	rbNopClose // trickles 10 bytes over 300 ms, and Close does not end a Read (io.NopCloser over a pipe)
)

// largeBody is past the 64 KiB that the Transport drains and keeps.
const largeBody = 72 << 10

var rbNames = []string{"text", "empty", "72KiB", "64KiB", "endless", "trickle-150ms", "trickle-600ms", "breaks", "slow-endless", "nop-close"}

// successAfter is the attempt from which the upstream answers 200 whatever
// the script says, so that no scenario runs for ever.
const successAfter = 64

var enough = &outcome{status: 200, err: -1}

// outcomeFor returns the outcome of attempt n: the script's, its last one
// repeated past its end.
func (c *callSpec) outcomeFor(n int) *outcome {
	if n > successAfter {
		return enough
	}
	return c.script[min(n, len(c.script))-1]
}

// content is the body an outcome's response carries, up to limit bytes.
func (o *outcome) content(limit int) (data string, endless bool) {
	fill := func(n int) string { return strings.Repeat("x", min(n, limit)) }
	if o.redirect != 0 {
		return "redirected", false
	}
	switch o.body {
	case rbText:
		return "body of " + strconv.Itoa(o.status), false
	case rbEmpty:
		return "", false
	case rbLarge:
		return fill(largeBody), false
	case rb64K:
		return fill(64 << 10), false
	case rbEndless, rbSlowEndless:
		return fill(limit), true
	case rbTrickleShort:
		return "abcde", false
	case rbTrickleLong:
		return "abcdefghijklmnopqrst", false
	case rbBreaks:
		return "abc", false
	case rbNopClose:
		return "abcdefghij", false
	}
	panic("unknown body")
}

// holdable reports whether the Transport can drain the body whole into
// memory (below 64 KiB, within 250 ms, without failing), and how long the
// drain takes.
func (o *outcome) holdable() (bool, time.Duration) {
	switch o.body {
	case rbText, rbEmpty:
		return true, 0
	case rbTrickleShort:
		return true, 150 * ms
	}
	return false, 0
}

// build turns o into the Outcome that the Script plays for call c.
func (o *outcome) build(r *run, c *callRun) httpretrytest.Outcome {
	var out httpretrytest.Outcome
	switch {
	case o.broken == brokenBoth:
		status := o.status
		out = httpretrytest.Func(func(req *http.Request) (*http.Response, error) {
			b := &countBody{Reader: strings.NewReader("broken")}
			return &http.Response{StatusCode: status, Header: http.Header{}, Body: b, Request: req},
				errors.New("broken base: a response and an error")
		})
	case o.broken == brokenNeither:
		out = httpretrytest.Func(func(*http.Request) (*http.Response, error) { return nil, nil })
	case o.err >= 0:
		out = httpretrytest.Fail(errKinds[o.err].make(c.rawURL))
	case o.raw:
		status, h := o.status, o.header(r.start)
		content, _ := o.content(0)
		out = httpretrytest.Func(func(req *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: status, Header: h.Clone(), Body: io.NopCloser(strings.NewReader(content)),
				ContentLength: int64(len(content)), Request: req}, nil
		})
	default:
		switch o.body {
		case rbText:
			out = httpretrytest.Respond(o.status, "body of "+strconv.Itoa(o.status))
		case rbEmpty:
			out = httpretrytest.Respond(o.status, "")
		case rbLarge:
			out = httpretrytest.Status(o.status).Filler(largeBody)
		case rb64K:
			out = httpretrytest.Status(o.status).Filler(64 << 10)
		case rbEndless:
			out = httpretrytest.Status(o.status).Filler(1 << 40)
		case rbTrickleShort:
			out = httpretrytest.Respond(o.status, "abcde").Slow(1, 30*ms)
		case rbTrickleLong:
			out = httpretrytest.Respond(o.status, "abcdefghijklmnopqrst").Slow(1, 30*ms)
		case rbBreaks:
			out = httpretrytest.Respond(o.status, "abcdefgh").FailAfter(3, httpretrytest.ConnReset())
		case rbSlowEndless:
			out = httpretrytest.Status(o.status).Filler(1<<40).Slow(16, 10*ms)
		case rbNopClose:
			out = httpretrytest.Respond(o.status, "abcdefghij").Slow(1, 30*ms)
		}
		for k, vs := range o.header(r.start) {
			for _, v := range vs {
				out = out.Header(k, v)
			}
		}
	}
	if o.delay > 0 {
		out = out.After(o.delay)
		if o.late {
			out = out.RespondOnCancel()
		}
	}
	return out
}

// header returns the response header, dates written relative to start.
func (o *outcome) header(start time.Time) http.Header {
	h := http.Header{}
	for _, x := range o.headers {
		h.Add(x.name, x.text(start))
	}
	return h
}

func (x hdr) text(start time.Time) string {
	switch x.kind {
	case hdrDate:
		return start.Add(time.Duration(x.off) * time.Second).UTC().Format(http.TimeFormat)
	case hdrEpoch:
		return strconv.FormatInt(start.Unix()+x.off, 10)
	}
	return x.value
}

// The hostile hint values the generator draws from.
var (
	retryAfters = []hdr{
		{value: "0"}, {value: "1"}, {value: "2"}, {value: "120"}, {value: "-1"}, {value: "1.5"},
		{value: "soon"}, {value: "99999999999999999999"}, {value: "4294967296"}, {value: "4294967297"},
		{value: " 3"}, {value: ""}, {kind: hdrDate, off: 2}, {kind: hdrDate, off: -60}, {kind: hdrDate, off: 7200},
	}
	rateLimits = []string{
		`"default";r=0;t=3`, `"default";r=5;t=30`, `"a";r=0;t=1, "b";r=0;t=4`, `"q";r=0;t=soon`,
		`"q";r=0;t=99999999999999`, `"q";t=2`, `"q";r=0;t=-3`, `"q";r=0;t=0`, `;;=`,
	}
	resets      = []hdr{{value: "2"}, {value: "-5"}, {value: "x"}, {value: "4294967297"}, {kind: hdrEpoch, off: 3}, {kind: hdrEpoch, off: -100}, {value: " 1 "}, {value: "99999999"}, {value: "100000000"}}
	shouldVals  = []string{"true", "false", " TRUE ", "maybe"}
	statusTable = []struct{ code, weight int }{
		{200, 20}, {201, 3}, {204, 2}, {101, 2}, {100, 1}, {103, 1}, {301, 2}, {304, 2},
		{404, 5}, {408, 3}, {409, 4}, {425, 2}, {429, 5}, {500, 5}, {501, 2}, {502, 4}, {503, 10}, {504, 4}, {505, 1},
	}
)

const (
	shouldHeader = "X-Should-Retry"
	resetHeader  = "X-RateLimit-Reset"
)

// gen draws a scenario's parts.
type gen struct{ r *rand.Rand }

func (g gen) chance(p float64) bool { return g.r.Float64() < p }

// weighted returns an index drawn with the given weights.
func (g gen) weighted(ws ...int) int {
	total := 0
	for _, w := range ws {
		total += w
	}
	x := g.r.IntN(total)
	for i, w := range ws {
		if x < w {
			return i
		}
		x -= w
	}
	return len(ws) - 1
}

func pick[T any](g gen, xs ...T) T { return xs[g.r.IntN(len(xs))] }

// newScenario draws the scenario of seed.
func newScenario(seed uint64, o Options) *scenario {
	g := gen{rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))}
	s := &scenario{seed: seed, reach: g.chance(0.5), logger: g.chance(0.15), opts: o}
	s.pol = g.policy()
	s.panic = g.panicSpec()
	g.bases(s)
	n := g.hosts(s)
	if n == 1 && g.chance(0.2) {
		n += 1 + g.r.IntN(2)
	}
	for i := range n {
		c := g.call(i, &s.pol)
		if i > 0 {
			c.start = pick(g, 0, 3*ms, 20*ms, 100*ms, 1500*ms)
			c.host = g.r.IntN(max(s.nHosts, 1))
		}
		c.form = g.weighted(12, 1, 1, 1)
		c.pathForm = g.weighted(8, 1, 1)
		g.forRealNet(s, c)
		s.calls = append(s.calls, c)
	}
	g.paceProbe(s)
	g.nestedCalls(s)
	return s
}

func (g gen) policy() polSpec {
	p := polSpec{
		maxAttempts: pick(g, 0, 0, 1, 2, 3, 3, 5, 1<<30, math.MaxInt),
		backoff:     g.weighted(6, 3, 3, 2, 1, 1),
	}
	p.attemptTimeout = []time.Duration{0, 31 * ms, 151 * ms, 1001 * ms, -1}[g.weighted(5, 2, 2, 1, 1)]
	p.maxRetryAfter = []time.Duration{0, 2 * time.Second, 1}[g.weighted(5, 3, 1)]
	p.maxReplay = []int64{0, 16, -1}[g.weighted(6, 2, 1)]
	p.keys = g.weighted(8, 2, 2, 1, 1, 1, 0)
	if g.chance(0.01) {
		p.keys = keysEmpty
	}
	switch g.weighted(16, 4, 1) {
	case 1:
		p.attemptHeader = "X-Attempt"
	case 2:
		p.attemptHeader = pick(g, "Idempotency-Key", customKeyHeader, "x-idempotency-key")
	}
	p.budget = g.weighted(4, 3, 1, 3, 3)
	p.breaker = g.weighted(10, 2, 2, 1, 1)
	if g.chance(0.3) {
		p.hedgeDelay = pick(g, 10*ms, 40*ms)
		p.maxHedges = pick(g, 0, 1, 2, 1<<30, math.MaxInt)
		p.adaptive = g.weighted(6, 2, 2)
	}
	p.overload = g.weighted(24, 2, 2, 2, 1, 2)
	p.should = g.chance(0.3)
	p.reset = g.weighted(6, 2)
	p.ignoreRL = g.chance(0.15)
	p.classifier = g.weighted(6, 2, 2)
	p.prepare = g.weighted(12, 2, 1, 1, 1)
	p.prepareN = 1 + g.r.IntN(3)
	p.placement = g.weighted(4, 1, 1, 1, 2, 1)
	return p
}

func (g gen) call(i int, p *polSpec) *callSpec {
	c := &callSpec{idx: i, failAt: -1}
	c.method = []string{"GET", "HEAD", "PUT", "DELETE", "POST", "PATCH", ""}[g.weighted(5, 1, 2, 1, 6, 2, 1)]
	c.body = g.weighted(4, 1, 4, 3, 1, 1, 1, 1, 1, 2, 1, 1, 2, 2)
	if c.method == "GET" || c.method == "HEAD" || c.method == "" {
		if g.chance(0.7) {
			c.body = bodyNone
		}
	}
	if p.hedgeDelay > 0 {
		// The Transport serialises the Reads of the caller's body with a
		// mutex held across each Read: a hedge waiting for a slow Read of
		// another attempt waits on it, which inside a bubble is not a
		// durable block, and the fake clock stops.
		switch c.body {
		case bodySlow, bodyStream:
			c.body = bodyOpaque
		case bodyGetBodySlow:
			c.body = bodyGetBody
		case bodySeekSlow:
			c.body = bodySeek
		}
	}
	c.bodyLen = pick(g, 12, 40)
	switch c.body {
	case bodyGetBodyBreaks, bodyOpaqueBreaks:
		c.failAt = g.r.IntN(c.bodyLen)
	}
	if c.body == bodyOpaque && g.chance(0.05) {
		c.clDelta = pick(g, 5, -3)
	}
	c.clUnknown = g.chance(0.2)
	c.callerKey = g.weighted(6, 2, 1, 1)
	c.keyLower = c.callerKey != keyNone && g.chance(0.2)
	c.nilHeader = g.chance(0.01)
	c.deadline = []time.Duration{0, 53 * ms, 307 * ms, 2003 * ms, 30 * time.Second}[g.weighted(5, 1, 2, 2, 1)]
	c.cancel = g.weighted(12, 1, 3, 2, 2)
	c.cancelAt = time.Duration(g.r.Int64N(int64(500*ms))) + 1
	c.cancelN = 1 + g.r.IntN(3)
	c.cause = g.weighted(3, 1, 1)
	c.override = g.weighted(20, 2, 2, 1, 1, 1, 1)
	n := 1 + g.r.IntN(5)
	for range n {
		c.script = append(c.script, g.outcome(p))
	}
	return c
}

func (g gen) outcome(p *polSpec) *outcome {
	o := &outcome{err: -1}
	switch g.weighted(70, 25, 5) {
	case 1:
		o.err = g.weighted(8, 6, 5, 2, 1, 1, 1, 1, 2, 2, 1, 1, 1, 1, 3, 1, 1, 1, 1, 1, 1, 2, 0)
	case 2:
		o.broken = 1 + g.r.IntN(2)
		o.status = pick(g, 200, 503)
	}
	if o.err < 0 && o.broken == brokenNone {
		ws := make([]int, len(statusTable))
		for i, s := range statusTable {
			ws[i] = s.weight
		}
		o.status = statusTable[g.weighted(ws...)].code
		o.body = g.weighted(50, 10, 5, 3, 5, 8, 5, 8, 3, 4)
		if g.chance(0.35) {
			ra := pick(g, retryAfters...)
			ra.name = "Retry-After"
			o.headers = append(o.headers, ra)
			if g.chance(0.1) {
				o.headers = append(o.headers, hdr{name: "Retry-After", value: "3600"})
			}
		}
		if g.chance(0.2) {
			o.headers = append(o.headers, hdr{name: "RateLimit", value: pick(g, rateLimits...)})
			if g.chance(0.2) {
				o.headers = append(o.headers, hdr{name: "RateLimit", value: pick(g, rateLimits...)})
			}
		}
		if g.chance(0.2) {
			rs := pick(g, resets...)
			rs.name = resetHeader
			o.headers = append(o.headers, rs)
		}
		if g.chance(0.25) {
			o.headers = append(o.headers, hdr{name: shouldHeader, value: pick(g, shouldVals...)})
		}
	}
	o.stage = stageAnswered
	if o.err >= 0 || o.broken != brokenNone {
		o.stage = g.weighted(2, 1, 4, 1)
	}
	if o.err >= 0 && errKinds[o.err].name == "signer" {
		o.stage = stageNone
	}
	o.delay = []time.Duration{0, 5 * ms, 45 * ms, 200 * ms, 2 * time.Second}[g.weighted(12, 2, 2, 2, 1)]
	o.late = o.delay > 0 && g.chance(0.3)
	return o
}
