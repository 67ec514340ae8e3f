local raw = redis.call('get', KEYS[1])
if raw then
  local data = cjson.decode(raw)
  if data.owner ~= ARGV[1] then
    return cjson.encode({held = true, owner = data.owner})
  end
end
redis.call('set', KEYS[1], cjson.encode({owner = ARGV[1], n = tonumber(ARGV[2])}), 'PX', 60000)
return cjson.encode({held = false})
