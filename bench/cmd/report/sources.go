package main

import (
	"fmt"
	"strings"
)

// sources lists the public sources the simulations reproduce or compare
// with, and the figures taken from each; performance.md carries them so
// that it stands on its own.
// brookerSimulator is the simulator behind Brooker's 2015 figures, at the
// commit that produced them.
const brookerSimulator = "https://github.com/aws-samples/aws-arch-backoff-simulator/blob/66cb169277051eea207dbef8c7f71767fe6af144/src/backoff_simulator.py"

var sources = []struct{ cite, numbers string }{
	{"Marc Brooker, \"Exponential Backoff And Jitter\", AWS Architecture Blog, March 2015, " +
		"https://aws.amazon.com/blogs/architecture/exponential-backoff-and-jitter/; its simulator, " + brookerSimulator,
		"scenario A's model (base 5 ms, cap 2 s, |N(10 ms, 2 ms)| per message, 4 messages per attempt, clients " +
			"10…190, 100 runs per point) and its reference numbers, obtained by running that file (section 2); the " +
			"post's claims checked in section 2, among them \"reduced our call count by more than half\" at 100 clients"},
	{"AWS Builders' Library, \"Timeouts, retries, and backoff with jitter\", " +
		"https://aws.amazon.com/builders-library/timeouts-retries-and-backoff-with-jitter/",
		"the herd of scenario B; the retry token bucket of the AWS SDKs"},
	{"Marc Brooker, \"Fixing retries with token buckets and circuit breakers\", 2022-02-28, " +
		"https://brooker.co.za/blog/2022/02/28/retries.html; simulator " +
		"https://github.com/mbrooker/simulator_example/tree/7aa858b9e5d84c96372dda664ab6994057b5e7b6/retry_sim",
		"scenario C's open loop: 100 clients × 10 requests/s (Poisson), network delay exponential with mean 10 ms; " +
			"N retries do 1 + N times the work at 100 % failure"},
	{"Nathan Bronson, Abutalib Aghayev, Aleksey Charapko, Timothy Zhu, \"Metastable Failures in Distributed " +
		"Systems\", HotOS 2021, https://sigops.org/s/conferences/hotos/2021/papers/hotos21-s11-bronson.pdf",
		"§2.1, scenario C2: capacity 300 queries/s, load 280/s, 1 s timeout, one retry, a 10 s outage; 560 " +
			"queries/s sustained with no goodput; recovery below 150/s of load or 20/s of retries"},
	{"Lexiang Huang et al., \"Metastable Failures in the Wild\", OSDI 2022, " +
		"https://www.usenix.org/conference/osdi22/presentation/huang-lexiang",
		"retries sustain more than half of the 22 metastable failures studied; Theorem 3: no metastable " +
			"failure while load amplification times any loss of capacity stays below capacity ÷ normal load (μ/λ)"},
}

func sourcesSection(b *strings.Builder) {
	fmt.Fprintf(b, "## Sources\n\n")
	for _, s := range sources {
		fmt.Fprintf(b, "- %s. Used for: %s.\n", s.cite, s.numbers)
	}
	fmt.Fprintf(b, "\n")
}
