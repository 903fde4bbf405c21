-- wrk: POST the AdmissionReview files given after `--`, in turn, on every connection.
-- usage: wrk -t1 -c8 -d10s -s benchmarks/mix.lua URL -- [--unique] a.json b.json ...
-- --unique: every request's pod gets a label of its own (a field the translation reads), so
-- no two pods are alike and the webhook's translation cache never answers.
local bodies = {}
local counter = 0
local unique = false

function init(args)
  local first = 1
  if args[1] == "--unique" then unique = true; first = 2 end
  for i = first, #args do
    local f = assert(io.open(args[i], "rb")); bodies[#bodies + 1] = f:read("*a"); f:close()
  end
end

function request()
  counter = counter + 1
  local body = bodies[(counter % #bodies) + 1]
  if unique then
    body = string.gsub(body, '"labels":{', '"labels":{"bench-seq":"' .. counter .. '",', 1)
  end
  return wrk.format("POST", nil, {["Content-Type"] = "application/json"}, body)
end

function done(summary, latency, requests)
  io.write(string.format(
    'RESULT {"requests":%d,"duration_us":%d,"p50_us":%d,"p99_us":%d,"max_us":%d,' ..
    '"errors":%d,"non2xx":%d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), latency.max,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.errors.status))
end
