package rediscompat

import (
	"math"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// bit is LuaBitOp, as Redis scripts have it: 32-bit operations whose results
// are signed 32-bit numbers.

func tobit(L *lua.LState, i int) int32 {
	f := float64(L.CheckNumber(i))
	return int32(uint32(int64(math.RoundToEven(math.Mod(f, 4294967296)))))
}

func newBit(L *lua.LState) *lua.LTable {
	t := L.NewTable()
	push := func(L *lua.LState, v int32) int {
		L.Push(lua.LNumber(v))
		return 1
	}
	fold := func(op func(a, b int32) int32) lua.LGFunction {
		return func(L *lua.LState) int {
			acc := tobit(L, 1)
			for i := 2; i <= L.GetTop(); i++ {
				acc = op(acc, tobit(L, i))
			}
			return push(L, acc)
		}
	}
	shift := func(op func(x uint32, n uint) uint32) lua.LGFunction {
		return func(L *lua.LState) int {
			x, n := uint32(tobit(L, 1)), uint(tobit(L, 2))&31
			return push(L, int32(op(x, n)))
		}
	}
	fns := map[string]lua.LGFunction{
		"tobit":   func(L *lua.LState) int { return push(L, tobit(L, 1)) },
		"bnot":    func(L *lua.LState) int { return push(L, ^tobit(L, 1)) },
		"band":    fold(func(a, b int32) int32 { return a & b }),
		"bor":     fold(func(a, b int32) int32 { return a | b }),
		"bxor":    fold(func(a, b int32) int32 { return a ^ b }),
		"lshift":  shift(func(x uint32, n uint) uint32 { return x << n }),
		"rshift":  shift(func(x uint32, n uint) uint32 { return x >> n }),
		"arshift": shift(func(x uint32, n uint) uint32 { return uint32(int32(x) >> n) }),
		"rol":     shift(func(x uint32, n uint) uint32 { return x<<n | x>>((32-n)&31) }),
		"ror":     shift(func(x uint32, n uint) uint32 { return x>>n | x<<((32-n)&31) }),
		"bswap": func(L *lua.LState) int {
			x := uint32(tobit(L, 1))
			return push(L, int32(x>>24|x>>8&0xff00|x<<8&0xff0000|x<<24))
		},
		"tohex": func(L *lua.LState) int {
			x := uint32(tobit(L, 1))
			n := 8
			if L.GetTop() >= 2 {
				n = int(tobit(L, 2))
			}
			digits := "0123456789abcdef"
			if n < 0 {
				n = -n
				digits = strings.ToUpper(digits)
			}
			if n > 8 {
				n = 8
			}
			buf := make([]byte, n)
			for i := n - 1; i >= 0; i-- {
				buf[i] = digits[x&15]
				x >>= 4
			}
			L.Push(lua.LString(buf))
			return 1
		},
	}
	for name, fn := range fns {
		t.RawSetString(name, L.NewFunction(fn))
	}
	return t
}
