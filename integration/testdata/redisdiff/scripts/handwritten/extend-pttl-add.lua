local token = redis.call('get', KEYS[1])
if not token or token ~= ARGV[1] then
  return 0
end
local remaining = redis.call('pttl', KEYS[1])
if remaining < 0 then
  return 0
end
return redis.call('pexpire', KEYS[1], remaining + tonumber(ARGV[2]))
