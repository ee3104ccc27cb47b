package httpretry

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// observe reports one attempt to the OnAttempt hook and the Logger.
func (c *callState) observe(ctx context.Context, a *Attempt) {
	t := c.t
	if t.OnAttempt != nil {
		t.OnAttempt(*a)
	}
	if t.Logger == nil {
		return
	}
	// A call that allowed one attempt (WithoutRetries, MaxAttempts 1) and
	// failed exhausted no retries: the caller handles its failure, as
	// without a Transport.
	retriesOff := a.Stop == StopAttempts && c.p.maxAttempts == 1
	level := slog.LevelInfo
	switch {
	case a.Stop == StopSuccess || a.Lost:
		level = slog.LevelDebug
	case !a.Retry && a.Stop != StopNone && !retriesOff:
		level = slog.LevelWarn
	}
	if !t.Logger.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs,
		slog.String("method", methodOf(a.Request.Method)),
		slog.String("url", redactURL(a.Request.URL)),
		slog.Int("attempt", a.N),
	)
	if c.fo != nil {
		attrs = append(attrs, slog.String("endpoint", a.Host)) // which of Policy.Endpoints' hosts it went to
	}
	if a.Hedge {
		attrs = append(attrs, slog.Bool("hedge", true))
	}
	if a.Resume {
		attrs = append(attrs, slog.Bool("resume", true))
	}
	if a.Response != nil {
		attrs = append(attrs, slog.Int("status", a.Response.StatusCode))
	}
	if a.Err != nil {
		attrs = append(attrs, slog.String("error", errorText(a.Err)))
	}
	attrs = append(attrs, slog.String("class", a.Class.String()))
	if a.Duration > 0 {
		attrs = append(attrs, slog.Duration("duration", a.Duration))
	}
	switch {
	case a.Retry:
		attrs = append(attrs, slog.Duration("delay", a.Delay), slog.String("delay_source", a.DelaySource.String()))
	case a.Lost:
		attrs = append(attrs, slog.Bool("lost", true))
	case retriesOff:
		attrs = append(attrs, slog.String("stop", "retries off"))
	case a.Stop != StopNone:
		attrs = append(attrs, slog.String("stop", a.Stop.String()))
	}
	attrs = c.appendBudget(attrs)
	msg := "httpretry: attempt"
	if a.Retry {
		msg = "httpretry: retrying"
	}
	t.Logger.LogAttrs(ctx, level, msg, attrs...)
}

// logRefusal logs an attempt that was not sent: a retry that was decided,
// or the first attempt of a call, which then ends having sent nothing.
func (c *callState) logRefusal(ctx context.Context, r *refusal) {
	if c.t.Logger == nil || !c.t.Logger.Enabled(ctx, slog.LevelWarn) {
		return
	}
	attrs := []slog.Attr{
		slog.String("method", methodOf(c.req.Method)),
		slog.String("url", redactURL(c.req.URL)),
		slog.Int("attempts", c.sent),
		slog.String("stop", r.reason.String()),
		slog.String("error", errorText(r.err)),
	}
	msg := "httpretry: retry not sent"
	if c.sent == 0 {
		msg = "httpretry: request not sent"
	}
	c.t.Logger.LogAttrs(ctx, slog.LevelWarn, msg, c.appendBudget(attrs)...)
}

// panicLogger returns what logs a panic of Base that has no caller left
// to reach: on the goroutine of a hedged attempt abandoned to a faster
// one, or in a discarded response body's Read after the drain stopped
// waiting for it; nil without a Logger.
func (c *callState) panicLogger() func(any) {
	l := c.t.Logger
	if l == nil {
		return nil
	}
	method, url := methodOf(c.req.Method), redactURL(c.req.URL)
	return func(p any) {
		l.LogAttrs(context.Background(), slog.LevelError, "httpretry: Base panicked on an abandoned attempt",
			slog.String("method", method), slog.String("url", url),
			slog.String("panic", redactText(fmt.Sprint(p))))
	}
}

func (c *callState) appendBudget(attrs []slog.Attr) []slog.Attr {
	if c.state != nil {
		if s, ok := c.state.Budget.(fmt.Stringer); ok {
			attrs = append(attrs, slog.String("budget", s.String()))
		}
	}
	return attrs
}

func methodOf(m string) string {
	if m == "" {
		return "GET"
	}
	return m
}

// redactURL keeps scheme, host and path: never userinfo, query or fragment,
// which may hold credentials and tokens.
func redactURL(u *url.URL) string {
	r := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	s := r.String()
	if u.RawQuery != "" {
		s += "?[redacted]"
	}
	return s
}

// errorText returns err's message with every URL in it redacted as
// redactURL does: errors such as *url.Error quote the request's URL, query
// and userinfo included. A panic in the error's Error method is reported,
// not propagated.
func errorText(err error) (s string) {
	defer func() {
		if r := recover(); r != nil {
			s = fmt.Sprintf("httpretry: %T's Error method panicked", err)
		}
	}()
	return redactText(err.Error())
}

// redactText redacts the URLs ("scheme://…") in s, each ending at a space,
// a quote or an angle bracket.
func redactText(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		start := i
		for start > 0 && isSchemeChar(s[start-1]) {
			start--
		}
		end := i + 3
		for end < len(s) && !strings.ContainsRune(" \t\r\n\"'<>`", rune(s[end])) {
			end++
		}
		b.WriteString(s[:start])
		raw := s[start:end]
		if u, err := url.Parse(raw); err == nil && start < i {
			b.WriteString(redactURL(u))
		} else {
			b.WriteString(s[start : i+3])
			b.WriteString("[redacted]")
		}
		s = s[end:]
	}
}

func isSchemeChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'
}

// Attempt describes one attempt that Base saw, and what RoundTrip decided
// after it. Transport.OnAttempt receives one per attempt, hedges included.
type Attempt struct {
	Host     string         // the host's key for per-host state: lower-case "host:port", the scheme's default port filled in
	N        int            // attempt number, 1 for the first
	Request  *http.Request  // the attempt's request as sent: a clone of the caller's, with its idempotency key
	Response *http.Response // the response, nil when Err is set
	Err      error          // the attempt's error, nil when Response is set
	Class    Class          // how the outcome was classified
	Duration time.Duration  // from sending the request to receiving the response header or the error; 0 when not measured (nothing observes attempts and the caller's context has no deadline)
	Hedge    bool           // sent alongside an earlier attempt that had not answered (see HedgePolicy)
	Lost     bool           // cancelled unanswered because another attempt of its round answered first
	Resume   bool           // a request for the rest of a response body whose read broke, sent while the caller reads it (see Policy.MaxResumes)
	Retry    bool           // another attempt follows after Delay
	Delay    time.Duration  // the wait before the next attempt, when Retry
	// DelaySource says where Delay came from, when Retry.
	DelaySource DelaySource
	Stop        StopReason // why the call stopped after this attempt; StopNone when it did not
}

// DelaySource says where the wait before a retry came from.
type DelaySource int

var delayNames = [...]string{"none", "backoff", "retry-after", "ratelimit"}

// String returns the source's name as used in logs and metrics.
func (s DelaySource) String() string {
	if s >= 0 && int(s) < len(delayNames) {
		return delayNames[s]
	}
	return "DelaySource(" + strconv.Itoa(int(s)) + ")"
}

// Call describes one RoundTrip once it has ended, for Transport.OnCall.
type Call struct {
	Host     string         // the host's key, as Attempt.Host; "" for an invalid request
	Request  *http.Request  // the caller's request
	Response *http.Response // what RoundTrip returns; nil when Err is set
	Err      error          // what RoundTrip returns; nil when Response is set
	Attempts int            // attempts Base saw, hedges included
	Hedges   int            // attempts sent as hedges
	Duration time.Duration  // from the start of RoundTrip until it returned
	Stop     StopReason     // why the call stopped
}

const (
	DelayNone       DelaySource = iota // no retry follows
	DelayBackoff                       // the policy's backoff strategy
	DelayRetryAfter                    // the response's Retry-After header
	// DelayRateLimit is a server's announced rate-limit reset: the
	// RateLimit header field's t parameter, or the header named by
	// HintPolicy.ResetHeader, which the policy reads only when set.
	DelayRateLimit
)
