-- wrk: POST the AdmissionReview files given after `--`, in turn, on every connection.
-- usage: wrk -t1 -c8 -d10s -s benchmarks/mix.lua URL -- a.json b.json ...
local bodies = {}
local counter = 0

function init(args)
  for i, path in ipairs(args) do
    local f = assert(io.open(path, "rb")); bodies[i] = f:read("*a"); f:close()
  end
end

function request()
  counter = counter + 1
  local body = bodies[(counter % #bodies) + 1]
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
