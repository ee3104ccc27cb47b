package redisbench

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// Client kinds:
//
//	goredis       go-redis pool, recommended fleet options
//	goredis-ap    go-redis blocking AutoPipeline face, fleet options
//	goredis-def   go-redis pool, library defaults
//	goredis-ctx   go-redis defaults + ContextTimeoutEnabled
//	rueidis       rueidis auto-pipelining, recommended fleet options
//	rueidis-pool  rueidis DisableAutoPipelining (pooled conns), fleet options
//	rueidis-def   rueidis library defaults
var Kinds = []string{"goredis", "goredis-ap", "goredis-def", "goredis-ctx", "rueidis", "rueidis-pool", "rueidis-def"}

// BenchTimeouts relaxes the fleet's 5 ms socket timeouts for throughput runs on
// a loaded 2-core box so that the numbers measure speed, not timeouts.
var BenchTimeouts = false

func NewFleet(kind, addr string) (Fleet, error) {
	if base, ok := strings.CutSuffix(kind, "-hb"); ok {
		f, err := NewFleet(base, addr)
		if err != nil {
			return nil, err
		}
		return Bounded{f}, nil
	}
	switch kind {
	case "goredis", "goredis-ap", "goredis-tight":
		o := GoRedisFleetOptions(addr)
		if kind == "goredis-tight" {
			o = GoRedisTightOptions(addr)
		}
		if BenchTimeouts {
			o.ReadTimeout, o.WriteTimeout, o.PoolTimeout, o.DialTimeout = time.Second, time.Second, time.Second, time.Second
		}
		return NewGoRedis(kind, o, kind == "goredis-ap")
	case "goredis-def":
		return NewGoRedis(kind, &redis.Options{Addr: addr}, false)
	case "goredis-ctx":
		return NewGoRedis(kind, &redis.Options{Addr: addr, ContextTimeoutEnabled: true}, false)
	case "goredis-csc":
		o := GoRedisFleetOptions(addr)
		o.ClientSideCacheConfig = &redis.ClientSideCacheConfig{MaxEntries: 10000}
		return NewGoRedis(kind, o, false)
	case "rueidis", "rueidis-pool", "rueidis-cwt50":
		o := RueidisFleetOptions(addr)
		o.DisableAutoPipelining = kind == "rueidis-pool"
		if kind == "rueidis-cwt50" {
			o.ConnWriteTimeout = 50 * time.Millisecond
		}
		if BenchTimeouts {
			o.ConnWriteTimeout = time.Second
			o.Dialer.Timeout = time.Second
		}
		return NewRueidis(kind, o)
	case "rueidis-def":
		return NewRueidis(kind, rueidis.ClientOption{InitAddress: []string{addr}})
	}
	return nil, fmt.Errorf("unknown kind %q", kind)
}

// Emit prints one machine-readable result line.
func Emit(fields map[string]any) {
	b, _ := json.Marshal(fields)
	fmt.Fprintf(os.Stdout, "RESULT %s\n", b)
}

// Pct returns the q-quantile (0..1) of ds (sorted copy).
func Pct(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q * float64(len(s)-1))
	return s[i]
}

func Max(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		if d > m {
			m = d
		}
	}
	return m
}

func US(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// DeadAddr returns a loopback address nothing listens on (connection refused).
func DeadAddr() string {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	a := l.Addr().String()
	l.Close()
	return a
}
