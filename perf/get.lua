-- wrk script: GET /APP/kN, N drawn uniformly at random from 0..KEYS-1 for every request, as
-- percore-load sends its GETs (percore serves the documents perf/compare prepared, the static
-- peers the files <root>/bench/kN, perf/ceiling its fixed answer to any path).
--   PERCORE_BENCH_APP   the first path segment (default bench)
--   PERCORE_BENCH_KEYS  how many keys (default 100)
-- wrk's -H headers (perf/compare's "Connection: close") go on every request.
local app = os.getenv("PERCORE_BENCH_APP") or "bench"
local keys = tonumber(os.getenv("PERCORE_BENCH_KEYS") or "100")
local requests = {}
local threads = 0

-- every thread its own seed: LuaJIT's generator starts alike in every thread's Lua state
function setup(thread)
   threads = threads + 1
   thread:set("id", threads)
end

function init(args)
   math.randomseed(id or 1)
   -- formatted once: a request then costs a table lookup, not a string build
   for k = 0, keys - 1 do
      requests[k + 1] = wrk.format("GET", "/" .. app .. "/k" .. k)
   end
end

function request()
   return requests[math.random(keys)]
end
