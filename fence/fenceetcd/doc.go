// Package fenceetcd makes etcd a fenced store: puts, deletes and
// transactions that carry a fencing token and happen only if it is at least
// the highest token already admitted for their resource (the rule of package
// fence).
package fenceetcd
