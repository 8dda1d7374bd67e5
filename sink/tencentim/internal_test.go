package tencentim

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tencentyun/tls-sig-api-v2-golang/tencentyun"

	"github.com/outboxrelay/outboxrelay/internal/ctxwait"
)

// fakeClock is a clock tests move by hand; sleeping on it moves it.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) Sleep(_ context.Context, d time.Duration) error {
	c.Advance(d)
	return nil
}

func testConfig(clock *fakeClock) Config {
	return Config{
		BaseURL: "http://127.0.0.1:1", SDKAppID: 1400000001, SecretKey: "k", AdminIdentifier: "admin",
		Now: clock.Now,
	}.withDefaults()
}

func TestSignerCachesAndRenewsBeforeExpiry(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	s := newSigner(testConfig(clock))
	n := 0
	s.gen = func(appID int, key, id string, expire int) (string, error) {
		n++
		require.Equal(t, int(DefaultUserSigTTL/time.Second), expire)
		return tencentyun.GenUserSig(appID, key, id, expire)
	}

	first, err := s.get()
	require.NoError(t, err)
	require.NotEmpty(t, first)
	require.NoError(t, tencentyun.VerifyUserSig(1400000001, "k", "admin", first, time.Now()))
	for range 100 {
		sig, err := s.get()
		require.NoError(t, err)
		require.Equal(t, first, sig)
	}
	require.Equal(t, 1, n, "cached")

	clock.Advance(DefaultUserSigTTL/2 - time.Second)
	_, _ = s.get()
	require.Equal(t, 1, n, "still within the first half of its life")
	clock.Advance(2 * time.Second)
	_, _ = s.get()
	require.Equal(t, 2, n, "renewed at half its lifetime, well before expiry")
}

func TestSignerRenewsARejectedSignatureOnce(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	s := newSigner(testConfig(clock))
	n := 0
	s.gen = func(int, string, string, int) (string, error) {
		n++
		return "sig-" + string(rune('a'+n)), nil
	}
	old, err := s.get()
	require.NoError(t, err)

	// Many calls refused with the same signature at once sign only once.
	var wg sync.WaitGroup
	got := make(chan string, 50)
	errs := make(chan error, 50)
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sig, err := s.renew(old)
			errs <- err
			got <- sig
		}()
	}
	wg.Wait()
	close(got)
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for sig := range got {
		require.NotEqual(t, old, sig)
	}
	require.Equal(t, 2, n)
}

func TestLimiterHoldsTheConfiguredRates(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	cfg := testConfig(clock)
	cfg.RateLimit, cfg.GroupRateLimit = 100, 20
	l := newLimiter(cfg)
	l.sleep = clock.Sleep
	ctx := context.Background()

	// One group: its own limit (20/s, burst 2) binds.
	start := clock.Now()
	for range 202 {
		require.NoError(t, l.wait(ctx, "room-1"))
	}
	require.Equal(t, 10*time.Second, clock.Now().Sub(start), "200 calls beyond the burst of 2 at 20/s")

	// Many groups: the global limit (100/s, burst 10) binds. Every group
	// is fresh, so only the global limit makes anyone wait.
	start = clock.Now()
	for i := range 1000 {
		require.NoError(t, l.wait(ctx, "g-"+string(rune('A'+i%26))+string(rune('a'+i/26))))
	}
	require.InDelta(t, 10.0, clock.Now().Sub(start).Seconds(), 0.11, "about 1,000 calls at 100/s")
}

func TestLimiterGivesBackTheTokenWhenTheCallerGivesUp(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	cfg := testConfig(clock)
	cfg.RateLimit, cfg.GroupRateLimit = 1, -1
	l := newLimiter(cfg)
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	l.sleep = ctxwait.Sleep
	require.NoError(t, l.wait(context.Background(), "g")) // uses the burst of 1
	require.ErrorIs(t, l.wait(canceled, "g"), context.Canceled)
	// The canceled reservation was returned: the next caller waits one
	// interval, not two.
	var slept time.Duration
	l.sleep = func(_ context.Context, d time.Duration) error { slept = d; return nil }
	require.NoError(t, l.wait(context.Background(), "g"))
	require.Equal(t, time.Second, slept)
}

func TestClassifyDefaultsToRetryable(t *testing.T) {
	for _, code := range []int{1, 10001, 70000, 70021, 99998} {
		c, _ := classify(code)
		require.Equal(t, retryable, c, code)
	}
	seen := map[int]bool{}
	for _, r := range codeRules {
		require.LessOrEqual(t, r.from, r.to)
		require.NotEmpty(t, r.meaning)
		for code := r.from; code <= r.to; code++ {
			require.False(t, seen[code], "code %d is in two rules", code)
			seen[code] = true
		}
	}
}

func TestScrub(t *testing.T) {
	const key, sig = "0123456789abcdef0123456789abcdef", "eAEAstaleSig*With-All_Characters0123456789__"
	secrets := []string{key, sig}
	cases := []struct{ in, want string }{
		{"nothing secret", "nothing secret"},
		{"bad key " + key + "!", "bad key [redacted]!"},
		{"sig " + sig[3:19] + " here", "sig [redacted] here"},
		{"sig " + sig[3:18] + " here", "sig " + sig[3:18] + " here"}, // 15 characters are not a leak
		{"sig eAEAstaleSig%2aWith-All_Characters", "sig [redacted]"},
		{"sig eAEAstaleSig%252AWith-All_Characters", "sig [redacted]"},
		{"sig eAEAstaleSig+With/All=Characters", "sig [redacted]"},
		{"UserSig=abc&random=1", "UserSig=[redacted]&random=1"},
		{"USERSIG%3Dabc%26x", "USERSIG%3D[redacted]%26x"},
		{`{"usersig": "abc"}`, `{"usersig": "[redacted]"}`},
		{"usersig expired", "usersig expired"},
		{`Post "https://h/v4/a/b?sdkappid=1&identifier=x": EOF`, `Post "https://h/v4/a/b?[redacted]": EOF`},
		{"what? yes", "what? yes"},
		{"\xff" + key, "\uFFFD[redacted]"},
		{"é" + key[:16] + "é", "é[redacted]é"},
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, scrub(tc.in, secrets), tc.in)
	}
	long := scrub(strings.Repeat("x", 3*maxScrubBytes)+key, secrets)
	require.LessOrEqual(t, len(long), maxScrubBytes)
}

func TestUserSigHMAC(t *testing.T) {
	sig, err := tencentyun.GenUserSig(1400000001, "k", "admin", 3600)
	require.NoError(t, err)
	hmac := userSigHMAC(sig)
	require.Len(t, hmac, 44, "base64 of a SHA-256")
	require.Empty(t, userSigHMAC("not a signature"))
}
