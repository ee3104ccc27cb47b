package e2e

import (
	"net"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	start := time.Now()
	// The runtime opens its network poller on first use and never closes
	// it: open it before any test takes a file-descriptor baseline.
	if ln, err := net.Listen("tcp", "127.0.0.1:0"); err == nil {
		ln.Close()
	}
	goleak.VerifyTestMain(m, append(ignoreInjector, goleak.Cleanup(func(code int) {
		if code == 0 {
			if err := writeReport(time.Since(start)); err != nil {
				os.Stderr.WriteString("e2e: report: " + err.Error() + "\n")
				code = 1
			}
		}
		os.Exit(code)
	}))...)
}

// ignoreInjector leaves toxiproxy's own goroutines out of the leak check:
// see usage for the leak of toxiproxy v2.5.0 that it excuses, and the report
// for how many it left.
var ignoreInjector = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"),
	goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).read"),
	goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).write"),
	goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).RemoveToxic.func1"),
	goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicCollection).chainAddToxic.func1"),
	goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicCollection).chainUpdateToxic.func1"),
	goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicCollection).chainRemoveToxic.func1"),
}
