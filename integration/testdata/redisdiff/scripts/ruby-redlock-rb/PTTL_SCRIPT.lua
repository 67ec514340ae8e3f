      return { redis.call("get", KEYS[1]), redis.call("pttl", KEYS[1]) }
