package roomservice

import (
	"os"
	"strings"
	"testing"

	"github.com/outboxrelay/outboxrelay/outbox"
)

// FuzzParseConfig: any file either fails with an error or gives a config
// the service can start the worker with; never a panic.
func FuzzParseConfig(f *testing.F) {
	for _, name := range shippedConfigs {
		if data, err := testdataFile(name); err == nil {
			f.Add(data)
		}
	}
	f.Add("mysql:\n  dsn: x\n" + imBlock + "outbox_worker:\n  poll_interval: -5s\n  retry_strategy: exponential\n  retry_jitter: 7\n")
	f.Add("mysql:\n  dsn: x\ntencent_im:\n  fake: true\n")
	f.Add("outbox_worker:\n  batch_size: 99999999999999999999\n")
	f.Add("mysql: [a, b]\n")
	f.Add(":\n- -\n")
	_ = os.Unsetenv(EnvSecretKey)
	f.Fuzz(func(t *testing.T, data string) {
		cfg, err := ParseConfig([]byte(data))
		if err != nil {
			if strings.TrimSpace(err.Error()) == "" {
				t.Fatal("empty error")
			}
			return
		}
		opts, err := cfg.OutboxWorker.WorkerOptions()
		if err != nil {
			t.Fatalf("a valid config with invalid worker options: %v", err)
		}
		if _, err := outbox.NewWorker(nopStore{}, outbox.SinkFunc(nil), opts); err != nil {
			t.Fatalf("NewWorker refused a config that parsed: %v", err)
		}
	})
}

func testdataFile(name string) (string, error) {
	b, err := os.ReadFile(name)
	return string(b), err
}
