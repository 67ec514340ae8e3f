package fenceetcd_test

import (
	"context"
	"fmt"

	"github.com/fencerlock/fencer/fence/fenceetcd"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func ExampleStore() {
	ctx := context.Background()
	s, err := fenceetcd.New(cli) // cli is a *clientv3.Client
	if err != nil {
		panic(err)
	}
	fmt.Println(s.Put(ctx, "report", 33, "by the holder of token 33"))
	fmt.Println(s.Put(ctx, "report", 34, "by the holder of token 34")) // the lease passed on
	fmt.Println(s.Put(ctx, "report", 33, "late"))                      // the old holder wakes up
	fmt.Println(s.Delete(ctx, "report", 34))
	fmt.Println(s.Put(ctx, "report", 33, "late, again")) // the delete kept token 34
	// Output:
	// <nil>
	// <nil>
	// fence: stale token 33 for "report": token 34 was already admitted
	// <nil>
	// fence: stale token 33 for "report": token 34 was already admitted
}

func ExampleStore_Txn() {
	ctx := context.Background()
	s, err := fenceetcd.New(cli)
	if err != nil {
		panic(err)
	}
	deposit := func(token uint64, n int, amount string) error {
		// Two keys, one transaction, admitted under one resource name.
		_, err := s.Txn(ctx, "account/42", token,
			clientv3.OpPut(fmt.Sprintf("account/42/ledger/%d", n), amount),
			clientv3.OpPut("account/42/last", amount),
		)
		return err
	}
	fmt.Println(deposit(7, 1, "+10"))
	fmt.Println(deposit(8, 2, "+5"))
	fmt.Println(deposit(7, 3, "+1000")) // stale: neither key is written
	resp, err := cli.Get(ctx, "account/42/", clientv3.WithPrefix())
	if err != nil {
		panic(err)
	}
	for _, kv := range resp.Kvs {
		fmt.Printf("%s = %s\n", kv.Key, kv.Value)
	}
	// Output:
	// <nil>
	// <nil>
	// fence: stale token 7 for "account/42": token 8 was already admitted
	// account/42/last = +5
	// account/42/ledger/1 = +10
	// account/42/ledger/2 = +5
}
