local ok = redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[2])
if ok then
  return ok.ok
end
return redis.call("pttl", KEYS[1])
