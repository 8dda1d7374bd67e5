package benchkit

import (
	"context"
	"sync"

	"github.com/ThreeDotsLabs/watermill"
	wmsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
)

// Subscribers are the Watermill drain's SQL subscribers, each on a pool
// of its own, acking every message as it arrives. The zero value is
// ready to Start; Close them when the drain is over, also after an error.
type Subscribers struct {
	stop   context.CancelFunc
	subs   []*wmsql.Subscriber
	closes []func()
	wg     sync.WaitGroup
}

// Start starts workers subscribers of topic configured by cfg. open
// opens a pool and returns the beginner on it and what closes it. A
// subscriber acks each message and then calls received, from a goroutine
// of its own.
func (s *Subscribers) Start(ctx context.Context, workers int, topic string, cfg wmsql.SubscriberConfig, open func() (wmsql.Beginner, func(), error), received func()) error {
	ctx, s.stop = context.WithCancel(ctx)
	for range workers {
		db, closeDB, err := open()
		if err != nil {
			return err
		}
		s.closes = append(s.closes, closeDB)
		sub, err := wmsql.NewSubscriber(db, cfg, watermill.NopLogger{})
		if err != nil {
			return err
		}
		s.subs = append(s.subs, sub)
		msgs, err := sub.Subscribe(ctx, topic)
		if err != nil {
			return err
		}
		s.wg.Go(func() {
			for m := range msgs {
				m.Ack()
				received()
			}
		})
	}
	return nil
}

// Close stops the subscribers, waits for them to end and closes their
// pools.
func (s *Subscribers) Close() {
	if s.stop != nil {
		s.stop()
	}
	for _, sub := range s.subs {
		_ = sub.Close()
	}
	s.wg.Wait()
	for _, closeDB := range s.closes {
		closeDB()
	}
}
