package outboxui_test

import (
	"database/sql"
	"log"
	"net/http"

	"github.com/outboxrelay/outboxrelay/outbox/outboxui"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// A service mounts the dashboard on its admin listener, behind its own
// check of who may see it.
func Example() {
	var db *sql.DB // the service's database
	store, err := mysql.New(db, mysql.Options{Table: "orders_outbox"})
	if err != nil {
		log.Fatal(err)
	}
	ui, err := outboxui.New(outboxui.Options{
		Outboxes: []outboxui.Outbox{store},
		Path:     "/outbox/",
		// Loopback (http://127.0.0.1:9090/outbox/ here) is always
		// served; list the other names operators open it under.
		AllowedHosts: []string{"orders-admin.internal.example"},
		Authorize: func(r *http.Request) error {
			return nil // e.g. check a client certificate or a session
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer ui.Close()
	admin := http.NewServeMux()
	admin.Handle("/outbox/", ui)
	log.Fatal(http.ListenAndServe("127.0.0.1:9090", admin))
}
