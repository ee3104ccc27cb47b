package httpretry

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
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
	level := slog.LevelInfo
	switch {
	case a.Stop == StopSuccess || a.Lost:
		level = slog.LevelDebug
	case !a.Retry && a.Stop != StopNone:
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
	if a.Hedge {
		attrs = append(attrs, slog.Bool("hedge", true))
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

func (c *callState) appendBudget(attrs []slog.Attr) []slog.Attr {
	if c.state != nil {
		if s, ok := c.state.budget.(fmt.Stringer); ok {
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
