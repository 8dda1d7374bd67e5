package tencentimtest_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tencentyun/tls-sig-api-v2-golang/tencentyun"

	"github.com/outboxrelay/outboxrelay/sink/tencentim/tencentimtest"
)

const (
	testAppID = 1400000001
	testKey   = "fake-key"
	testAdmin = "administrator"
)

// caller posts group messages to a fake as the sink would, with one
// UserSig for every call.
type caller struct {
	t      *testing.T
	url    string
	sig    string
	client *http.Client
}

func newCaller(t *testing.T, f *tencentimtest.Server) *caller {
	sig, err := tencentyun.GenUserSig(testAppID, testKey, testAdmin, 3600)
	require.NoError(t, err)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	t.Cleanup(client.CloseIdleConnections)
	return &caller{t: t, url: f.URL(), sig: sig, client: client}
}

// send posts one message to group with random and checks it was taken.
func (c *caller) send(group string, random uint32) {
	c.t.Helper()
	q := url.Values{"sdkappid": {fmt.Sprint(testAppID)}, "identifier": {testAdmin}, "usersig": {c.sig},
		"random": {fmt.Sprint(random)}, "contenttype": {"json"}}
	body := fmt.Sprintf(`{"GroupId":%q,"Random":%d,"MsgBody":[{"MsgType":"TIMCustomElem","MsgContent":{"Data":"x"}}]}`, group, random)
	resp, err := c.client.Post(c.url+"/v4/"+tencentimtest.APISendGroupMsg+"?"+q.Encode(), "application/json", bytes.NewBufferString(body))
	require.NoError(c.t, err)
	answer, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	require.NoError(c.t, resp.Body.Close())
	require.Contains(c.t, string(answer), `"ActionStatus":"OK"`)
}

// TestServerKeepsTheLastRecordsOnly: a fake that served 10,000 calls
// keeps the last 1,000 (the default) requests and messages, not all.
func TestServerKeepsTheLastRecordsOnly(t *testing.T) {
	f := tencentimtest.NewServer(tencentimtest.Config{SDKAppID: testAppID, SecretKey: testKey, AdminIdentifier: testAdmin})
	t.Cleanup(f.Close)
	c := newCaller(t, f)
	const calls, kept = 10000, 1000 // kept: the documented default
	for i := range calls {
		c.send(fmt.Sprintf("room-%d", i%3000), uint32(i))
	}
	reqs, msgs := f.Requests(), f.AllMessages()
	require.Equal(t, kept, len(reqs), "requests kept")
	require.Equal(t, kept, len(msgs), "messages kept")
	require.Equal(t, uint32(calls-kept), msgs[0].Random, "the oldest kept is the 1,000th from last")
	require.Equal(t, uint32(calls-1), msgs[kept-1].Random)
	require.Equal(t, fmt.Sprint(calls-1), reqs[kept-1].Query["random"])
	require.Equal(t, c.sig, reqs[kept-1].Query["usersig"], "by default the kept calls keep their UserSig, for tests")
	require.Len(t, f.Messages("room-999"), 1, "room-999's calls 999, 3999 and 6999 are forgotten, 9999 is kept")
}

func TestServerMaxRecordsAndForgetUserSigs(t *testing.T) {
	f := tencentimtest.NewServer(tencentimtest.Config{SDKAppID: testAppID, SecretKey: testKey, AdminIdentifier: testAdmin,
		MaxRecords: 5, ForgetUserSigs: true})
	t.Cleanup(f.Close)
	c := newCaller(t, f)
	for i := range 12 {
		c.send("room-1", uint32(i))
	}
	reqs, msgs := f.Requests(), f.AllMessages()
	require.Len(t, reqs, 5)
	require.Len(t, msgs, 5)
	for i := range 5 {
		require.Equal(t, uint64(8+i), msgs[i].Seq, "the group's numbering goes on")
		require.Empty(t, msgs[i].UserSig)
		require.NotContains(t, reqs[i].Query, "usersig")
		require.Equal(t, testAdmin, reqs[i].Query["identifier"], "the rest of the query is kept")
	}
	c.send("room-1", 11) // a repeat of a Random still remembered
	require.Equal(t, 1, f.Duplicates())
	require.Len(t, f.AllMessages(), 5)
}

// TestServerSetDown: while down, a call waits unanswered; bringing the
// fake back answers it 503 without delivering it, and serves later calls.
func TestServerSetDown(t *testing.T) {
	f := tencentimtest.NewServer(tencentimtest.Config{SDKAppID: testAppID, SecretKey: testKey, AdminIdentifier: testAdmin})
	t.Cleanup(f.Close)
	c := newCaller(t, f)
	f.SetDown(true)
	f.SetDown(true) // twice is once
	status := make(chan int, 1)
	go func() {
		resp, err := c.client.Post(f.URL()+"/v4/"+tencentimtest.APISendGroupMsg, "application/json", bytes.NewBufferString("{}"))
		if err != nil {
			status <- -1
			return
		}
		_ = resp.Body.Close()
		status <- resp.StatusCode
	}()
	require.Eventually(t, func() bool { return f.InFlight() == 1 }, time.Minute, 5*time.Millisecond, "the call waits")
	f.SetDown(false)
	require.Equal(t, http.StatusServiceUnavailable, <-status)
	require.Empty(t, f.AllMessages(), "a call answered 503 delivered nothing")
	c.send("room-1", 1)
	require.Len(t, f.AllMessages(), 1)
}
