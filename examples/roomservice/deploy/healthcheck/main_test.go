package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheck(t *testing.T) {
	var status atomic.Int32
	status.Store(http.StatusOK)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(int(status.Load()))
	}))
	t.Cleanup(srv.Close)
	require.NoError(t, check(context.Background(), srv.URL+"/readyz"))
	status.Store(http.StatusServiceUnavailable)
	require.ErrorContains(t, check(context.Background(), srv.URL+"/readyz"), "503 Service Unavailable")
	srv.Close()
	require.Error(t, check(context.Background(), srv.URL+"/readyz"), "nothing listens")
	require.Error(t, check(context.Background(), "::not a url"))
}
