package e2e

import (
	"fmt"
	"maps"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// toxi is a toxiproxy server running in the test process, with its HTTP API
// on a free loopback port and a client of that API.
//
// toxiproxy's own ApiServer.Listen binds a fixed address and never returns,
// so the harness mounts the server's exported handlers on a router of its
// own (the same routes as api.go), served by an httptest.Server it can
// close. Toxics and proxies are then driven through the client package,
// exactly as a toxiproxy in another process would be.
type toxi struct {
	client *toxiclient.Client
	server *toxiproxy.ApiServer
}

var proxySeq atomic.Int64

func startToxiproxy(t testing.TB) *toxi {
	t.Helper()
	metrics := toxiproxy.NewMetricsContainer(prometheus.NewRegistry())
	srv := toxiproxy.NewServer(metrics, zerolog.Nop())
	r := mux.NewRouter()
	r.HandleFunc("/reset", srv.ResetState).Methods("POST")
	r.HandleFunc("/proxies", srv.ProxyIndex).Methods("GET")
	r.HandleFunc("/proxies", srv.ProxyCreate).Methods("POST")
	r.HandleFunc("/populate", srv.Populate).Methods("POST")
	r.HandleFunc("/proxies/{proxy}", srv.ProxyShow).Methods("GET")
	r.HandleFunc("/proxies/{proxy}", srv.ProxyUpdate).Methods("POST")
	r.HandleFunc("/proxies/{proxy}", srv.ProxyDelete).Methods("DELETE")
	r.HandleFunc("/proxies/{proxy}/toxics", srv.ToxicIndex).Methods("GET")
	r.HandleFunc("/proxies/{proxy}/toxics", srv.ToxicCreate).Methods("POST")
	r.HandleFunc("/proxies/{proxy}/toxics/{toxic}", srv.ToxicShow).Methods("GET")
	r.HandleFunc("/proxies/{proxy}/toxics/{toxic}", srv.ToxicUpdate).Methods("POST")
	r.HandleFunc("/proxies/{proxy}/toxics/{toxic}", srv.ToxicDelete).Methods("DELETE")
	r.HandleFunc("/version", srv.Version).Methods("GET")
	api := httptest.NewServer(r)
	t.Cleanup(func() {
		srv.Collection.Clear() // stops every proxy and closes its connections
		api.Close()            // and the API client's idle connections
	})
	return &toxi{client: toxiclient.NewClient(api.URL), server: srv}
}

// proxy creates a proxy on a free loopback port in front of upstream.
func (x *toxi) proxy(t testing.TB, upstream string) *toxiclient.Proxy {
	t.Helper()
	name := fmt.Sprintf("p%d", proxySeq.Add(1))
	p, err := x.client.CreateProxy(name, "127.0.0.1:0", upstream)
	if err != nil {
		t.Fatalf("toxiproxy: creating a proxy to %s: %v", upstream, err)
	}
	t.Cleanup(func() { p.Delete() })
	return p
}

// toxic is one fault: a toxiproxy toxic, or the proxy disabled (type "down").
type toxic struct {
	name, typ, stream string
	toxicity          float32
	attrs             toxiclient.Attributes
}

func (f toxic) String() string {
	switch f.typ {
	case "down":
		return "proxy down"
	case "none":
		return "no fault"
	}
	s := f.typ + " " + f.stream
	for _, k := range slices.Sorted(maps.Keys(f.attrs)) {
		s += fmt.Sprintf(" %s=%v", k, f.attrs[k])
	}
	if f.toxicity != 0 && f.toxicity != 1 {
		s += fmt.Sprintf(" on %.0f%% of connections", f.toxicity*100)
	}
	return s
}

// apply starts the fault on p.
func (f toxic) apply(p *toxiclient.Proxy) error {
	if f.typ == "down" {
		return p.Disable()
	}
	toxicity := f.toxicity
	if toxicity == 0 {
		toxicity = 1
	}
	_, err := p.AddToxic(f.name, f.typ, f.stream, toxicity, f.attrs)
	return err
}

// clear ends the fault on p.
func (f toxic) clear(p *toxiclient.Proxy) error {
	if f.typ == "down" {
		return p.Enable()
	}
	return p.RemoveToxic(f.name)
}
