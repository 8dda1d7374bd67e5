package tencentim_test

import (
	"context"
	"database/sql"
	"log"
	"os"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/sink/tencentim"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// Wiring the sink into an outbox worker: room events go to the room's
// group; RoomCreated, RoomHeatChanged and RoomRankChanged need no IM call
// and end published at once. (Compiled, not run: it needs a database and
// Tencent credentials.)
func Example() {
	ctx := context.Background()
	db, err := sql.Open("mysql", os.Getenv("MYSQL_DSN"))
	if err != nil {
		log.Fatal(err)
	}
	store, err := mysql.New(db, mysql.Options{Table: "room_outbox"})
	if err != nil {
		log.Fatal(err)
	}
	sink, err := tencentim.New(tencentim.Config{
		BaseURL:         "https://console.tim.qq.com",
		SDKAppID:        1400000000,
		SecretKey:       os.Getenv("TENCENT_IM_SECRET_KEY"),
		AdminIdentifier: "administrator",
		SkipTypes:       []string{"RoomCreated", "RoomHeatChanged", "RoomRankChanged"},
	})
	if err != nil {
		log.Fatal(err) // names the missing or malformed field
	}
	worker, err := outbox.NewWorker(store, sink, outbox.WorkerOptions{Name: "room_outbox", KeyAttr: "room_id"})
	if err != nil {
		log.Fatal(err)
	}
	if err := worker.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
