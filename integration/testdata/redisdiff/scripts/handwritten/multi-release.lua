local released = {}
for i, key in ipairs(KEYS) do
  if redis.call("get", key) == ARGV[1] then
    redis.call("del", key)
    table.insert(released, key)
  end
end
return released
