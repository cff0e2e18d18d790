package fencelock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	fencelock "github.com/fencelock/fencelock/bindings/go"
)

func Example() {
	ctx := context.Background()
	client, err := fencelock.NewClient([]string{"redis://127.0.0.1:6379"})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	waiting, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	lock, err := client.Acquire(waiting, "invoice:42", 10*time.Second)
	if err != nil {
		log.Fatal(err) // errors.Is(err, context.DeadlineExceeded) after 2 s
	}
	defer lock.Release(ctx)

	select {
	case reason := <-lock.Lost():
		log.Printf("lost the lock (%v): stop", reason)
		return
	default:
	}
	if err := client.FencedSet(ctx, "invoice:42:state", "paid", lock.Fence()); errors.Is(err, fencelock.ErrStaleToken) {
		log.Print("a newer holder wrote first: stop")
	}
	fmt.Println("paid with fencing token", lock.FencingToken())
}

func ExampleClient_TryAcquire() {
	ctx := context.Background()
	client, err := fencelock.NewClient([]string{"redis://127.0.0.1:6379"})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	lock, err := client.TryAcquire(ctx, "cron:nightly-report", time.Minute)
	if errors.Is(err, fencelock.ErrNotAcquired) {
		return // another instance runs it
	}
	if err != nil {
		log.Fatal(err)
	}
	defer lock.Release(ctx)
	// … run the job once …
}

func ExampleSemaphore() {
	ctx := context.Background()
	client, err := fencelock.NewClient([]string{"redis://127.0.0.1:6379"})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	exports := client.Semaphore("exports", 4)
	permit, err := exports.Acquire(ctx, 30*time.Second, fencelock.WithWait(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer permit.Release(ctx)
	number, _ := permit.Permit()
	fmt.Println("export slot", number, "of", exports.Permits())
}

func ExampleClient_Observe() {
	ctx := context.Background()
	client, err := fencelock.NewClient([]string{"redis://127.0.0.1:6379"})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	observation, err := client.Observe("scheduler")
	if err != nil {
		log.Fatal(err)
	}
	defer observation.Close()
	for leader, err := range observation.Leaders(ctx) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("leader %s at epoch %d\n", leader.Value, leader.Epoch)
	}
}
