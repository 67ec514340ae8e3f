package client_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fencerlock/fencer/client"
)

func TestMutexLockExtendUnlock(t *testing.T) {
	c := newClient(t)
	m1 := c.NewMutex("mutex")
	if err := m1.Lock(); err != nil {
		t.Fatal(err)
	}
	if m1.Name() != "mutex" || m1.Value() == "" || m1.Token() == 0 || !m1.Until().After(time.Now()) {
		t.Fatalf("after Lock: name %q value %q token %d until %v", m1.Name(), m1.Value(), m1.Token(), m1.Until())
	}
	m2 := c.NewMutex("mutex")
	err := m2.TryLock()
	if !errors.Is(err, client.ErrFailed) || !errors.Is(err, client.ErrLocked) {
		t.Fatalf("TryLock of a held mutex = %v, want ErrFailed and ErrLocked", err)
	}
	before := m1.Until()
	time.Sleep(20 * time.Millisecond)
	if ok, err := m1.Extend(); !ok || err != nil {
		t.Fatalf("Extend = %v, %v", ok, err)
	}
	if !m1.Until().After(before) {
		t.Fatalf("Extend did not move Until (%v, before %v)", m1.Until(), before)
	}
	if ok, err := m1.Unlock(); !ok || err != nil {
		t.Fatalf("Unlock = %v, %v", ok, err)
	}
	if err := m2.TryLock(); err != nil {
		t.Fatalf("TryLock after Unlock: %v", err)
	}
	defer m2.Unlock()
	if m2.Token() <= m1.Token() {
		t.Fatalf("second holder's token %d is not above the first's %d", m2.Token(), m1.Token())
	}
	if ok, err := m1.Extend(); ok || !errors.Is(err, client.ErrExtendFailed) || !errors.Is(err, client.ErrLeaseLost) {
		t.Fatalf("Extend by the old holder = %v, %v; want false, ErrExtendFailed", ok, err)
	}
}

func TestMutexLockWaitsForUnlock(t *testing.T) {
	c := newClient(t)
	m1 := c.NewMutex("handover")
	if err := m1.Lock(); err != nil {
		t.Fatal(err)
	}
	locked := make(chan error, 1)
	m2 := c.NewMutex("handover") // default: waits up to 7.75s
	go func() { locked <- m2.Lock() }()
	time.Sleep(500 * time.Millisecond)
	select {
	case err := <-locked:
		t.Fatalf("Lock returned while the mutex was held: %v", err)
	default:
	}
	if ok, err := m1.Unlock(); !ok || err != nil {
		t.Fatalf("Unlock = %v, %v", ok, err)
	}
	select {
	case err := <-locked:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Lock did not get the mutex within 5s of Unlock")
	}
	defer m2.Unlock()
	if m2.Token() <= m1.Token() {
		t.Fatalf("token %d after hand-over is not above %d", m2.Token(), m1.Token())
	}
}

func TestMutexLockGivesUpAfterItsTries(t *testing.T) {
	c := newClient(t)
	m1 := c.NewMutex("busy", client.WithExpiry(30*time.Second))
	if err := m1.Lock(); err != nil {
		t.Fatal(err)
	}
	defer m1.Unlock()
	m2 := c.NewMutex("busy", client.WithTries(3), client.WithRetryDelay(200*time.Millisecond))
	start := time.Now()
	err := m2.Lock()
	took := time.Since(start)
	if !errors.Is(err, client.ErrFailed) || !errors.Is(err, client.ErrLocked) {
		t.Fatalf("Lock = %v, want ErrFailed and ErrLocked", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Lock's own bound reported as the caller's deadline: %v", err)
	}
	if took < 400*time.Millisecond || took > 3*time.Second {
		t.Fatalf("Lock gave up after %v; want about (3-1) × 200ms", took)
	}
}

func TestMutexWithValueTakesOver(t *testing.T) {
	c := newClient(t)
	m1 := c.NewMutex("transfer")
	if err := m1.Lock(); err != nil {
		t.Fatal(err)
	}
	m2 := c.NewMutex("transfer", client.WithValue(m1.Value()))
	if ok, err := m2.Extend(); !ok || err != nil {
		t.Fatalf("Extend through the value = %v, %v", ok, err)
	}
	if ok, err := m2.Unlock(); !ok || err != nil {
		t.Fatalf("Unlock through the value = %v, %v", ok, err)
	}
	if _, held, err := c.Status(ctxT(t, 10*time.Second), "transfer"); err != nil || held {
		t.Fatalf("Status after Unlock: held %v, %v", held, err)
	}
}

func TestMutexUnlockAfterExpiry(t *testing.T) {
	c := newClient(t)
	m := c.NewMutex("short", client.WithExpiry(200*time.Millisecond))
	if err := m.Lock(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(800 * time.Millisecond)
	ok, err := m.Unlock()
	if ok || !errors.Is(err, client.ErrLockAlreadyExpired) {
		t.Fatalf("Unlock after expiry = %v, %v; want false, ErrLockAlreadyExpired", ok, err)
	}
}

func TestMutexGenValueFunc(t *testing.T) {
	c := newClient(t)
	// Values must be new on every run: the server remembers releases.
	prefix := fmt.Sprintf("worker-%d-", time.Now().UnixNano())
	n := 0
	m := c.NewMutex("values", client.WithGenValueFunc(func() (string, error) {
		n++
		return fmt.Sprintf("%s%d", prefix, n), nil
	}))
	for i := 1; i <= 2; i++ {
		if err := m.Lock(); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("%s%d", prefix, i); m.Value() != want {
			t.Fatalf("Value = %q, want %q", m.Value(), want)
		}
		if ok, err := m.Unlock(); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	boom := errors.New("no entropy")
	bad := c.NewMutex("values", client.WithGenValueFunc(func() (string, error) { return "", boom }))
	if err := bad.Lock(); !errors.Is(err, boom) {
		t.Fatalf("Lock with a failing value func = %v", err)
	}
}
