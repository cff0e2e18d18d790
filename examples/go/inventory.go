// Inventory decrement guarded by a fencelock lock, with the write fenced by
// the lock's token so a stalled former holder can never overwrite newer stock.
//
//	FENCELOCK_NODES=redis://127.0.0.1:6379 go run . SKU [DECREMENTS]
//
// Several copies may run at once, against one node or several (Redlock): the
// stock always ends exactly DECREMENTS per copy below its start (100).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	fencelock "github.com/fencelock/fencelock/bindings/go"
)

// decrement takes the lock, reads the stock, and writes it back one lower
// with the lock's fence.
func decrement(ctx context.Context, client *fencelock.Client, resource, stockKey string) error {
	lock, err := client.Acquire(ctx, resource, 5*time.Second, fencelock.WithWait(30*time.Second))
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	defer lock.Release(context.Background())

	stock := 100
	current, found, err := client.FencedGet(ctx, stockKey)
	if err != nil {
		return fmt.Errorf("read stock: %w", err)
	}
	if found {
		if stock, err = strconv.Atoi(current.Value); err != nil {
			return fmt.Errorf("stock %q: %w", current.Value, err)
		}
	}
	// Refused with ErrStaleToken if a newer holder already wrote.
	err = client.FencedSet(ctx, stockKey, strconv.Itoa(stock-1), lock.Fence())
	if errors.Is(err, fencelock.ErrStaleToken) {
		return fmt.Errorf("a newer holder wrote first (we held token %d): %w", lock.FencingToken(), err)
	}
	return err
}

func main() {
	nodes := os.Getenv("FENCELOCK_NODES")
	if len(os.Args) < 2 || nodes == "" {
		fmt.Fprintln(os.Stderr, "usage: FENCELOCK_NODES=redis://host:port[,...] inventory SKU [DECREMENTS]")
		os.Exit(2)
	}
	sku, decrements := os.Args[1], 1
	if len(os.Args) > 2 {
		decrements, _ = strconv.Atoi(os.Args[2])
	}
	// Ctrl-C cancels a waiting acquire at once.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	client, err := fencelock.NewClient(strings.Split(nodes, ","))
	if err != nil {
		fmt.Fprintln(os.Stderr, "inventory: connect:", err)
		os.Exit(1)
	}
	defer client.Close()

	failures := 0
	resource, stockKey := "inventory:"+sku, "stock:"+sku
	for i := 0; i < decrements; i++ {
		if err := decrement(ctx, client, resource, stockKey); err != nil {
			fmt.Fprintln(os.Stderr, "inventory:", err)
			failures++
		}
	}
	if stock, found, err := client.FencedGet(ctx, stockKey); err == nil && found {
		fmt.Printf("stock of %s: %s (last written with fencing token %d)\n", sku, stock.Value, stock.Token)
	}
	if failures > 0 {
		os.Exit(1)
	}
}
