package fleet

import "github.com/redis/rueidis"

// The scripts run in Redis, one round trip each, on Redis's clock (TIME):
// every time they store is Redis's, and every time they return is a
// duration from Redis's now, which the caller adds to its own. So the
// processes' clocks need not agree with each other or with Redis. Redis 7
// replicates a script by its effects, so TIME in a script that writes is
// safe for replicas and the AOF.
//
// Keys, under the namespace ns:
//
//	ns:cool        sorted set: host key → end of its cool-down (µs)
//	ns:open        sorted set: host key → end of its open breaker (µs)
//	ns:fail:KEY    the fleet's failures in a row at KEY, expiring
//	ns:trial:KEY   the process that holds KEY's half-open trial, expiring
//	ns:share:KEY   sorted set: the processes sharing KEY's quota → when their report expires (ms)
//	ns:demand:KEY  hash: each such process → its demand (requests a second)
//	ns:events      the channel: "kind|n|key", n a duration in µs or a count
//
// Every key expires: the sets when their last entry ends, the others by
// their own PX.

// holdScript holds KEYS[1] (ns:cool or ns:open) for ARGV[1] (the host key)
// for ARGV[2] µs from Redis's now, and publishes it on ARGV[3] as kind
// ARGV[4]. A cool-down only lengthens; an open breaker is set as given
// and ends KEYS[2], the trial under way. A cool-down also keeps the
// reports of the processes sharing the key's quota (KEYS[3] and KEYS[4],
// as shareScript has them) alive until ARGV[5] ms past its end: they take
// no turns while it holds them, and at its end they rejoin as the
// processes they were, not one alone that takes the whole quota and
// burst. It returns 1 if it changed anything.
var holdScriptSrc = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local untilUs = now + tonumber(ARGV[2])
local cur = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]) or '0')
if ARGV[4] == 'cool' and cur >= untilUs then return 0 end
redis.call('ZADD', KEYS[1], untilUs, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if #last == 2 then
  redis.call('PEXPIRE', KEYS[1], math.ceil((tonumber(last[2]) - now) / 1000) + 1000)
end
if ARGV[4] == 'cool' and redis.call('TYPE', KEYS[3]).ok == 'zset' then
  local nowMs = math.floor(now / 1000)
  local keep = math.ceil(untilUs / 1000) + tonumber(ARGV[5])
  local ids = redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. nowMs, '(' .. keep)
  for _, id in ipairs(ids) do redis.call('ZADD', KEYS[3], keep, id) end
  if #ids > 0 then
    redis.call('PEXPIRE', KEYS[3], keep - nowMs + tonumber(ARGV[5]))
    redis.call('PEXPIRE', KEYS[4], keep - nowMs + tonumber(ARGV[5]))
  end
end
if ARGV[4] == 'open' then redis.call('DEL', KEYS[2]) end
redis.call('PUBLISH', ARGV[3], ARGV[4] .. '|' .. ARGV[2] .. '|' .. ARGV[1])
return 1
`

// closeScript closes the open breaker ARGV[1] after its trial succeeded:
// it leaves KEYS[1] (ns:open), ends KEYS[2] (the trial) and KEYS[3] (the
// failures), and publishes "close" on ARGV[2].
var closeScriptSrc = `
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2], KEYS[3])
redis.call('PUBLISH', ARGV[2], 'close|0|' .. ARGV[1])
return 1
`

// failScript counts a failure at ARGV[1] in KEYS[1], which expires ARGV[3]
// ms after the last one, and publishes the count on ARGV[2]. It returns
// the count. A value that is not a count starts the run again.
var failScriptSrc = `
local n = redis.pcall('INCR', KEYS[1])
if type(n) ~= 'number' then -- not a count: start again
  redis.call('SET', KEYS[1], 1)
  n = 1
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PUBLISH', ARGV[2], 'fail|' .. n .. '|' .. ARGV[1])
return n
`

// okScript ends the run of failures at ARGV[1] (KEYS[1]) and publishes it.
var okScriptSrc = `
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], 'ok|0|' .. ARGV[1])
return 1
`

// syncScript returns what the fleet holds, as durations from Redis's now:
// {cool, open}, each a flat list of host key and µs left.
var syncScriptSrc = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local out = {}
for i, k in ipairs(KEYS) do
  local list = {}
  local r = redis.call('ZRANGEBYSCORE', k, '(' .. now, '+inf', 'WITHSCORES')
  for j = 1, #r, 2 do
    list[#list + 1] = r[j]
    list[#list + 1] = string.format('%d', tonumber(r[j + 1]) - now)
  end
  out[i] = list
end
return out
`

// shareScript reports this process's demand for a quota and returns its
// share of the quota's rate. KEYS[1] (a sorted set: process → when its
// report expires, ms) and KEYS[2] (a hash: process → its demand, requests
// a second) are the processes sharing the quota; ARGV[1] is this
// process, ARGV[2] its demand, ARGV[3] the quota's rate, ARGV[4] how long
// a report lasts (ms). A process that joins, or reports that expired,
// publish "share" on ARGV[5] for host key ARGV[6], so that the others
// report again at once. The rate is shared max-min fairly: a process that
// wants less than an equal share gets what it wants, the others split
// the rest, and what nobody wants is split equally, so that a process
// whose demand grows has room until its next report. It returns {share,
// processes, collides}, the share as a decimal string, collides 1 when
// this process was not among them and the others' demand and its own
// exceed the rate.
var shareScriptSrc = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[4])
-- A report only lengthens: a cool-down may have kept it past now + ttl.
local score = now + ttl
local old = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]) or '0')
if old > score then score = old end
local new = redis.call('ZADD', KEYS[1], score, ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
for _, id in ipairs(gone) do redis.call('HDEL', KEYS[2], id) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if new == 1 or #gone > 0 then
  redis.call('PUBLISH', ARGV[5], 'share|' .. redis.call('ZCARD', KEYS[1]) .. '|' .. ARGV[6])
end
for _, k in ipairs(KEYS) do -- only lengthened, as the reports are
  if redis.call('PTTL', k) < ttl * 2 then redis.call('PEXPIRE', k, ttl * 2) end
end
local ids = redis.call('ZRANGE', KEYS[1], 0, -1)
local ds = {}
for i, id in ipairs(ids) do
  local d = tonumber(redis.call('HGET', KEYS[2], id) or '0') or 0
  if d < 0 then d = 0 end
  ds[i] = {id, d}
end
table.sort(ds, function(a, b) return a[2] < b[2] end)
local left = tonumber(ARGV[3])
local n = #ds
local others = 0
for _, e in ipairs(ds) do
  if e[1] ~= ARGV[1] then others = others + e[2] end
end
-- A process that joins a quota the others already want whole collides
-- with the turns they queued at their old shares.
local collides = 0
if new == 1 and others + tonumber(ARGV[2]) > tonumber(ARGV[3]) then collides = 1 end
local mine = 0
for i, e in ipairs(ds) do
  local fair = left / (n - i + 1)
  local give = e[2]
  if give > fair then give = fair end
  left = left - give
  if e[1] == ARGV[1] then mine = give end
end
if n > 0 then mine = mine + left / n end
return {string.format('%.17g', mine), n, collides}
`

var (
	holdScript  = rueidis.NewLuaScript(holdScriptSrc)
	closeScript = rueidis.NewLuaScript(closeScriptSrc)
	failScript  = rueidis.NewLuaScript(failScriptSrc)
	okScript    = rueidis.NewLuaScript(okScriptSrc)
	syncScript  = rueidis.NewLuaScript(syncScriptSrc)
	shareScript = rueidis.NewLuaScript(shareScriptSrc)
)

// scriptSources are loaded into Redis at every sync, so that a command
// on the call's path is one EVALSHA, never a NOSCRIPT and a second trip
// (after Redis restarted, its scripts are gone).
var scriptSources = []string{holdScriptSrc, closeScriptSrc, failScriptSrc, okScriptSrc, syncScriptSrc, shareScriptSrc}
