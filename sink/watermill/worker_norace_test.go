//go:build !race

package watermill_test

import (
	"testing"

	wmsink "github.com/outboxrelay/outboxrelay/sink/watermill"
)

// TestWorkerThroughRabbitMQRestart: a worker on MySQL delivers through
// watermill-amqp (confirms, durable queue, persistent messages) while
// the RabbitMQ node stops (rabbitmqctl stop_app: every connection drops)
// and starts again; watermill-amqp reconnects the publisher and the
// subscriber, and every event is consumed back.
//
// Built without -race only: watermill-amqp v3.0.2 has a data race on
// reconnecting (ThreeDotsLabs/watermill issue 693, in its
// ConnectionWrapper), which -race reports whenever a connection drops.
// .ci/run runs this test without -race.
func TestWorkerThroughRabbitMQRestart(t *testing.T) {
	rabbit := privateRabbit(t)
	queue := randomName("e2e-")
	col := consumeAMQP(t, rabbit.URL, queue)
	s := newSink(t, wmsink.Config{Publisher: amqpPublisher(t, rabbit.URL), Topic: queue})
	runThroughOutage(t, s, func() { rabbit.Stop(t) }, func() { rabbit.Start(t) }, col.Messages)
}
