-- wrk script: DEPTH GETs of /APP/kN sent back to back on a connection (N uniformly at random from
-- 0..KEYS-1 for each), as percore-load --pipeline DEPTH keeps DEPTH requests in flight. This is
-- wrk's documented way to pipeline (its scripts/pipeline.lua): `init` builds the requests
-- concatenated, `request` returns them, and wrk sends the next batch once all DEPTH answers of
-- the last one are in (percore-load sends a new request for every answer instead).
--   PERCORE_BENCH_APP       the first path segment (default bench)
--   PERCORE_BENCH_KEYS      how many keys (default 100)
--   PERCORE_BENCH_PIPELINE  DEPTH (default 16)
local app = os.getenv("PERCORE_BENCH_APP") or "bench"
local keys = tonumber(os.getenv("PERCORE_BENCH_KEYS") or "100")
local depth = tonumber(os.getenv("PERCORE_BENCH_PIPELINE") or "16")
local batches = {}
local threads = 0

function setup(thread)
   threads = threads + 1
   thread:set("id", threads)
end

function init(args)
   math.randomseed(id or 1)
   -- as many batches as keys, each of DEPTH random keys: spread like percore-load's, built once
   for b = 1, keys do
      local r = {}
      for i = 1, depth do
         r[i] = wrk.format("GET", "/" .. app .. "/k" .. (math.random(keys) - 1))
      end
      batches[b] = table.concat(r)
   end
end

function request()
   return batches[math.random(keys)]
end
