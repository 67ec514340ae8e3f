package rediscompat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"unicode/utf8"

	lua "github.com/yuin/gopher-lua"
)

// cjson is the JSON library Redis scripts have (lua-cjson 2.1): encode,
// decode and null. One difference: an object's keys are encoded in sorted
// order (lua-cjson follows the table's internal order, which no other Lua
// reproduces).

const cjsonMaxDepth = 1000

// cjsonError is an error of lua-cjson's, worded as lua-cjson words it.
type cjsonError string

func (e cjsonError) Error() string { return string(e) }

func newCjson(L *lua.LState) *lua.LTable {
	t := L.NewTable()
	null := L.NewUserData()
	t.RawSetString("null", null)
	t.RawSetString("encode", L.NewFunction(func(L *lua.LState) int {
		var b bytes.Buffer
		if err := cjsonEncode(&b, L.CheckAny(1), null, 0); err != nil {
			L.RaiseError("%s", err.Error())
		}
		L.Push(lua.LString(b.String()))
		return 1
	}))
	t.RawSetString("decode", L.NewFunction(func(L *lua.LState) int {
		dec := json.NewDecoder(bytes.NewReader([]byte(L.CheckString(1))))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			L.RaiseError("Expected value but found invalid token: %v", err)
		}
		if _, err := dec.Token(); err != io.EOF {
			L.RaiseError("Expected the end but found invalid token")
		}
		L.Push(cjsonToLua(L, v, null))
		return 1
	}))
	for _, name := range []string{"encode_keep_buffer", "encode_max_depth", "decode_max_depth", "encode_number_precision",
		"encode_sparse_array", "decode_invalid_numbers", "encode_invalid_numbers"} {
		t.RawSetString(name, L.NewFunction(func(L *lua.LState) int { return 0 }))
	}
	return t
}

func cjsonNumber(f float64) (string, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", cjsonError("Cannot serialise number: must not be NaN or Inf")
	}
	return strconv.FormatFloat(f, 'g', 14, 64), nil
}

func cjsonEncode(b *bytes.Buffer, v lua.LValue, null *lua.LUserData, depth int) error {
	switch v := v.(type) {
	case *lua.LNilType:
		b.WriteString("null")
	case lua.LBool:
		if v {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case lua.LNumber:
		s, err := cjsonNumber(float64(v))
		if err != nil {
			return err
		}
		b.WriteString(s)
	case lua.LString:
		cjsonString(b, string(v))
	case *lua.LUserData:
		if v == null {
			b.WriteString("null")
			return nil
		}
		return cjsonError("Cannot serialise userdata: type not supported")
	case *lua.LTable:
		if depth >= cjsonMaxDepth {
			return cjsonError(fmt.Sprintf("Cannot serialise, excessive nesting (%d)", depth+1))
		}
		return cjsonTable(b, v, null, depth+1)
	default:
		return cjsonError(fmt.Sprintf("Cannot serialise %s: type not supported", v.Type()))
	}
	return nil
}

func cjsonTable(b *bytes.Buffer, t *lua.LTable, null *lua.LUserData, depth int) error {
	// An array if every key is a positive integer and it is not too sparse.
	maxKey, count, isArray := 0, 0, true
	t.ForEach(func(k, _ lua.LValue) {
		n, ok := k.(lua.LNumber)
		if !ok || float64(n) != math.Floor(float64(n)) || n < 1 {
			isArray = false
			return
		}
		count++
		maxKey = max(maxKey, int(n))
	})
	if isArray && count > 0 {
		if maxKey > 10 && maxKey > count*2 {
			return cjsonError("Cannot serialise table: excessively sparse array")
		}
		b.WriteByte('[')
		for i := 1; i <= maxKey; i++ {
			if i > 1 {
				b.WriteByte(',')
			}
			if err := cjsonEncode(b, t.RawGetInt(i), null, depth); err != nil {
				return err
			}
		}
		b.WriteByte(']')
		return nil
	}
	type kv struct {
		k string
		v lua.LValue
	}
	var fields []kv
	var err error
	t.ForEach(func(k, v lua.LValue) {
		switch k := k.(type) {
		case lua.LString:
			fields = append(fields, kv{string(k), v})
		case lua.LNumber:
			s, e := cjsonNumber(float64(k))
			if e != nil && err == nil {
				err = e
			}
			fields = append(fields, kv{s, v})
		default:
			if err == nil {
				err = cjsonError("Cannot serialise table: table key must be a number or string")
			}
		}
	})
	if err != nil {
		return err
	}
	sort.Slice(fields, func(i, j int) bool { return fields[i].k < fields[j].k })
	b.WriteByte('{')
	for i, f := range fields {
		if i > 0 {
			b.WriteByte(',')
		}
		cjsonString(b, f.k)
		b.WriteByte(':')
		if err := cjsonEncode(b, f.v, null, depth); err != nil {
			return err
		}
	}
	b.WriteByte('}')
	return nil
}

// cjsonString writes s as lua-cjson escapes it ("/" included).
func cjsonString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '/':
			b.WriteString(`\/`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 || c == 0x7f {
				fmt.Fprintf(b, `\u%04x`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
}

func cjsonToLua(L *lua.LState, v any, null *lua.LUserData) lua.LValue {
	switch v := v.(type) {
	case nil:
		return null
	case bool:
		return lua.LBool(v)
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return lua.LNumber(math.Inf(1))
		}
		return lua.LNumber(f)
	case string:
		if !utf8.ValidString(v) {
			return lua.LString(v)
		}
		return lua.LString(v)
	case []any:
		t := L.CreateTable(len(v), 0)
		for i, x := range v {
			t.RawSetInt(i+1, cjsonToLua(L, x, null))
		}
		return t
	case map[string]any:
		t := L.CreateTable(0, len(v))
		for k, x := range v {
			t.RawSetString(k, cjsonToLua(L, x, null))
		}
		return t
	}
	return lua.LNil
}
