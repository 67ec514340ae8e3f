local identifier = redis.call('get', KEYS[1])
if not identifier then
return redis.error_reply('ERROR')
elseif identifier == ARGV[1] then
return redis.call("TTL", KEYS[1])
else
return redis.error_reply('ERROR')
end