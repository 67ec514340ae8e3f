local token = ARGV[1]
local ttlMs = ARGV[2]

-- Check if any of the keys exist
if redis.call("EXISTS", unpack(KEYS)) > 0 then
  return 0
end

-- All keys are free, set them
for i = 1, #KEYS do
  redis.call("SET", KEYS[i], token, "PX", ttlMs)
end

return 1