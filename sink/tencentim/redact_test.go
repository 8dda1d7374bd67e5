package tencentim_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/sink/tencentim"
)

func TestBaseURLMustBeHTTPSUnlessLoopback(t *testing.T) {
	cases := []struct {
		url string
		ok  bool
	}{
		{"https://console.tim.qq.com", true},
		{"https://adminapisgp.im.qcloud.com/", true},
		{"http://localhost:8080", true},
		{"http://LOCALHOST", true},
		{"http://127.0.0.1:1", true},
		{"http://127.9.8.7", true},
		{"http://[::1]:9000", true},
		{"http://console.tim.qq.com", false},
		{"http://10.0.0.5:8080", false},
		{"http://localhost.example.com", false},
		{"http://0.0.0.0:80", false},
	}
	for _, tc := range cases {
		_, err := tencentim.New(tencentim.Config{BaseURL: tc.url, SDKAppID: appID, SecretKey: secret, AdminIdentifier: admin})
		if tc.ok {
			require.NoError(t, err, tc.url)
			continue
		}
		require.ErrorContains(t, err, fmt.Sprintf("tencentim: BaseURL %q: must use https", tc.url), tc.url)
		require.ErrorContains(t, err, "loopback", tc.url)
	}
}
