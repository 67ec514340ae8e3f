local v = redis.call('get', KEYS[1])
if v == false then
  redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2])
  return 1
elseif v == ARGV[1] then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 2
end
return 0
