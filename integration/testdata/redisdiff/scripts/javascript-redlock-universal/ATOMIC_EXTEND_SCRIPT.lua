local current_ttl = redis.call("PTTL", KEYS[1])
local min_ttl = tonumber(ARGV[2])
local new_ttl = tonumber(ARGV[3])

-- Check if key exists
if current_ttl == -2 then
  return {-1, -2}  -- Key doesn't exist
end

-- Check if we have enough time remaining for safe extension
if current_ttl < min_ttl then
  return {0, current_ttl}  -- Too late, include actual TTL for logging
end

-- Check value and extend atomically
local current_value = redis.call("GET", KEYS[1])
if current_value == ARGV[1] then
  redis.call("PEXPIRE", KEYS[1], new_ttl)
  return {1, current_ttl}  -- Success with original TTL
else
  return {-1, current_ttl}  -- Value mismatch (lock stolen)
end