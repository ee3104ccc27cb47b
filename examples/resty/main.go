// Resty runs go-resty/resty over httpretry against a local flaky API and
// prints every attempt. It needs no network beyond 127.0.0.1.
//
//	cd examples/resty && go run .
//
// resty builds the requests and decodes the answers; httpretry, installed
// with resty's SetTransport, decides what is retried and when. resty's own
// retries stay off (SetRetryCount(0), its default): with both on, every
// resty retry would run httpretry's attempts again, and neither would know
// about the other's waits, keys or budget.
package main

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/go-resty/resty/v2"
	"github.com/seedhq/httpretry"
)

// newClient returns a resty client for the API at baseURL whose requests
// go through rt.
func newClient(baseURL string, rt *httpretry.Transport) *resty.Client {
	return resty.New().
		SetBaseURL(baseURL).
		SetTransport(rt).            // httpretry does the retrying, attempt by attempt
		SetRetryCount(0).            // resty's retries off (the default, said out loud)
		SetTimeout(30 * time.Second) // bounds a whole call, retries and waits included
}

// Order is what the API returns.
type Order struct {
	ID     int    `json:"id"`
	Status string `json:"status"`
}

func main() {
	api := newFlakyAPI()
	srv := httptest.NewServer(api)
	defer srv.Close()
	client := newClient(srv.URL, &httpretry.Transport{OnAttempt: printAttempt})

	fmt.Println("1. GET /orders/7: the API answers 503 twice, then the order")
	var order Order
	resp, err := client.R().SetResult(&order).Get("/orders/7")
	report(resp, err, func() string { return fmt.Sprintf("order %d is %s", order.ID, order.Status) })

	fmt.Println("\n2. POST /orders: the order is created, then the answer is lost (502);")
	fmt.Println("   httpretry adds an Idempotency-Key, so the retry is recognised")
	var created Order
	resp, err = client.R().SetBody(map[string]any{"item": "widget", "quantity": 3}).SetResult(&created).Post("/orders")
	report(resp, err, func() string {
		return fmt.Sprintf("order %d %s; orders the API holds: %d", created.ID, created.Status, api.orderCount())
	})
}

func report(resp *resty.Response, err error, ok func() string) {
	switch {
	case err != nil:
		fmt.Printf("   => error: %v\n", err)
	case resp.IsError():
		fmt.Printf("   => %s: %s\n", resp.Status(), strings.TrimSpace(resp.String()))
	default:
		fmt.Printf("   => %s\n", ok())
	}
}

func printAttempt(a httpretry.Attempt) {
	outcome := ""
	if a.Err != nil {
		outcome = a.Err.Error()
	} else {
		outcome = a.Response.Status
	}
	next := "done: " + a.Stop.String()
	if a.Retry {
		next = fmt.Sprintf("retry in %v (%s)", a.Delay.Round(time.Millisecond), a.DelaySource)
	}
	fmt.Printf("   attempt %d %s %s -> %s [%s] %s\n", a.N, a.Request.Method, a.Request.URL.Path, outcome, a.Class, next)
}
