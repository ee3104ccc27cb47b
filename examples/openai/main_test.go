package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A layout is one way of stacking the retry layers.
type layout struct {
	name                  string
	sdkRetries, httpretry bool
}

var (
	sdkOnly     = layout{"the SDK's retries only (its default)", true, false}
	bothLayers  = layout{"both layers on, httpretry's defaults", true, true}
	recommended = layout{"recommended: httpretry only, keys off", false, true}
)

// client returns an OpenAI client for the fake at base stacked as l says,
// with waits of at most 1 ms between retries in either layer (neither
// changes how many requests are sent). The recommended layout is newClient
// over newTransport, as main builds it. keys, if not nil, counts the
// requests sent, under every layer.
func (l layout) client(base string, keys *keyCount) openai.Client {
	var rt http.RoundTripper = http.DefaultTransport
	if keys != nil {
		rt = keys.wrap(rt)
	}
	if l.httpretry {
		t := &httpretry.Transport{Policy: httpretry.Policy{Backoff: backoff.Constant(0)}}
		if l == recommended {
			t = newTransport()
			t.Policy.Backoff = backoff.Constant(0)
		}
		t.Base = rt
		rt = t
	}
	if l == recommended {
		return newClient(base, rt)
	}
	return openai.NewClient(
		option.WithHTTPClient(&http.Client{Transport: rt}),
		// openai-go's defaults (MaxRetries 2: 3 tries), waits aside: the
		// faults' refusals carry retry-after-ms: 1; a lost answer would
		// wait 0.5 s and more.
		option.WithMaxRetryDelay(time.Millisecond),
		option.WithBaseURL(base),
		option.WithAPIKey("test"),
	)
}

// keyCount counts the requests sent, and those with an Idempotency-Key,
// under both retry layers.
type keyCount struct {
	mu          sync.Mutex
	sent, keyed int
}

func (k *keyCount) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		k.mu.Lock()
		k.sent++
		if r.Header.Get("Idempotency-Key") != "" {
			k.keyed++
		}
		k.mu.Unlock()
		return next.RoundTrip(r)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// figures is what one layout did over a run of calls.
type figures struct {
	calls, ok, requests int
	first               int // requests of the first call
	generated           int // completions the service generated (and billed)
}

func (f figures) String() string {
	s := fmt.Sprintf("%d/%d calls succeeded (%.1f %%), %.2f requests per call (%d for the first)",
		f.ok, f.calls, 100*float64(f.ok)/float64(f.calls), float64(f.requests)/float64(f.calls), f.first)
	if f.ok > 0 {
		s += fmt.Sprintf(", %d completions generated: %.3f per successful call, %d not delivered",
			f.generated, float64(f.generated)/float64(f.ok), f.generated-f.ok)
	}
	return s
}

// run makes n chat completions through l against a fresh fake whose faults
// are set by fail, one after the other, so that a seed gives the same
// faults.
func run(t *testing.T, l layout, n int, fail func(*faults)) figures {
	t.Helper()
	srv, base, fake, fl := startFake(7)
	t.Cleanup(srv.Close)
	c := l.client(base, nil)
	fail(fl)
	f := figures{calls: n}
	for i := range n {
		if _, err := complete(context.Background(), c, fmt.Sprintf("question %d", i)); err == nil {
			f.ok++
		}
		if i == 0 {
			f.first = fl.requests()
		}
	}
	f.requests, f.generated = fl.requests(), fake.generated()
	return f
}

// TestFigures measures the figures of docs/sdks.md:
//
//	cd examples/openai && go test -run TestFigures -v
func TestFigures(t *testing.T) {
	t.Parallel()
	layouts := []layout{sdkOnly, bothLayers, recommended}

	t.Run("chat completions, a fifth of requests fail", func(t *testing.T) {
		t.Parallel()
		got := map[layout]figures{}
		for _, l := range layouts {
			got[l] = run(t, l, 200, func(f *faults) { f.set(0.10, 0.10) })
			t.Logf("10 %% 429/503, 10 %% answer lost: %-40s %v", l.name, got[l])
		}
		for _, l := range layouts {
			f := got[l]
			assert.LessOrEqual(t, f.ok, f.generated, "%s: every success is a completion generated", l.name)
			assert.LessOrEqual(t, f.generated, f.requests, "%s: a refusal generates nothing", l.name)
		}
		// Either retrying layer resends a completion whose answer was lost:
		// it is generated again, and billed twice.
		assert.Greater(t, got[sdkOnly].generated, got[sdkOnly].ok, "openai-go resends a POST whose answer was lost")
		assert.Greater(t, got[bothLayers].generated, got[bothLayers].ok, "httpretry resends a keyed POST whose answer was lost")
		assert.Greater(t, got[bothLayers].ok, got[recommended].ok, "the duplicates buy successes")
		// The recommended layout resends refusals only: one completion
		// generated per call, delivered or lost, never two.
		r := got[recommended]
		assert.Equal(t, r.calls, r.generated, "recommended: each call generates one completion")
		assert.Equal(t, r.calls-r.ok, r.generated-r.ok, "recommended: a call fails only by a lost answer")
		assert.Greater(t, r.ok, 160, "recommended: the refusals are retried")
		// Seed 7 and calls one after the other: the same faults every run.
		assert.Equal(t, figures{calls: 200, ok: 198, requests: 265, first: 2, generated: 235}, got[sdkOnly])
		assert.Equal(t, figures{calls: 200, ok: 200, requests: 267, first: 2, generated: 237}, got[bothLayers])
		assert.Equal(t, figures{calls: 200, ok: 169, requests: 229, first: 1, generated: 200}, got[recommended])
	})

	t.Run("chat completions, total outage", func(t *testing.T) {
		t.Parallel()
		got := map[layout]figures{}
		for _, l := range layouts {
			got[l] = run(t, l, 20, func(f *faults) { f.setOutage(true) })
			t.Logf("every request 429/503: %-40s %v", l.name, got[l])
		}
		for _, l := range layouts {
			assert.Zero(t, got[l].ok, l.name)
			assert.Zero(t, got[l].generated, l.name)
		}
		r := got[recommended]
		assert.Equal(t, 4, r.first)
		assert.LessOrEqual(t, r.requests, 4*r.calls, "at most httpretry's MaxAttempts (4) per call")
		assert.Equal(t, 3, got[sdkOnly].first, "openai-go alone: 3 tries (MaxRetries 2)")
		assert.Equal(t, 3*4, got[bothLayers].first, "the layers multiply: 3 openai-go tries of 4 attempts each")
		assert.Equal(t, 3*20, got[sdkOnly].requests)
		assert.Equal(t, 160, got[bothLayers].requests, "12 a call until httpretry's budget is dry")
		assert.Equal(t, 4*20, r.requests)
	})
}

// TestLostAnswer loses the answer of the first chat completion only. The
// recommended client does not send it again: the call fails, one
// completion generated. openai-go alone, or httpretry with its default key
// (which OpenAI ignores), sends it again: the call succeeds, two
// completions generated and billed. Only httpretry's default sends a key.
func TestLostAnswer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		l               layout
		ok              bool
		generated, sent int
		keyed           bool
	}{
		{recommended, false, 1, 1, false},
		{sdkOnly, true, 2, 2, false},
		{bothLayers, true, 2, 2, true},
	} {
		fake := newFakeOpenAI()
		var mu sync.Mutex
		seen := 0
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen++
			first := seen == 1
			mu.Unlock()
			if first {
				fake.ServeHTTP(httptest.NewRecorder(), r)
				dropAfterFirstByte(w)
				return
			}
			fake.ServeHTTP(w, r)
		}))
		keys := &keyCount{}
		text, err := complete(context.Background(), tc.l.client(srv.URL+"/v1/", keys), "once")
		if tc.ok {
			require.NoError(t, err, tc.l.name)
			assert.Equal(t, "You said: once", text)
		} else {
			var re *httpretry.RetryError
			require.ErrorAs(t, err, &re, tc.l.name)
			assert.Equal(t, httpretry.StopNotReplayable, re.Stop)
		}
		assert.Equal(t, tc.generated, fake.generated(), tc.l.name)
		assert.Equal(t, tc.sent, keys.sent, tc.l.name)
		assert.Equal(t, tc.keyed, keys.keyed > 0, tc.l.name)
		srv.Close()
	}
}

// TestRefusals answers every request 429 or 503 with retry-after-ms, as
// OpenAI refuses a request it does not process: the recommended client
// sends the chat completion 4 times, with no key, and nothing is generated.
// Once the refusals stop, a call generates one completion.
func TestRefusals(t *testing.T) {
	t.Parallel()
	srv, base, fake, fl := startFake(7)
	t.Cleanup(srv.Close)
	keys := &keyCount{}
	c := recommended.client(base, keys)
	fl.setOutage(true)
	_, err := complete(context.Background(), c, "refused")
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Contains(t, []int{http.StatusTooManyRequests, http.StatusServiceUnavailable}, apiErr.StatusCode)
	assert.Equal(t, 4, keys.sent)
	assert.Zero(t, fake.generated())

	fl.setOutage(false)
	text, err := complete(context.Background(), c, "hello")
	require.NoError(t, err)
	assert.Equal(t, "You said: hello", text)
	assert.Zero(t, keys.keyed)
	assert.Equal(t, 1, fake.generated())
}

// TestChatCompletion reads the fake's answer through the SDK: the id,
// model, message and usage parse.
func TestChatCompletion(t *testing.T) {
	t.Parallel()
	srv, base, _, _ := startFake(7)
	t.Cleanup(srv.Close)
	c := recommended.client(base, nil)
	resp, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    openai.ChatModelGPT5_4Mini,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("two words")},
	})
	require.NoError(t, err)
	assert.Equal(t, "chatcmpl-1", resp.ID)
	assert.Equal(t, "chat.completion", string(resp.Object))
	assert.Equal(t, openai.ChatModelGPT5_4Mini, resp.Model)
	require.Len(t, resp.Choices, 1)
	assert.Equal(t, "You said: two words", resp.Choices[0].Message.Content)
	assert.Equal(t, "stop", resp.Choices[0].FinishReason)
	assert.Equal(t, int64(2), resp.Usage.PromptTokens)
	assert.Equal(t, int64(4), resp.Usage.CompletionTokens)
	assert.Equal(t, int64(6), resp.Usage.TotalTokens)
}
