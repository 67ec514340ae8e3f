
  local lockKey = KEYS[1]
  local updatesChannel = KEYS[2]
  local lockValue = ARGV[1]

  if redis.call("GET", lockKey) == lockValue then
      redis.call("DEL", lockKey)
      redis.call(
        "PUBLISH",
        updatesChannel,
        string.format('{ "key": "%s", "value": "%s" }', lockKey, lockValue)
      )
  end
