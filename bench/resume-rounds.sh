#!/usr/bin/env bash
# The resume figures of docs/policy.md: BenchmarkResume (uncut, cut every
# 8 MiB) and BenchmarkResumeByHand, in 6 rounds, each case in its own
# process, the order turned each round; per-round ratios, their median and
# range. Run from bench/: ./resume-rounds.sh
set -euo pipefail
bin=$(mktemp)
trap 'rm -f "$bin"' EXIT
go test -c -o "$bin" .
cases=('BenchmarkResume/case=uncut$' 'BenchmarkResume/case=cut-8MiB$' 'BenchmarkResumeByHand$')
names=(uncut cut hand)
for r in 0 1 2 3 4 5; do
	for k in 0 1 2; do
		i=$(((k + r) % 3))
		v=$("$bin" -test.run '^$' -test.bench "${cases[$i]}" -test.benchtime 20x | awk '/MB\/s/ {print $(NF-1)}')
		echo "$r ${names[$i]} $v"
	done
done | awk '
	{ v[$1, $2] = $3; rounds[$1] = 1 }
	END {
		n = 0
		for (r in rounds) {
			n++
			cu[n] = v[r, "cut"] / v[r, "uncut"]; hu[n] = v[r, "hand"] / v[r, "uncut"]; ch[n] = v[r, "cut"] / v[r, "hand"]
			printf "round %d: uncut %.0f MB/s, cut %.0f, by hand %.0f\n", r, v[r, "uncut"], v[r, "cut"], v[r, "hand"]
		}
		summary("cut / uncut", cu, n); summary("by hand / uncut", hu, n); summary("cut / by hand", ch, n)
	}
	function summary(name, a, n,   i, j, t) {
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		printf "%s: median %.2f (%.2f-%.2f)\n", name, (a[int((n + 1) / 2)] + a[int(n / 2) + 1]) / 2, a[1], a[n]
	}'
