package config

// Policy is the data part of an httpretry.Policy, field for field: each
// field carries the Policy field of the same Go name (a tag policy:"Name"
// says otherwise), and an omitted field is that Policy field's zero value, so it
// means what the zero value means there: the default, or in a host's entry,
// inherit. Sections (backoff, keys, budget, breaker, hedge, hints) are
// inherited or replaced as a whole, like the sub-policies. The functions of
// a Policy (Classify, PrepareRetry, Keys.New) have no field: they stay code.
//
// To carry a new Policy field, add a field here, or to the section of its
// sub-policy, with the Policy field's Go name and its json and yaml tags (a
// Duration whose negative Policy value means "no limit" also takes the tag
// policy:",none", so that "none" is accepted for it); TestConfigCoversPolicy
// fails until every Policy field has one or is listed as code.
type Policy struct {
	// MaxAttempts counts tries including the first, hedges included. 0
	// means 4 (or inherit); 1 disables retries.
	MaxAttempts int `json:"max_attempts,omitempty" yaml:"max_attempts,omitempty"`

	// Backoff describes the wait before each retry. The zero value means
	// the default, exponential with full jitter from 100 ms capped at 3 s
	// (or inherit).
	Backoff Backoff `json:"backoff,omitzero" yaml:"backoff,omitempty"`

	// AttemptTimeout bounds each attempt until its response header
	// arrives. "" means no limit (or inherit); "none" means no limit,
	// overriding an inherited one.
	AttemptTimeout Duration `json:"attempt_timeout,omitempty" yaml:"attempt_timeout,omitempty" policy:",none"`

	// MaxRetryAfter is the longest server-requested wait obeyed. "" means
	// 60 s (or inherit).
	MaxRetryAfter Duration `json:"max_retry_after,omitempty" yaml:"max_retry_after,omitempty"`

	// MaxReplayBytes limits how much of a body without GetBody is buffered
	// for replay. 0 means 1 MiB (or inherit); a negative value means never
	// buffer.
	MaxReplayBytes int64 `json:"max_replay_bytes,omitempty" yaml:"max_replay_bytes,omitempty"`
	// ReadBodyBytes reads a response body of at most this many bytes
	// before RoundTrip returns, as part of its attempt. 0 means none (or
	// inherit); a negative value means none, overriding an inherited limit.
	ReadBodyBytes int64 `json:"read_body_bytes,omitempty" yaml:"read_body_bytes,omitempty"`

	// MaxResumes is how many times in a row a GET's response body that
	// breaks after some bytes may be resumed (Range with If-Range); a
	// resume that delivers bytes starts the count afresh. 0 means
	// max_attempts-1 (or inherit); a negative value means never, overriding
	// an inherited value.
	MaxResumes int `json:"max_resumes,omitempty" yaml:"max_resumes,omitempty"`

	// Keys configures idempotency keys. The zero value adds a bare UUIDv4
	// to POST and PUT (or inherits).
	Keys Keys `json:"keys,omitzero" yaml:"keys,omitempty"`

	// AttemptHeader names a request header that carries the attempt
	// number. "" means none (or inherit).
	AttemptHeader string `json:"attempt_header,omitempty" yaml:"attempt_header,omitempty"`

	// Budget is the retry budget of each host, Policy.NewBudget. The zero
	// value means the default token bucket (or inherit). It is per host:
	// not allowed on a key with a path.
	Budget Budget `json:"budget,omitzero" yaml:"budget,omitempty" policy:"NewBudget"`

	// Breaker configures a circuit breaker per host. The zero value means
	// none (or inherit). It is per host: not allowed on a key with a path.
	Breaker Breaker `json:"breaker,omitzero" yaml:"breaker,omitempty"`

	// Overload turns on the overload controls of each host. The zero value
	// turns none on (or inherits). It is per host: not allowed on a key
	// with a path.
	Overload Overload `json:"overload,omitzero" yaml:"overload,omitempty"`

	// Hedge configures hedged attempts. The zero value sends none (or
	// inherits).
	Hedge Hedge `json:"hedge,omitzero" yaml:"hedge,omitempty"`

	// Hints configures the server hints read besides Retry-After. The zero
	// value reads the RateLimit field only (or inherits).
	Hints Hints `json:"hints,omitzero" yaml:"hints,omitempty"`

	// Endpoints names failover endpoints of the host, in order: "host" or
	// "host:port", such as "api.us.example.com". Omitted means none (or
	// inherit); an empty list means none, overriding an inherited one.
	Endpoints []string `json:"endpoints,omitzero" yaml:"endpoints,omitempty"`
}

// Duration is a duration in a config: a string that time.ParseDuration
// reads, such as "250ms", "1.5s" or "2m". "" means the field is omitted. A
// bare number is refused, because encoding/json writes a time.Duration as
// nanoseconds while people write seconds: "60" would be ambiguous. The
// fields that document it also take "none".
type Duration string

// Backoff describes a backoff strategy (see package backoff). The
// zero value is no strategy: the default, or inherit. Once any field is
// set, it describes the whole strategy, and a field left out takes the
// value of backoff.Default(), not the inherited strategy's: shape
// exponential, base 100 ms, factor 2, cap 3 s, full jitter.
type Backoff struct {
	// Shape is "exponential" (backoff.Exponential), "linear"
	// (backoff.Linear), "constant" (base before every retry, a
	// backoff.Linear without step) or "decorrelated"
	// (backoff.Decorrelated). "" means exponential.
	Shape string `json:"shape,omitempty" yaml:"shape,omitempty"`

	// Base is the delay before the first retry, before jitter, and the
	// delay of every retry for the constant shape. "" means 100 ms.
	Base Duration `json:"base,omitempty" yaml:"base,omitempty"`

	// Factor is the exponential shape's growth per retry. 0 means 2.
	Factor float64 `json:"factor,omitempty" yaml:"factor,omitempty"`

	// Step is what the linear shape adds for each further retry. "" means
	// base.
	Step Duration `json:"step,omitempty" yaml:"step,omitempty"`

	// Cap bounds every delay, after jitter. "" means 3 s, except for the
	// constant shape, where it means none; "none" means no cap.
	Cap Duration `json:"cap,omitempty" yaml:"cap,omitempty"`

	// Jitter is "none", "full", "equal" or "percent" (see backoff.Jitter).
	// "" means full, except for the constant shape, where it means none.
	// The decorrelated shape is random already and takes none.
	Jitter string `json:"jitter,omitempty" yaml:"jitter,omitempty"`

	// Percent is the spread of percent jitter, from 0 to 1. 0 means 0.1.
	Percent float64 `json:"percent,omitempty" yaml:"percent,omitempty"`
}

// Keys is the data part of an httpretry.KeyPolicy; its function New stays code.
// The zero value adds a bare UUIDv4 to POST and PUT (or inherits).
type Keys struct {
	// Disabled turns key injection off, even where it would be inherited.
	Disabled bool `json:"disabled,omitempty" yaml:"disabled,omitempty"`

	// Methods lists the methods that get a key. Nil (omitted) means POST
	// and PUT. An empty list survives JSON but not YAML, which drops it:
	// write disabled to add no key.
	Methods []string `json:"methods,omitzero" yaml:"methods,omitempty"`

	// Header names the key's header. "" means Idempotency-Key.
	Header string `json:"header,omitempty" yaml:"header,omitempty"`

	// Quoted sends the key as a structured-field string ("…").
	Quoted bool `json:"quoted,omitempty" yaml:"quoted,omitempty"`
}

// Budget names a retry budget and its numbers. The zero value means
// the default token bucket (or inherit).
type Budget struct {
	// Kind is "token-bucket" (httpretry.NewTokenBucket; "default" is the
	// same), "ratio" (httpretry.NewRatioBudget) or "none"
	// (httpretry.NoBudget). "" means token-bucket. A kind
	// takes only its own numbers.
	Kind string `json:"kind,omitempty" yaml:"kind,omitempty"`

	// Capacity, RetryCost, TimeoutCost and SuccessCredit are the token
	// bucket's (see httpretry.TokenBucketConfig). 0 means 500, 5, 10 and 1.
	Capacity      int `json:"capacity,omitempty" yaml:"capacity,omitempty"`
	RetryCost     int `json:"retry_cost,omitempty" yaml:"retry_cost,omitempty"`
	TimeoutCost   int `json:"timeout_cost,omitempty" yaml:"timeout_cost,omitempty"`
	SuccessCredit int `json:"success_credit,omitempty" yaml:"success_credit,omitempty"`

	// Ratio, Window and MinPerSecond are the ratio budget's (see
	// httpretry.RatioConfig). 0 and "" mean 0.1, 10 s and 1; a negative
	// MinPerSecond means no floor.
	Ratio        float64  `json:"ratio,omitempty" yaml:"ratio,omitempty"`
	Window       Duration `json:"window,omitempty" yaml:"window,omitempty"`
	MinPerSecond float64  `json:"min_per_second,omitempty" yaml:"min_per_second,omitempty"`
}

// Breaker is an httpretry.BreakerPolicy, field for field. The zero value means
// no breaker (or inherit).
type Breaker struct {
	// ConsecutiveFailures opens the breaker after this many failed attempts
	// in a row. 0 means this rule is off.
	ConsecutiveFailures int `json:"consecutive_failures,omitempty" yaml:"consecutive_failures,omitempty"`

	// FailureRatio opens the breaker when failures reach this share (0 to
	// 1) of the attempts in Window. 0 means this rule is off.
	FailureRatio float64 `json:"failure_ratio,omitempty" yaml:"failure_ratio,omitempty"`

	// MinRequests is how many attempts Window must hold before
	// FailureRatio applies. 0 means 20.
	MinRequests int `json:"min_requests,omitempty" yaml:"min_requests,omitempty"`

	// Window is how far back attempts are counted. "" means 10 s.
	Window Duration `json:"window,omitempty" yaml:"window,omitempty"`

	// OpenFor is how long the breaker stays open. "" means 5 s.
	OpenFor Duration `json:"open_for,omitempty" yaml:"open_for,omitempty"`

	// HalfOpenAttempts is how many trial attempts a half-open breaker lets
	// through. 0 means 1.
	HalfOpenAttempts int `json:"half_open_attempts,omitempty" yaml:"half_open_attempts,omitempty"`

	// Disabled means no breaker, even where one would be inherited.
	Disabled bool `json:"disabled,omitempty" yaml:"disabled,omitempty"`
}

// Overload is an httpretry.OverloadPolicy, field for field. The zero value
// turns no control on (or inherits).
type Overload struct {
	// Throttle turns on client-side adaptive throttling.
	Throttle bool `json:"throttle,omitempty" yaml:"throttle,omitempty"`

	// ThrottleK is the multiplier of accepts. 0 means 2; below 1 is
	// invalid.
	ThrottleK float64 `json:"throttle_k,omitempty" yaml:"throttle_k,omitempty"`

	// ThrottleWindow is how far back outcomes are counted. "" means 10 s.
	ThrottleWindow Duration `json:"throttle_window,omitempty" yaml:"throttle_window,omitempty"`

	// Limit turns on the adaptive concurrency limit.
	Limit bool `json:"limit,omitempty" yaml:"limit,omitempty"`

	// LimitMax is the limit a host starts from and grows back to. 0 means
	// 1000.
	LimitMax int `json:"limit_max,omitempty" yaml:"limit_max,omitempty"`

	// LimitMin is the floor of the limit. 0 means 1.
	LimitMin int `json:"limit_min,omitempty" yaml:"limit_min,omitempty"`

	// LimitQueue is how many attempts may wait for a slot. 0 means as many
	// as the limit; negative means none: fail fast.
	LimitQueue int `json:"limit_queue,omitempty" yaml:"limit_queue,omitempty"`

	// Pace turns on pacing by the rate limit the host announces.
	Pace bool `json:"pace,omitempty" yaml:"pace,omitempty"`

	// PaceFailFast refuses at once while the quota is spent instead of
	// waiting for its reset.
	PaceFailFast bool `json:"pace_fail_fast,omitempty" yaml:"pace_fail_fast,omitempty"`

	// Quota declares the host's rate limit (httpretry.Quota). The zero
	// value declares none.
	Quota Quota `json:"quota,omitzero" yaml:"quota,omitempty"`

	// Disabled turns every control off, even where they would be
	// inherited.
	Disabled bool `json:"disabled,omitempty" yaml:"disabled,omitempty"`
}

// Quota is an httpretry.Quota, field for field: limit requests per per,
// burst at once, shared under key.
type Quota struct {
	// Limit is how many requests are allowed per Per. 0 means no quota.
	Limit int `json:"limit,omitempty" yaml:"limit,omitempty"`

	// Per is the period Limit is counted over ("1s", "1m", "1h"). "" means
	// a second.
	Per Duration `json:"per,omitempty" yaml:"per,omitempty"`

	// Burst is how many requests may go at once. 0 means 1.
	Burst int `json:"burst,omitempty" yaml:"burst,omitempty"`

	// Key names a quota several hosts share. "" means the host's own.
	Key string `json:"key,omitempty" yaml:"key,omitempty"`
}

// Hedge is an httpretry.HedgePolicy, field for field. The zero value sends no
// hedges (or inherits).
type Hedge struct {
	// Delay is how long an attempt may go unanswered before a hedge is
	// sent. "" means no hedging.
	Delay Duration `json:"delay,omitempty" yaml:"delay,omitempty"`

	// Adaptive learns the delay from the host's latency (see httpretry.HedgePolicy);
	// Delay is then the delay used until the host has MinSamples samples.
	Adaptive bool `json:"adaptive,omitempty" yaml:"adaptive,omitempty"`

	// Quantile is the latency quantile after which an adaptive hedge is
	// sent, in (0, 1). 0 means 0.95.
	Quantile float64 `json:"quantile,omitempty" yaml:"quantile,omitempty"`

	// MinSamples is how many samples a host needs before its adaptive
	// delay applies. 0 means 100.
	MinSamples int `json:"min_samples,omitempty" yaml:"min_samples,omitempty"`

	// MinDelay and MaxDelay bound the adaptive delay. "" means no bound.
	MinDelay Duration `json:"min_delay,omitempty" yaml:"min_delay,omitempty"`
	MaxDelay Duration `json:"max_delay,omitempty" yaml:"max_delay,omitempty"`

	// MaxHedges is the most attempts sent alongside the first of a round.
	// 0 means 1.
	MaxHedges int `json:"max_hedges,omitempty" yaml:"max_hedges,omitempty"`

	// Disabled means no hedging, even where it would be inherited.
	Disabled bool `json:"disabled,omitempty" yaml:"disabled,omitempty"`
}

// Hints is an httpretry.HintPolicy, field for field, with its reset format by
// name. The zero value reads the RateLimit field only (or inherits).
type Hints struct {
	// ShouldRetryHeader names a response header whose "true" or "false"
	// overrides the classification. "" means none.
	ShouldRetryHeader string `json:"should_retry_header,omitempty" yaml:"should_retry_header,omitempty"`

	// IgnoreRateLimit turns off reading the RateLimit header field.
	IgnoreRateLimit bool `json:"ignore_rate_limit,omitempty" yaml:"ignore_rate_limit,omitempty"`

	// ResetHeader names a legacy rate-limit reset header. "" means none.
	ResetHeader string `json:"reset_header,omitempty" yaml:"reset_header,omitempty"`

	// RemainingHeader names a legacy header counting the requests left
	// before the reset, read with ResetHeader to pace requests. "" means
	// none.
	RemainingHeader string `json:"remaining_header,omitempty" yaml:"remaining_header,omitempty"`
}
