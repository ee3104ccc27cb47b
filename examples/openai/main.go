// OpenAI runs openai-go v3's chat completions over httpretry against a fake
// OpenAI API served on loopback, behind faults that fail a share of the
// requests, and prints what happened. It needs no network beyond 127.0.0.1.
//
//	cd examples/openai && go run .
//
// openai-go retries on its own (3 tries: MaxRetries 2), POSTs included,
// connection errors included; with httpretry under it as well, the two
// layers multiply. The recommended setup turns openai-go's retries off
// (option.WithMaxRetries(0)), hands httpretry to it as an *http.Client, and
// turns Idempotency-Keys off: OpenAI does not document one, so a key would
// only make httpretry resend a chat completion that may have been generated.
// 429 and 503 are OpenAI's refusals, retried as not processed. A completion
// whose answer was lost is not sent again: a second one would be generated
// and billed, whichever layer sent it. docs/sdks.md has the figures.
package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/seedhq/httpretry"
)

// newClient returns an OpenAI client for the API at baseURL (ending in
// /v1/) whose requests go through rt, with openai-go's own retries off.
func newClient(baseURL string, rt http.RoundTripper) openai.Client {
	return openai.NewClient(
		option.WithHTTPClient(&http.Client{Transport: rt}),
		option.WithMaxRetries(0), // httpretry retries; the default is 2
		option.WithBaseURL(baseURL),
		option.WithAPIKey("test"),
	)
}

// newTransport returns the httpretry Transport for OpenAI.
func newTransport() *httpretry.Transport {
	return &httpretry.Transport{
		Policy: httpretry.Policy{
			// OpenAI does not document Idempotency-Key: a key would make
			// httpretry resend a POST whose completion may have been
			// generated (and billed). Keys off, a POST is sent again only
			// when it was not processed.
			Keys: httpretry.KeyPolicy{Disabled: true},
			// 429 (rate limit) and 503 (overloaded) are OpenAI refusing a
			// request before it generates anything: not processed, so a
			// chat completion is sent again after one.
			Classify: func(_ *http.Request, resp *http.Response, _ error) httpretry.Class {
				if resp != nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) {
					return httpretry.ClassNotProcessed
				}
				return httpretry.ClassDefault
			},
		},
	}
}

// complete asks for one chat completion of prompt and returns its text.
func complete(ctx context.Context, c openai.Client, prompt string) (string, error) {
	resp, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    openai.ChatModelGPT5_4Mini,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
	})
	if err != nil {
		return "", err
	}
	if len(resp.Choices) == 0 {
		return "", fmt.Errorf("chat completion %s has no choices", resp.ID)
	}
	return resp.Choices[0].Message.Content, nil
}

// startFake serves the fake OpenAI API behind faults, whose 503s
// rateLimits turns into OpenAI's 429s and 503s, and returns the base URL
// the client takes.
func startFake(seed uint64) (*httptest.Server, string, *fakeOpenAI, *faults) {
	fake := newFakeOpenAI()
	fl := newFaults(fake, seed)
	srv := httptest.NewServer(&rateLimits{next: fl})
	return srv, srv.URL + "/v1/", fake, fl
}

func main() {
	srv, base, fake, fl := startFake(1)
	defer srv.Close()
	ctx := context.Background()
	rt := newTransport()
	rt.OnAttempt = func(a httpretry.Attempt) {
		if a.Retry || a.N > 1 {
			outcome := "?"
			if a.Err != nil {
				outcome = a.Err.Error()
			} else {
				outcome = a.Response.Status
			}
			fmt.Printf("   attempt %d %s %s -> %s, %s\n", a.N, a.Request.Method, a.Request.URL.Path, outcome, a.Stop)
		}
	}
	c := newClient(base, rt)

	fmt.Println("1. 20 chat completions while 10 % of requests are refused (429 or 503) and 10 % lose their answer")
	fl.set(0.10, 0.10)
	ok := 0
	for i := range 20 {
		if _, err := complete(ctx, c, fmt.Sprintf("question %d", i)); err == nil {
			ok++
		}
	}
	fmt.Printf("   => %d of 20 succeeded, %d completions generated (a lost answer is not sent again: it was generated)\n", ok, fake.generated())

	fl.set(0, 0)
	text, err := complete(ctx, c, "hello")
	fmt.Printf("   a completion without faults: %q, %v\n", text, err)

	fmt.Println("\n2. a chat completion in a total outage")
	fl.setOutage(true)
	before := fl.requests()
	_, err = complete(ctx, c, "anyone there?")
	fmt.Printf("   => %d requests for one call (with openai-go's 3 tries on as well: up to 12)\n   => %v\n", fl.requests()-before, err)
}
