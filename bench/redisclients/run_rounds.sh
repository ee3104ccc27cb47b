#!/usr/bin/env bash
# Interleaved rounds: every configuration is a separate process, and the order of
# configurations rotates each round. Results go to results/<suite>.jsonl.
#   ./run_rounds.sh lat   ROUNDS   (one shared redis-server on a random loopback port)
#   ./run_rounds.sh fault ROUNDS   (each process starts its own redis-server + proxy)
#   ./run_rounds.sh cache ROUNDS
set -u
cd "$(dirname "$0")"
go build -o rb ./cmd/rb || exit 1
suite=$1; rounds=${2:-5}
mkdir -p results; out=results/$suite.jsonl; : > "$out"
rotate() { local r=$1; shift; local a=("$@"); local n=${#a[@]}; for ((i=0;i<n;i++)); do echo "${a[$(((i+r)%n))]}"; done; }
if [ "$suite" = lat ]; then
  port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no --loglevel warning >/dev/null 2>&1 &
  rpid=$!; trap 'kill $rpid' EXIT; sleep 0.5
  cfgs=()
  for k in goredis goredis-ap rueidis rueidis-pool; do
    for op in lease hold fail open; do cfgs+=("lat $k $op 16"); done
    cfgs+=("lat $k lease 64" "pubsub $k - -")
  done
  for ((r=0;r<rounds;r++)); do
    rotate "$r" "${cfgs[@]}" | while read -r m k op c; do
      if [ "$m" = lat ]; then ./rb -mode lat -client "$k" -addr 127.0.0.1:$port -op "$op" -conc "$c" -n 5000 -dur 2s
      else ./rb -mode pubsub -client "$k" -addr 127.0.0.1:$port -n 5000; fi 2>>results/$suite.err | sed -n "s/^RESULT //p" | jq -c --argjson r "$r" '. + {round:$r}' >> "$out"
    done
    echo "round $r done" >&2
  done
elif [ "$suite" = fault ]; then
  kinds=(goredis goredis-tight goredis-def goredis-ctx goredis-ap goredis-hb rueidis rueidis-cwt50 rueidis-def rueidis-pool rueidis-hb)
  for ((r=0;r<rounds;r++)); do
    rotate "$r" "${kinds[@]}" | while read -r k; do
      timeout 300 ./rb -mode fault -client "$k" 2>>results/$suite.err | sed -n "s/^RESULT //p" | jq -c --argjson r "$r" '. + {round:$r}' >> "$out"
      echo "$(date +%T) round $r $k rc=${PIPESTATUS[0]}" >&2
    done
  done
elif [ "$suite" = cache ]; then
  kinds=(goredis rueidis goredis-naive rueidis-naive rueidis-csc goredis-csc)
  for ((r=0;r<rounds;r++)); do
    rotate "$r" "${kinds[@]}" | while read -r k; do
      timeout 120 ./rb -mode cache -client "$k" 2>>results/$suite.err | sed -n "s/^RESULT //p" | jq -c --argjson r "$r" '. + {round:$r}' >> "$out"
    done
    echo "round $r done" >&2
  done
fi
