// Command fleet runs two processes that share one account's quota through
// Redis, against a local API that allows the account 100 requests a
// second (a burst of 10) and answers 429 past it. Each process wants 80
// a second: together they want 160. With the fleet they send about the
// quota between them and collect almost no 429s; with -local (each paces
// alone by the declared rate) they send twice the quota and collect 429s
// for the difference.
//
//	cd examples/fleet && go run .          # needs redis-server installed
//	cd examples/fleet && go run . -local   # the same without the fleet
//
// It starts redis-server itself, on a free loopback port, and the two
// processes as copies of itself.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"
	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/fleet"
)

// summary is what a worker process prints when it is done.
type summary struct {
	Name     string `json:"name"`
	OK       int    `json:"ok"`
	Limited  int    `json:"limited"` // 429s it was answered
	Refused  int    `json:"refused"` // calls httpretry refused without sending (ErrRateLimited)
	Failed   int    `json:"failed"`
	Commands int64  `json:"redis_commands"`
}

func main() {
	local := flag.Bool("local", false, "each process paces alone, without the fleet")
	seconds := flag.Float64("seconds", 5, "how long the processes send")
	flag.Parse()
	if os.Getenv("FLEET_EXAMPLE_WORKER") != "" {
		worker()
		return
	}
	if _, err := run(*local, time.Duration(*seconds*float64(time.Second)), os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run starts redis-server, the API and two workers, and prints what each
// worker and the API saw.
func run(local bool, d time.Duration, out io.Writer) ([]summary, error) {
	addr, stop, err := startRedis()
	if err != nil {
		return nil, err
	}
	defer stop()
	api := newAPI(100, 10)
	srv := httptest.NewServer(api)
	defer srv.Close()

	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	sums := make([]summary, 2)
	errs := make([]error, 2)
	for i := range sums {
		wg.Go(func() {
			cmd := exec.Command(self)
			cmd.Env = append(os.Environ(), "FLEET_EXAMPLE_WORKER=worker-"+strconv.Itoa(i+1),
				"FLEET_EXAMPLE_URL="+srv.URL, "FLEET_EXAMPLE_REDIS="+addr,
				"FLEET_EXAMPLE_LOCAL="+strconv.FormatBool(local), "FLEET_EXAMPLE_SECONDS="+d.String())
			cmd.Stderr = os.Stderr
			b, err := cmd.Output()
			if err == nil {
				err = json.Unmarshal(b, &sums[i])
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("a worker failed: %w", err)
		}
	}
	mode := "with the fleet"
	if local {
		mode = "each process alone (-local)"
	}
	fmt.Fprintf(out, "two processes wanting 80/s each against a quota of 100/s (burst 10) for %v, %s:\n", d, mode)
	for _, s := range sums {
		fmt.Fprintf(out, "  %s: %d answered 200, %d answered 429, %d refused before sending, %d failed, %d Redis commands\n",
			s.Name, s.OK, s.Limited, s.Refused, s.Failed, s.Commands)
	}
	got, limited, span := api.counts()
	fmt.Fprintf(out, "  the API: %d requests in %.1f s, %d answered (%.1f/s), %d answered 429 (%.1f %%)\n",
		got, span.Seconds(), got-limited, float64(got-limited)/math.Max(span.Seconds(), 1e-3), limited, 100*float64(limited)/math.Max(1, float64(got)))
	return sums, nil
}

// worker sends 80 requests a second to the API for the given time, through
// a Transport that shares the account's quota with the fleet (or not),
// and prints its summary.
func worker() {
	name := os.Getenv("FLEET_EXAMPLE_WORKER")
	d, err := time.ParseDuration(os.Getenv("FLEET_EXAMPLE_SECONDS"))
	if err != nil {
		log.Fatal(err)
	}
	t := &httpretry.Transport{Policy: httpretry.Policy{
		MaxAttempts: 1, // this example counts what pacing alone does
		Overload: httpretry.OverloadPolicy{
			Pace:  true,
			Quota: httpretry.Quota{Limit: 100, Per: time.Second, Burst: 10, Key: "account-42"},
		},
	}}
	var f *fleet.Fleet
	if os.Getenv("FLEET_EXAMPLE_LOCAL") != "true" {
		c, err := rueidis.NewClient(fleet.ClientOption(os.Getenv("FLEET_EXAMPLE_REDIS")))
		if err != nil {
			log.Fatal(err)
		}
		defer c.Close()
		if f, err = fleet.New(c, fleet.Options{Namespace: "example", Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))}); err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		t.Fleet = f
	}
	client := &http.Client{Transport: t}
	s := summary{Name: name}
	var mu sync.Mutex
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / 80)
	defer tick.Stop()
	end := time.Now().Add(d)
	for now := range tick.C {
		if now.After(end) {
			break
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", os.Getenv("FLEET_EXAMPLE_URL"), nil)
			resp, err := client.Do(req)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && resp.StatusCode == http.StatusOK:
				s.OK++
			case err == nil && resp.StatusCode == http.StatusTooManyRequests:
				s.Limited++
			case err != nil && strings.Contains(err.Error(), httpretry.ErrRateLimited.Error()):
				s.Refused++
			default:
				s.Failed++
			}
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	if f != nil {
		s.Commands = f.Stats().Commands
	}
	json.NewEncoder(os.Stdout).Encode(s)
}

// api allows rate requests a second, burst at once, and answers 429 with
// Retry-After past it, as Stripe's or GitHub's APIs do.
type api struct {
	mu              sync.Mutex
	rate, burst     float64
	tokens          float64
	filled          time.Time
	got, limitedCnt int
	first, last     time.Time
}

func newAPI(rate, burst float64) *api {
	return &api{rate: rate, burst: burst, tokens: burst, filled: time.Now()}
}

func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	now := time.Now()
	a.tokens = math.Min(a.burst, a.tokens+now.Sub(a.filled).Seconds()*a.rate)
	a.filled = now
	a.got++
	if a.first.IsZero() {
		a.first = now
	}
	a.last = now
	ok := a.tokens >= 1
	if ok {
		a.tokens--
	} else {
		a.limitedCnt++
	}
	a.mu.Unlock()
	if !ok {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	fmt.Fprintln(w, "ok")
}

// counts returns the requests the API got, the ones it answered 429, and
// the time from the first to the last.
func (a *api) counts() (got, limited int, span time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.got, a.limitedCnt, a.last.Sub(a.first)
}

// startRedis starts redis-server on a free loopback port, without
// persistence, and returns its address and how to stop it.
func startRedis() (addr string, stop func(), err error) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return "", nil, fmt.Errorf("this example needs redis-server (apt-get install redis-server): %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr = l.Addr().String()
	l.Close()
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(path, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop = func() { cmd.Process.Kill(); cmd.Wait() }
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err != nil {
			continue
		}
		fmt.Fprint(c, "PING\r\n")
		c.SetReadDeadline(time.Now().Add(time.Second))
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if strings.HasPrefix(line, "+PONG") {
			return addr, stop, nil
		}
	}
	stop()
	return "", nil, fmt.Errorf("redis-server did not answer on %s", addr)
}
