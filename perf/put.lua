-- wrk script: PUT a document of BYTES 'x's (Content-Type application/octet-stream) to /APP/kN,
-- N drawn uniformly at random from 0..KEYS-1 for every request, as percore-load's PUTs: each one
-- a create or a replace of one of KEYS keys spread over all shards.
--   PERCORE_BENCH_APP         the first path segment (default bench)
--   PERCORE_BENCH_KEYS        how many keys (default 10000)
--   PERCORE_BENCH_BYTES       the body's size (default 16)
--   PERCORE_BENCH_SEQUENTIAL  1: the keys in turn instead (k1, k2, ..., then k0), so that the
--                             first KEYS PUTs of one thread create KEYS documents
-- wrk's -H headers (perf/compare's "Connection: close") go on every request.
local app = os.getenv("PERCORE_BENCH_APP") or "bench"
local keys = tonumber(os.getenv("PERCORE_BENCH_KEYS") or "10000")
local body = string.rep("x", tonumber(os.getenv("PERCORE_BENCH_BYTES") or "16"))
local sequential = os.getenv("PERCORE_BENCH_SEQUENTIAL") == "1"
local requests = {}
local counter = 0
local threads = 0

function setup(thread)
   threads = threads + 1
   thread:set("id", threads)
end

function init(args)
   math.randomseed(id or 1)
   -- wrk.format takes its headers or wrk's, not both: the -H ones are copied in
   local headers = {}
   for name, value in pairs(wrk.headers) do
      headers[name] = value
   end
   headers["Content-Type"] = "application/octet-stream"
   for k = 0, keys - 1 do
      requests[k + 1] = wrk.format("PUT", "/" .. app .. "/k" .. k, headers, body)
   end
end

function request()
   if sequential then
      counter = counter + 1
      return requests[counter % keys + 1]
   end
   return requests[math.random(keys)]
end
