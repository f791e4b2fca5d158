-- wrk script: POST JSON-RPC bodies with a distinct pre-minted bearer token per request.
--
--   wrk -t1 -c16 -d8s -s bench/lua/pool.lua http://127.0.0.1:PORT -- POOL_FILE PATH SALT
--
-- POOL_FILE: one request per line, "<token>\t<body>". Every thread starts at its own offset
-- and cycles through the file. "@@N@@" in a body becomes SALT-<thread>-<counter>, so bodies
-- that must be unique (SendMessage messageIds) stay unique across threads and runs.
-- A response counts as good only when it is HTTP 200 with a JSON-RPC "result" member;
-- done() prints one line "BENCH_JSON {...}" for the harness.

local threads = {}
local counter = 0

function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end

function init(args)
  pool_file = args[1]
  path = args[2] or "/a2a"
  salt = args[3] or "s"
  tokens = {}
  bodies = {}
  for line in io.lines(pool_file) do
    local tab = line:find("\t", 1, true)
    tokens[#tokens + 1] = "Bearer " .. line:sub(1, tab - 1)
    bodies[#bodies + 1] = line:sub(tab + 1)
  end
  n = #tokens
  idx = (tid * 7919) % n + 1
  bad = 0
  wraps = 0
  unique = (bodies[1]:find("@@N@@", 1, true) ~= nil)
end

function request()
  local body = bodies[idx]
  local headers = {
    ["Authorization"] = tokens[idx],
    ["A2A-Version"] = "1.0",
    ["Content-Type"] = "application/json",
  }
  idx = idx + 1
  if idx > n then
    idx = 1
    wraps = wraps + 1
  end
  if unique then
    counter = counter + 1
    body = body:gsub("@@N@@", salt .. "-" .. tid .. "-" .. counter)
  end
  return wrk.format("POST", path, headers, body)
end

function response(status, headers, body)
  if status ~= 200 or body:find('"result"', 1, true) == nil then
    bad = bad + 1
    if bad <= 3 then
      io.stderr:write("bad response " .. status .. ": " .. body:sub(1, 300) .. "\n")
    end
  end
end

function done(summary, latency, requests)
  local total_bad, total_wraps = 0, 0
  for _, t in ipairs(threads) do
    total_bad = total_bad + t:get("bad")
    total_wraps = total_wraps + t:get("wraps")
  end
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests":%d,"duration_us":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,'
      .. '"mean_us":%.1f,"bad":%d,"socket_errors":%d,"pool_wraps":%d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.mean, total_bad,
    e.connect + e.read + e.write + e.timeout, total_wraps))
end
