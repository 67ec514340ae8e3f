package rediscompat

import (
	"reflect"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/ast"
)

// Lua 5.1 turns a numeric string given to a numeric for (its start, limit or
// step) into a number; gopher-lua raises an error instead. Redisson's read
// lock renewal counts down from a hash field (`for c = counter, 1, -1`), so
// before compiling, every numeric for's three expressions are wrapped in a
// call of forNumber, which converts as Lua 5.1 does.

// forNumberName is the global forNumber is reached by.
const forNumberName = "__fencer_for_number"

// coerceForLoops wraps the start, limit and step of every numeric for in
// chunk, however deeply nested (function bodies included).
func coerceForLoops(chunk []ast.Stmt) {
	walkAST(reflect.ValueOf(chunk))
}

func walkAST(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return
		}
		if f, ok := v.Interface().(*ast.NumberForStmt); ok {
			f.Init = forNumberCall(f.Init, "initial value")
			f.Limit = forNumberCall(f.Limit, "limit")
			if f.Step != nil {
				f.Step = forNumberCall(f.Step, "step")
			}
		}
		walkAST(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				walkAST(v.Field(i))
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			walkAST(v.Index(i))
		}
	}
}

func forNumberCall(e ast.Expr, what string) ast.Expr {
	fn := &ast.IdentExpr{Value: forNumberName}
	fn.SetLine(e.Line())
	fn.SetLastLine(e.LastLine())
	arg := &ast.StringExpr{Value: what}
	arg.SetLine(e.Line())
	arg.SetLastLine(e.LastLine())
	call := &ast.FuncCallExpr{Func: fn, Args: []ast.Expr{e, arg}, AdjustRet: true}
	call.SetLine(e.Line())
	call.SetLastLine(e.LastLine())
	return call
}

// forNumber is Lua 5.1's conversion of a numeric for's value.
func forNumber(L *lua.LState) int {
	switch v := L.Get(1).(type) {
	case lua.LNumber:
		L.Push(v)
		return 1
	case lua.LString:
		if f, ok := parseLuaNumber(string(v)); ok {
			L.Push(lua.LNumber(f))
			return 1
		}
	}
	L.RaiseError("'for' %s must be a number", L.CheckString(2))
	return 0
}
