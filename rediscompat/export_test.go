package rediscompat

import "strings"

// Code returns an error reply's code, its first word.
func (e Error) Code() string {
	code, _, _ := strings.Cut(string(e), " ")
	return code
}
