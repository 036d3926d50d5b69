-- wrk script of perf/compare's `apps` workload: GETs or durable PUTs of one app's documents,
-- optionally with a bearer token, the keys taken in turn (/APP/k0, /APP/k1, ...).
--   PERCORE_APP     the app (default bench)
--   PERCORE_KEYS    how many keys (default 100): the ones perf/compare prepared for GETs
--   PERCORE_METHOD  GET or PUT (default GET)
--   PERCORE_BYTES   the PUT body's size (default 16)
--   PERCORE_AUTH    a token, sent as Authorization: Bearer TOKEN (absent or empty: none); given
--                   in the environment so that it never shows on a command line
local app = os.getenv("PERCORE_APP") or "bench"
local keys = tonumber(os.getenv("PERCORE_KEYS") or "100")
local method = os.getenv("PERCORE_METHOD") or "GET"
local headers = {}
local body = nil
if method == "PUT" then
   body = string.rep("x", tonumber(os.getenv("PERCORE_BYTES") or "16"))
   headers["Content-Type"] = "application/octet-stream"
end
local token = os.getenv("PERCORE_AUTH")
if token and token ~= "" then
   headers["Authorization"] = "Bearer " .. token
end
local counter = 0
request = function()
   counter = counter + 1
   return wrk.format(method, "/" .. app .. "/k" .. (counter % keys), headers, body)
end
