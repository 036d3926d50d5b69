-- wrk script: etcd v3's JSON gateway as percore-load --style etcd speaks it. For every request a
-- key APP/kN, N uniformly at random from 0..KEYS-1, then the kind (GET_PERCENT % reads):
--   a read:  POST /v3/kv/range {"key":"<base64 of APP/kN>"}
--   a write: POST /v3/kv/put   {"key":"<base64 of APP/kN>","value":"<base64 of BYTES 'x's>"}
-- both with Content-Type application/json.
--   PERCORE_BENCH_APP          the key's first segment (default bench)
--   PERCORE_BENCH_KEYS         how many keys (default 10000)
--   PERCORE_BENCH_BYTES        the value's size before base64 (default 16)
--   PERCORE_BENCH_GET_PERCENT  the share of reads (default 0)
-- wrk's -H headers (perf/compare's "Connection: close") go on every request.
local app = os.getenv("PERCORE_BENCH_APP") or "bench"
local keys = tonumber(os.getenv("PERCORE_BENCH_KEYS") or "10000")
local value = string.rep("x", tonumber(os.getenv("PERCORE_BENCH_BYTES") or "16"))
local get_percent = tonumber(os.getenv("PERCORE_BENCH_GET_PERCENT") or "0")
local ranges, puts = {}, {}
local threads = 0

-- standard base64 (RFC 4648 §4, '=' padding), as perf/load/base64.hpp
local alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local function base64(s)
   local out = {}
   for i = 1, #s, 3 do
      local a, b, c = s:byte(i, i + 2)
      local n = a * 65536 + (b or 0) * 256 + (c or 0)
      local q = {}
      for j = 1, 4 do
         local v = math.floor(n / 2 ^ (6 * (4 - j))) % 64
         q[j] = alphabet:sub(v + 1, v + 1)
      end
      if not c then q[4] = "=" end
      if not b then q[3] = "=" end
      out[#out + 1] = table.concat(q)
   end
   return table.concat(out)
end

function setup(thread)
   threads = threads + 1
   thread:set("id", threads)
end

function init(args)
   math.randomseed(id or 1)
   local headers = {}   -- wrk.format takes its headers or wrk's, not both
   for name, v in pairs(wrk.headers) do
      headers[name] = v
   end
   headers["Content-Type"] = "application/json"
   local encoded_value = base64(value)
   for k = 0, keys - 1 do
      local key = base64(app .. "/k" .. k)
      ranges[k + 1] = wrk.format("POST", "/v3/kv/range", headers, '{"key":"' .. key .. '"}')
      puts[k + 1] = wrk.format("POST", "/v3/kv/put", headers,
                               '{"key":"' .. key .. '","value":"' .. encoded_value .. '"}')
   end
end

function request()
   local k = math.random(keys)
   if math.random(100) <= get_percent then
      return ranges[k]
   end
   return puts[k]
end
