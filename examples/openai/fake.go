package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// fakeOpenAI serves as much of OpenAI's API as this example calls: POST
// /v1/chat/completions answers a chat.completion whose message echoes the
// last message sent. Every request that reaches it is one completion
// generated, and billed, whether or not its answer reaches the caller.
// Errors are OpenAI's JSON: {"error": {"message", "type", "code"}}.
type fakeOpenAI struct {
	mu          sync.Mutex
	generations int
}

func newFakeOpenAI() *fakeOpenAI { return &fakeOpenAI{} }

// generated returns how many completions were generated.
func (s *fakeOpenAI) generated() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.generations
}

type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
}

func (s *fakeOpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		apiError(w, http.StatusNotFound, "invalid_request_error", "unknown_url", fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path))
		return
	}
	var req chatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model == "" || len(req.Messages) == 0 {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "invalid_body", "a chat completion needs a model and messages")
		return
	}
	s.mu.Lock()
	s.generations++
	n := s.generations
	s.mu.Unlock()

	prompt := req.Messages[len(req.Messages)-1].Content
	content := "You said: " + prompt
	promptTokens, completionTokens := len(strings.Fields(prompt)), len(strings.Fields(content))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Request-Id", fmt.Sprintf("req_%d", n))
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id":      fmt.Sprintf("chatcmpl-%d", n),
		"object":  "chat.completion",
		"created": 1764633600 + n,
		"model":   req.Model,
		"choices": []map[string]any{{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": content, "refusal": nil},
			"logprobs":      nil,
			"finish_reason": "stop",
		}},
		"usage": map[string]any{
			"prompt_tokens":     promptTokens,
			"completion_tokens": completionTokens,
			"total_tokens":      promptTokens + completionTokens,
		},
	})
}

func apiError(w http.ResponseWriter, status int, typ, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code},
	})
}

// rateLimits stands in front of faults and gives its 503s OpenAI's shape:
// every other one becomes a 429 rate_limit_exceeded, and each carries
// retry-after-ms: 1, which openai-go obeys (so its waits are 1 ms here, as
// httpretry's are in the tests). Neither status reaches the service: both
// are refusals, nothing is generated.
type rateLimits struct {
	next http.Handler

	mu      sync.Mutex
	refused int
}

func (g *rateLimits) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.next.ServeHTTP(&refusalWriter{ResponseWriter: w, g: g}, r)
}

type refusalWriter struct {
	http.ResponseWriter
	g       *rateLimits
	replace bool // the 503's plain-text body is replaced by an OpenAI error
}

func (rw *refusalWriter) WriteHeader(code int) {
	if code != http.StatusServiceUnavailable {
		rw.ResponseWriter.WriteHeader(code)
		return
	}
	rw.g.mu.Lock()
	rw.g.refused++
	limited := rw.g.refused%2 == 0
	rw.g.mu.Unlock()
	rw.replace = true
	h := rw.Header()
	h.Set("retry-after-ms", "1")
	h.Del("X-Content-Type-Options")
	if limited {
		apiError(rw.ResponseWriter, http.StatusTooManyRequests, "requests", "rate_limit_exceeded", "Rate limit reached for requests")
		return
	}
	apiError(rw.ResponseWriter, http.StatusServiceUnavailable, "server_error", "overloaded", "The engine is currently overloaded, please try again later")
}

func (rw *refusalWriter) Write(b []byte) (int, error) {
	if rw.replace {
		return len(b), nil
	}
	return rw.ResponseWriter.Write(b)
}

// Unwrap lets faults hijack the connection through http.ResponseController.
func (rw *refusalWriter) Unwrap() http.ResponseWriter { return rw.ResponseWriter }
