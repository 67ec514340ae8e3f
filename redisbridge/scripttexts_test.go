// This file holds text copied from the lock clients' sources, as test
// fixtures; do not edit it.

package redisbridge

import (
	"crypto/sha1"
	"encoding/hex"
)

func scriptSHA(text []byte) string {
	sum := sha1.Sum(text)
	return hex.EncodeToString(sum[:])
}

// The exact texts of the lock scripts of redsync, node-redlock, redis-py and
// Redisson, copied byte for byte from each library's source (every released
// version that differs). fencer once recognised these 29 texts by their
// SHA1; now its Lua engine runs any script, and they are test fixtures.

const (
	// redsyncDelete40: go-redsync/redsync v4.0.0..v4.11.0; SHA1 00583931c4e4d483f6233879c133c71ed5393f9d.
	redsyncDelete40 = `
	if redis.call("GET", KEYS[1]) == ARGV[1] then
		return redis.call("DEL", KEYS[1])
	else
		return 0
	end
`
	// redsyncDelete412: go-redsync/redsync v4.12.0..v4.18.1; SHA1 e950836ed1e694540c503ef9972b8de518044d3b.
	redsyncDelete412 = `
	local val = redis.call("GET", KEYS[1])
	if val == ARGV[1] then
		return redis.call("DEL", KEYS[1])
	elseif val == false then
		return -1
	else
		return 0
	end
`
	// redsyncTouch: go-redsync/redsync v4.0.0..v4.18.1; SHA1 d75bb8b5bd13532ddedd17762e772346e39b321e.
	redsyncTouch = `
	if redis.call("GET", KEYS[1]) == ARGV[1] then
		return redis.call("PEXPIRE", KEYS[1], ARGV[2])
	else
		return 0
	end
`
	// redsyncTouchSetNX: go-redsync/redsync v4.12.0..v4.18.1; SHA1 b6b55c439e02c6f52ffb8be7ec8c0d0ac816ea79.
	redsyncTouchSetNX = `
	if redis.call("GET", KEYS[1]) == ARGV[1] then
		return redis.call("PEXPIRE", KEYS[1], ARGV[2])
	elseif redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2], "NX") then
		return 1
	else
		return 0
	end
`
	// redlockAcquire40: node-redlock (npm redlock) 4.0.0; SHA1 d01fb69e6ecc8bad3ca9bacba9f4f9e96862313f.
	redlockAcquire40 = `
	-- Return 0 if an entry already exists.
	for i, key in ipairs(KEYS) do
		if redis.call("exists", key) == 1 then
			return 0
		end
	end

	-- Create an entry for each provided key.
	for i, key in ipairs(KEYS) do
		redis.call("set", key, ARGV[1], "PX", ARGV[2])
	end

	-- Return the number of entries added.
	return table.getn(KEYS)
`
	// redlockAcquire41: node-redlock (npm redlock) 4.1.0, 4.2.0; SHA1 e5a322e2634ef59a516e8ea150cb085afafee684.
	redlockAcquire41 = `
	-- Return 0 if an entry already exists.
	for i, key in ipairs(KEYS) do
		if redis.call("exists", key) == 1 then
			return 0
		end
	end

	-- Create an entry for each provided key.
	for i, key in ipairs(KEYS) do
		redis.call("set", key, ARGV[1], "PX", ARGV[2])
	end

	-- Return the number of entries added.
	return #KEYS
`
	// redlockAcquire5: node-redlock (npm redlock) 5.0.0-beta.1, 5.0.0-beta.2; SHA1 96da70f7716f27d278a5218544df37fd8b0a5e4c.
	redlockAcquire5 = `
  -- Return 0 if an entry already exists.
  for i, key in ipairs(KEYS) do
    if redis.call("exists", key) == 1 then
      return 0
    end
  end

  -- Create an entry for each provided key.
  for i, key in ipairs(KEYS) do
    redis.call("set", key, ARGV[1], "PX", ARGV[2])
  end

  -- Return the number of entries added.
  return #KEYS
`
	// redlockRelease40: node-redlock (npm redlock) 4.0.0, 4.1.0; SHA1 517e7ed95f00c0c4a209c6a7afcc6ab797d30b85.
	redlockRelease40 = `
	local count = 0
	for i, key in ipairs(KEYS) do
	  -- Only remove entries for *this* lock value.
	  if redis.call("get", key) == ARGV[1] then
	    redis.pcall("del", key)
	    count = count + 1
	  end
	end

	-- Return the number of entries removed.
	return count
`
	// redlockRelease42: node-redlock (npm redlock) 4.2.0; SHA1 0f0f23b9048b36752b5be114f357ba083449f908.
	redlockRelease42 = `
	local count = 0
	for i, key in ipairs(KEYS) do
		-- Only remove entries for *this* lock value.
		if redis.call("get", key) == ARGV[1] then
			redis.pcall("del", key)
			count = count + 1
		end
	end

	-- Return the number of entries removed.
	return count
`
	// redlockRelease5: node-redlock (npm redlock) 5.0.0-beta.1, 5.0.0-beta.2; SHA1 e4612211c9f8f51c257e26e056b0a654b3187242.
	redlockRelease5 = `
  local count = 0
  for i, key in ipairs(KEYS) do
    -- Only remove entries for *this* lock value.
    if redis.call("get", key) == ARGV[1] then
      redis.pcall("del", key)
      count = count + 1
    end
  end

  -- Return the number of entries removed.
  return count
`
	// redlockExtend40: node-redlock (npm redlock) 4.0.0; SHA1 acaf90b4697bb48bb5f603e9e613a54df7536c70.
	redlockExtend40 = `
	-- Return 0 if an entry exists with a *different* lock value.
	for i, key in ipairs(KEYS) do
	  if redis.call("get", key) ~= ARGV[1] then
	    return 0
	  end
	end

	-- Update the entry for each provided key.
	for i, key in ipairs(KEYS) do
	  redis.call("set", key, ARGV[1], "PX", ARGV[2])
	end

	-- Return the number of entries updated.
	return table.getn(KEYS)
`
	// redlockExtend41: node-redlock (npm redlock) 4.1.0; SHA1 1d48b4c6fea2cdadc46b3346de5c2eaf121c7bb3.
	redlockExtend41 = `
	-- Return 0 if an entry exists with a *different* lock value.
	for i, key in ipairs(KEYS) do
	  if redis.call("get", key) ~= ARGV[1] then
	    return 0
	  end
	end

	-- Update the entry for each provided key.
	for i, key in ipairs(KEYS) do
	  redis.call("set", key, ARGV[1], "PX", ARGV[2])
	end

	-- Return the number of entries updated.
	return #KEYS
`
	// redlockExtend42: node-redlock (npm redlock) 4.2.0; SHA1 ce46f80993d5dac20dd066eb301a4e37994bdbed.
	redlockExtend42 = `
	-- Return 0 if an entry exists with a *different* lock value.
	for i, key in ipairs(KEYS) do
		if redis.call("get", key) ~= ARGV[1] then
			return 0
		end
	end

	-- Update the entry for each provided key.
	for i, key in ipairs(KEYS) do
		redis.call("set", key, ARGV[1], "PX", ARGV[2])
	end

	-- Return the number of entries updated.
	return #KEYS
`
	// redlockExtend5: node-redlock (npm redlock) 5.0.0-beta.1, 5.0.0-beta.2; SHA1 aed6f382e410db8ba7926d4e5e9aab410bf2a78a.
	redlockExtend5 = `
  -- Return 0 if an entry exists with a *different* lock value.
  for i, key in ipairs(KEYS) do
    if redis.call("get", key) ~= ARGV[1] then
      return 0
    end
  end

  -- Update the entry for each provided key.
  for i, key in ipairs(KEYS) do
    redis.call("set", key, ARGV[1], "PX", ARGV[2])
  end

  -- Return the number of entries updated.
  return #KEYS
`
	// redisPyRelease: redis-py Lock 3.0.0..8.1.0; SHA1 c3f8721cbb97f72bc19e972846bd7aaf91901658.
	redisPyRelease = `
        local token = redis.call('get', KEYS[1])
        if not token or token ~= ARGV[1] then
            return 0
        end
        redis.call('del', KEYS[1])
        return 1
    `
	// redisPyExtend30: redis-py Lock 3.0.0..3.4.1; SHA1 4a484ac024e9b025224cd9f8e1d59dbf3c15d00d.
	redisPyExtend30 = `
        local token = redis.call('get', KEYS[1])
        if not token or token ~= ARGV[1] then
            return 0
        end
        local expiration = redis.call('pttl', KEYS[1])
        if not expiration then
            expiration = 0
        end
        if expiration < 0 then
            return 0
        end
        redis.call('pexpire', KEYS[1], expiration + ARGV[2])
        return 1
    `
	// redisPyExtend35: redis-py Lock 3.5.0..8.1.0; SHA1 a4e8783852e6b949f9ef3a97212805108459a890.
	redisPyExtend35 = `
        local token = redis.call('get', KEYS[1])
        if not token or token ~= ARGV[1] then
            return 0
        end
        local expiration = redis.call('pttl', KEYS[1])
        if not expiration then
            expiration = 0
        end
        if expiration < 0 then
            return 0
        end

        local newttl = ARGV[2]
        if ARGV[3] == "0" then
            newttl = ARGV[2] + expiration
        end
        redis.call('pexpire', KEYS[1], newttl)
        return 1
    `
	// redisPyReacquire: redis-py Lock 3.1.0..8.1.0; SHA1 1cac51482acf5858da00f6d685d68f886cd6b6b2.
	redisPyReacquire = `
        local token = redis.call('get', KEYS[1])
        if not token or token ~= ARGV[1] then
            return 0
        end
        redis.call('pexpire', KEYS[1], ARGV[2])
        return 1
    `
	// redissonLock31: Redisson RLock 3.1.0..3.12.2; SHA1 9401052d872adfd0179ef8c8e8c028512707629a.
	redissonLock31 = "if (redis.call('exists', KEYS[1]) == 0) then redis.call('hset', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; return redis.call('pttl', KEYS[1]);"
	// redissonLock3123: Redisson RLock 3.12.3..3.18.1; SHA1 dad0f8d619e548e04f21fb48d50be5034df3adae.
	redissonLock3123 = "if (redis.call('exists', KEYS[1]) == 0) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; return redis.call('pttl', KEYS[1]);"
	// redissonLock319: Redisson RLock 3.19.0..4.7.0+; SHA1 149c5a8bf18676fd99e9e6e24923bd64d9b62f94.
	redissonLock319 = "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; return redis.call('pttl', KEYS[1]);"
	// redissonUnlock31: Redisson RLock 3.1.0..3.10.5; SHA1 93cfc048f82624d1670a310aa0ad58918c0824a5.
	redissonUnlock31 = "if (redis.call('exists', KEYS[1]) == 0) then redis.call('publish', KEYS[2], ARGV[1]); return 1; end;if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; else redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1; end; return nil;"
	// redissonUnlock3106: Redisson RLock 3.10.6..3.21.3; SHA1 3ffe249c16dee540ac8ab32e39bd408626b9aff7.
	redissonUnlock3106 = "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; else redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1; end; return nil;"
	// redissonUnlock322: Redisson RLock 3.22.0..3.23.5; SHA1 778cea8aada230ae060b432fc333adaec85f2f4c.
	redissonUnlock322 = "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); return 1; end; return nil;"
	// redissonUnlock324: Redisson RLock 3.24.0..4.7.0+; SHA1 6866459238a13a701d42f4971f12d9f3a50e2442.
	redissonUnlock324 = "local val = redis.call('get', KEYS[3]); if val ~= false then return tonumber(val);end; if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); redis.call('set', KEYS[3], 0, 'px', ARGV[5]); return 0; else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return 1; end; "
	// redissonForceUnlock31: Redisson RLock 3.1.0..3.21.3; SHA1 7e9c80b3d786b95d5d4aaf8fd73adb9775fa6fb1.
	redissonForceUnlock31 = "if (redis.call('del', KEYS[1]) == 1) then redis.call('publish', KEYS[2], ARGV[1]); return 1 else return 0 end"
	// redissonForceUnlock322: Redisson RLock 3.22.0..4.7.0+; SHA1 605e338249a7a1d40df83b04f7658354f883b41b.
	redissonForceUnlock322 = "if (redis.call('del', KEYS[1]) == 1) then redis.call(ARGV[2], KEYS[2], ARGV[1]); return 1 else return 0 end"
	// redissonRenew31: Redisson RLock 3.1.0..3.43.0; SHA1 8e19a1ddbdee9138df9f32a480c57addab4353d1.
	redissonRenew31 = "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('pexpire', KEYS[1], ARGV[1]); return 1; end; return 0;"
	// redissonRenewBatch344: Redisson RLock 3.44.0..4.7.0+; SHA1 6a3d31570dc6f4b0bd32bcdc8e75667747c6f635.
	redissonRenewBatch344 = "local result = {} for i = 1, #KEYS, 1 do if (redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1) then redis.call('pexpire', KEYS[i], ARGV[1]); table.insert(result, 1); else table.insert(result, 0); end; end; return result;"
)

// knownScripts lists every script text with the library that sends it.
var knownScripts = []struct {
	text, library string
}{
	{redsyncDelete40, "go-redsync/redsync v4.0.0..v4.11.0"},
	{redsyncDelete412, "go-redsync/redsync v4.12.0..v4.18.1"},
	{redsyncTouch, "go-redsync/redsync v4.0.0..v4.18.1"},
	{redsyncTouchSetNX, "go-redsync/redsync v4.12.0..v4.18.1"},
	{redlockAcquire40, "node-redlock (npm redlock) 4.0.0"},
	{redlockAcquire41, "node-redlock (npm redlock) 4.1.0, 4.2.0"},
	{redlockAcquire5, "node-redlock (npm redlock) 5.0.0-beta.1, 5.0.0-beta.2"},
	{redlockRelease40, "node-redlock (npm redlock) 4.0.0, 4.1.0"},
	{redlockRelease42, "node-redlock (npm redlock) 4.2.0"},
	{redlockRelease5, "node-redlock (npm redlock) 5.0.0-beta.1, 5.0.0-beta.2"},
	{redlockExtend40, "node-redlock (npm redlock) 4.0.0"},
	{redlockExtend41, "node-redlock (npm redlock) 4.1.0"},
	{redlockExtend42, "node-redlock (npm redlock) 4.2.0"},
	{redlockExtend5, "node-redlock (npm redlock) 5.0.0-beta.1, 5.0.0-beta.2"},
	{redisPyRelease, "redis-py Lock 3.0.0..8.1.0"},
	{redisPyExtend30, "redis-py Lock 3.0.0..3.4.1"},
	{redisPyExtend35, "redis-py Lock 3.5.0..8.1.0"},
	{redisPyReacquire, "redis-py Lock 3.1.0..8.1.0"},
	{redissonLock31, "Redisson RLock 3.1.0..3.12.2"},
	{redissonLock3123, "Redisson RLock 3.12.3..3.18.1"},
	{redissonLock319, "Redisson RLock 3.19.0..4.7.0+"},
	{redissonUnlock31, "Redisson RLock 3.1.0..3.10.5"},
	{redissonUnlock3106, "Redisson RLock 3.10.6..3.21.3"},
	{redissonUnlock322, "Redisson RLock 3.22.0..3.23.5"},
	{redissonUnlock324, "Redisson RLock 3.24.0..4.7.0+"},
	{redissonForceUnlock31, "Redisson RLock 3.1.0..3.21.3"},
	{redissonForceUnlock322, "Redisson RLock 3.22.0..4.7.0+"},
	{redissonRenew31, "Redisson RLock 3.1.0..3.43.0"},
	{redissonRenewBatch344, "Redisson RLock 3.44.0..4.7.0+"},
}
