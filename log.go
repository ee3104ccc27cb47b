package httpretry

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
)

// observe reports one attempt to the OnAttempt hook and the Logger.
func (t *Transport) observe(ctx context.Context, a *Attempt, budget Budget) {
	if t.OnAttempt != nil {
		t.OnAttempt(*a)
	}
	if t.Logger == nil {
		return
	}
	level := slog.LevelInfo
	switch {
	case a.Stop == StopSuccess || a.Stop == StopHedgeLost:
		level = slog.LevelDebug
	case !a.Retry:
		level = slog.LevelWarn
	}
	if !t.Logger.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 10)
	attrs = append(attrs,
		slog.String("method", methodOf(a.Request.Method)),
		slog.String("url", redactURL(a.Request.URL)),
		slog.Int("attempt", a.N),
	)
	if a.Response != nil {
		attrs = append(attrs, slog.Int("status", a.Response.StatusCode))
	}
	if a.Err != nil {
		attrs = append(attrs, slog.String("error", a.Err.Error()))
	}
	attrs = append(attrs, slog.String("class", a.Class.String()))
	if a.Retry {
		attrs = append(attrs, slog.Duration("delay", a.Delay), slog.String("delay_source", a.DelaySource))
	} else {
		attrs = append(attrs, slog.String("stop", a.Stop.String()))
	}
	if s, ok := budget.(fmt.Stringer); ok {
		attrs = append(attrs, slog.String("budget", s.String()))
	}
	msg := "httpretry: attempt"
	if a.Retry {
		msg = "httpretry: retrying"
	}
	t.Logger.LogAttrs(ctx, level, msg, attrs...)
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
