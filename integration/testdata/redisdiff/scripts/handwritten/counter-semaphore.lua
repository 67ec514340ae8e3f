local count = tonumber(redis.call('get', KEYS[1]) or '0')
if count < tonumber(ARGV[1]) then
  local n = redis.call('incr', KEYS[1])
  redis.call('pexpire', KEYS[1], ARGV[2])
  return n
end
return -1
