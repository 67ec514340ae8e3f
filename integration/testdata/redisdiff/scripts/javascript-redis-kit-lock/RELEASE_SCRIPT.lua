local token = ARGV[1]
local count = 0

for i = 1, #KEYS do
  if redis.call("GET", KEYS[i]) == token then
    redis.call("DEL", KEYS[i])
    count = count + 1
  end
end

return count