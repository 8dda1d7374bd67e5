package testutil

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// Response is an HTTP answer as tests check it.
type Response struct {
	Code   int
	Header http.Header
	Body   string
}

// RequestAs sends a request to rawURL as a browser whose address bar
// holds host would: with that Host header, for a POST the form
// url-encoded and an Origin of http://host, and the cookies given (a
// browser keeps cookies per host: pass them explicitly). It does not
// follow redirects. Tests of a Host check (DNS rebinding) use it.
func RequestAs(t testing.TB, method, rawURL, host string, form url.Values, cookies ...*http.Cookie) Response {
	t.Helper()
	req, err := http.NewRequest(method, rawURL, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatalf("testutil: %s %s: %v", method, rawURL, err)
	}
	req.Host = host
	for _, c := range cookies {
		req.AddCookie(c)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "http://"+host)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("testutil: %s %s (Host %q): %v", method, rawURL, host, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("testutil: %s %s: read: %v", method, rawURL, err)
	}
	return Response{Code: resp.StatusCode, Header: resp.Header, Body: string(body)}
}
