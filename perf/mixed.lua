-- wrk script: GET /APP/kN or PUT a document of BYTES 'x's (application/octet-stream) to it, N
-- drawn uniformly at random from 0..KEYS-1 and then the kind (GET_PERCENT % GETs), for every
-- request, as percore-load --mix get:P,put:Q does.
--   PERCORE_BENCH_APP          the first path segment (default bench)
--   PERCORE_BENCH_KEYS         how many keys (default 1000)
--   PERCORE_BENCH_BYTES        the PUT body's size (default 64)
--   PERCORE_BENCH_GET_PERCENT  the share of GETs (default 90)
-- wrk's -H headers (perf/compare's "Connection: close") go on every request.
local app = os.getenv("PERCORE_BENCH_APP") or "bench"
local keys = tonumber(os.getenv("PERCORE_BENCH_KEYS") or "1000")
local body = string.rep("x", tonumber(os.getenv("PERCORE_BENCH_BYTES") or "64"))
local get_percent = tonumber(os.getenv("PERCORE_BENCH_GET_PERCENT") or "90")
local gets, puts = {}, {}
local threads = 0

function setup(thread)
   threads = threads + 1
   thread:set("id", threads)
end

function init(args)
   math.randomseed(id or 1)
   local headers = {}   -- wrk.format takes its headers or wrk's, not both
   for name, value in pairs(wrk.headers) do
      headers[name] = value
   end
   headers["Content-Type"] = "application/octet-stream"
   for k = 0, keys - 1 do
      local path = "/" .. app .. "/k" .. k
      gets[k + 1] = wrk.format("GET", path)
      puts[k + 1] = wrk.format("PUT", path, headers, body)
   end
end

function request()
   local k = math.random(keys)
   if math.random(100) <= get_percent then
      return gets[k]
   end
   return puts[k]
end
