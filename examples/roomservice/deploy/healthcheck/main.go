// Command healthcheck asks a room-service health endpoint and exits 0
// when it answers 2xx, 1 otherwise. It is in the room-service image for
// the container's health check: the image (distroless) has no shell and
// no curl.
//
//	/healthcheck http://127.0.0.1:8080/readyz
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// timeout bounds the whole check; Docker's own timeout is a backstop.
const timeout = 2 * time.Second

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: healthcheck URL (e.g. http://127.0.0.1:8080/readyz)")
		os.Exit(2)
	}
	if err := check(context.Background(), os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "healthcheck:", err)
		os.Exit(1)
	}
}

// check GETs url and returns nil on a 2xx answer.
func check(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}
