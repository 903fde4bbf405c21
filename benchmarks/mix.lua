-- wrk: POST the AdmissionReview files given after `--`, in turn, on every connection.
-- usage: wrk -t1 -c8 -d10s -s benchmarks/mix.lua URL -- [--unique|--new-template] a.json ...
-- --unique: every request's pod gets a label of its own (as a StatefulSet's pods have), a label
--   the translation does not read: the translation cache answers as for repeating pods.
-- --new-template: only the GPU pods with a gpumem, each request's first gpumem a value of its
--   own, so every pod is new to the translation cache and needs a template of its own.
local bodies = {}
local counter = 0
local mode = nil

function init(args)
  local first = 1
  if args[1] == "--unique" or args[1] == "--new-template" then mode = args[1]; first = 2 end
  for i = first, #args do
    local f = assert(io.open(args[i], "rb")); local body = f:read("*a"); f:close()
    if mode ~= "--new-template" or string.find(body, '"nvidia.com/gpumem":"', 1, true) then
      bodies[#bodies + 1] = body
    end
  end
end

function request()
  counter = counter + 1
  local body = bodies[(counter % #bodies) + 1]
  if mode == "--unique" then
    body = string.gsub(body, '"labels":{', '"labels":{"bench-seq":"' .. counter .. '",', 1)
  elseif mode == "--new-template" then
    body = string.gsub(body, '"nvidia.com/gpumem":"%d+"',
      '"nvidia.com/gpumem":"' .. (1000 + counter % 60000) .. '"', 1)
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
