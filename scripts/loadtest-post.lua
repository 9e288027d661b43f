-- wrk script of scripts/loadtest.sh: every request POSTs a new activity (the service assigns
-- its id). Start dates are distinct seconds (per thread, cycling through 20,000 of them), all
-- after the seeded history so the GET window's answer stays the same; a real client does not
-- send one date over and over. The requests are formatted once, in init: formatting each one
-- in Lua made wrk, not the service, the bottleneck.
local requests = {}
local count = 20000
local next_request = 0
local threads = 0
local base = 1780000000  -- 2026-05-28, after the history's end (2026-01-01)

function setup(thread)
  thread:set("first", threads * count)
  threads = threads + 1
end

function init(args)
  local first = tonumber(first) or 0
  for i = 1, count do
    local start = base + first + i
    local body = string.format('{"startDate":"%s","endDate":"%s","type":"sleep"}',
      os.date("!%Y-%m-%dT%H:%M:%SZ", start), os.date("!%Y-%m-%dT%H:%M:%SZ", start + 1800))
    requests[i] = wrk.format("POST", nil, {["Content-Type"] = "application/json"}, body)
  end
end

request = function()
  next_request = next_request % count + 1
  return requests[next_request]
end
