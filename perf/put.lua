-- wrk script: PUT a 16-byte document to a key of its own per request, so every write is a
-- create or a replace of one of `keys` keys spread over all shards.
local counter = 0
local keys = tonumber(os.getenv("PERCORE_BENCH_KEYS") or "10000")
local body = string.rep("x", tonumber(os.getenv("PERCORE_BENCH_BYTES") or "16"))
request = function()
   counter = counter + 1
   return wrk.format("PUT", "/bench/k" .. (counter % keys), {["Content-Type"] = "text/plain"}, body)
end
