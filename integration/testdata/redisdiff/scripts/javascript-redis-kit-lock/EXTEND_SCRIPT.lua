-- Check if all keys have the expected token value
local token = ARGV[1]
local ttl = ARGV[2]
local values = redis.call("MGET", unpack(KEYS))

for _, currValue in ipairs(values) do
  if currValue ~= token then
    return 0
  end
end

-- All matched, update TTLs
for _, key in ipairs(KEYS) do
  redis.call("SET", key, token, "PX", ttl)
end

return 1