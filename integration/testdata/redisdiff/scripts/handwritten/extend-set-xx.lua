if redis.call("get", KEYS[1]) == ARGV[1] then
  return redis.call("set", KEYS[1], ARGV[1], "XX", "PX", ARGV[2])
end
return nil
