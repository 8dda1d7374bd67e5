package kafka_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/sink/kafka"
)

// TestCodesAreClassed: the table of Kafka error codes, as Publish classes
// them.
func TestCodesAreClassed(t *testing.T) {
	for _, tc := range []struct {
		err   *kerr.Error
		class kafka.Class
	}{
		{kerr.MessageTooLarge, kafka.Permanent},
		{kerr.RecordListTooLarge, kafka.Permanent},
		{kerr.InvalidRecord, kafka.Permanent},
		{kerr.CorruptMessage, kafka.Permanent},
		{kerr.UnknownTopicOrPartition, kafka.Unavailable},
		{kerr.UnknownTopicID, kafka.Unavailable},
		{kerr.InvalidTopicException, kafka.Unavailable},
		{kerr.TopicAuthorizationFailed, kafka.Unavailable},
		{kerr.ClusterAuthorizationFailed, kafka.Unavailable},
		{kerr.TransactionalIDAuthorizationFailed, kafka.Unavailable},
		{kerr.SaslAuthenticationFailed, kafka.Unavailable},
		{kerr.UnsupportedSaslMechanism, kafka.Unavailable},
		{kerr.IllegalSaslState, kafka.Unavailable},
		{kerr.InvalidRequiredAcks, kafka.Unavailable},
		{kerr.NotLeaderForPartition, kafka.Retryable},
		{kerr.LeaderNotAvailable, kafka.Retryable},
		{kerr.RequestTimedOut, kafka.Retryable},
		{kerr.NetworkException, kafka.Retryable},
		{kerr.BrokerNotAvailable, kafka.Retryable},
		{kerr.NotEnoughReplicas, kafka.Retryable},
		{kerr.NotEnoughReplicasAfterAppend, kafka.Retryable},
		{kerr.KafkaStorageError, kafka.Retryable},
		{kerr.ThrottlingQuotaExceeded, kafka.Retryable},
		{kerr.OutOfOrderSequenceNumber, kafka.Retryable},
		{kerr.UnknownServerError, kafka.Retryable},
		{kerr.InvalidTimestamp, kafka.Retryable},
	} {
		class, what := kafka.Code(tc.err.Code)
		require.Equal(t, tc.class, class, "%s", tc.err.Message)
		require.NotEmpty(t, what)
	}
}

// requireClass checks that err is of class, names the event and starts
// with want.
func requireClass(t *testing.T, err error, class kafka.Class, id, want string) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, class == kafka.Permanent, outbox.IsPermanent(err), "permanent? %v", err)
	require.Equal(t, class == kafka.Unavailable, outbox.IsUnavailable(err), "unavailable? %v", err)
	require.ErrorContains(t, err, `event "`+id+`"`, "names the event")
	require.Regexp(t, `^kafka: `+want, err.Error())
}

// TestBrokerErrorsAreClassed: kfake answers produce requests with each
// error code, for as long as the test says; Publish classes what it gets.
func TestBrokerErrorsAreClassed(t *testing.T) {
	c := cluster(t)
	for _, tc := range []struct {
		err   *kerr.Error
		count int // -1: until the test ends
		class kafka.Class
		want  string
	}{
		{kerr.MessageTooLarge, -1, kafka.Permanent, "rejected by the broker as too large"},
		{kerr.InvalidRecord, -1, kafka.Permanent, "rejected by the broker as an invalid record"},
		{kerr.CorruptMessage, -1, kafka.Permanent, "rejected by the broker as corrupt"},
		{kerr.TopicAuthorizationFailed, -1, kafka.Unavailable, "not authorized to write to the topic"},
		{kerr.ClusterAuthorizationFailed, -1, kafka.Unavailable, "not authorized on the cluster"},
		// franz-go retries these itself until the context ends.
		{kerr.NotLeaderForPartition, -1, kafka.Retryable, "no acknowledgement in time"},
		{kerr.LeaderNotAvailable, -1, kafka.Retryable, "no acknowledgement in time"},
		{kerr.RequestTimedOut, -1, kafka.Retryable, "no acknowledgement in time"},
		{kerr.NotEnoughReplicas, -1, kafka.Retryable, "no acknowledgement in time"},
		{kerr.NetworkException, -1, kafka.Retryable, "no acknowledgement in time"},
	} {
		t.Run(tc.err.Message, func(t *testing.T) {
			// A client of its own: a record of an earlier case that the
			// client still holds would fail this one with it.
			s := newSink(t, c.ListenAddrs(), kafka.Config{})
			h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: tc.err, Count: tc.count})
			defer h.Remove()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			err := s.Publish(ctx, message("e-1", "room-1"))
			requireClass(t, err, tc.class, "e-1", tc.want)
			if tc.class != kafka.Retryable {
				require.ErrorIs(t, err, tc.err, "errors.Is finds the code")
			}
		})
	}
}

// TestRefusedBatchIsRetriedAlone: a refusal of the record itself that
// was meant for another record of the batch (here: the broker refuses
// one produce request) does not make the message permanent: Publish
// sends it alone, and it is delivered once.
func TestRefusedBatchIsRetriedAlone(t *testing.T) {
	for _, code := range []*kerr.Error{kerr.MessageTooLarge, kerr.InvalidRecord, kerr.CorruptMessage} {
		t.Run(code.Message, func(t *testing.T) {
			c := cluster(t)
			s := newSink(t, c.ListenAddrs(), kafka.Config{})
			c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: code, Count: 1})
			require.NoError(t, publish(t, s, message("e-1", "room-1")))
			recs := consume(t, c.ListenAddrs(), topic)
			require.Len(t, recs, 1)
			require.Equal(t, "e-1", eventID(t, recs[0]))
		})
	}
}

// TestSetUpErrorsAreUnavailable: what an operator must fix (a topic that
// does not exist, rights the user lacks, a refused password, a
// certificate that does not verify) is Unavailable, never Permanent:
// the worker retries it whatever its policy and holds the sink off.
func TestSetUpErrorsAreUnavailable(t *testing.T) {
	ctx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 3*time.Second) // the worker's default PublishTimeout
	}
	t.Run("no such topic", func(t *testing.T) {
		c := cluster(t) // auto-creation is off
		s := newSink(t, c.ListenAddrs(), kafka.Config{Topic: "missing"})
		pctx, cancel := ctx()
		defer cancel()
		err := s.Publish(pctx, message("e-1", "room-1"))
		requireClass(t, err, kafka.Unavailable, "e-1", "the topic does not exist")
		require.ErrorIs(t, err, kerr.UnknownTopicOrPartition)
	})
	t.Run("not authorized for the topic", func(t *testing.T) {
		c := cluster(t, kfake.EnableSASL(), kfake.EnableACLs(),
			kfake.Superuser(kafka.SASLScramSHA256, "admin", "admin-pw"),
			kfake.User(kafka.SASLScramSHA256, "reader", "reader-pw"))
		s := newSink(t, c.ListenAddrs(), kafka.Config{SASL: kafka.SASL{Mechanism: kafka.SASLScramSHA256, Username: "reader", Password: "reader-pw"}})
		pctx, cancel := ctx()
		defer cancel()
		err := s.Publish(pctx, message("e-1", "room-1"))
		requireClass(t, err, kafka.Unavailable, "e-1", "not authorized to write to the topic")
	})
	t.Run("wrong password", func(t *testing.T) {
		c := cluster(t, kfake.EnableSASL(), kfake.Superuser(kafka.SASLPlain, "admin", "admin-pw"))
		// kfake closes the connection on a wrong password; Kafka answers
		// SASL_AUTHENTICATION_FAILED first. Make it answer as Kafka does.
		c.ControlKey(int16(kmsg.SASLAuthenticate), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			req := kreq.(*kmsg.SASLAuthenticateRequest)
			if !bytes.HasSuffix(req.SASLAuthBytes, []byte("\x00Wr0ng-Pa55")) {
				return nil, nil, false
			}
			resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
			resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
			resp.ErrorMessage = kmsg.StringPtr("Authentication failed: Invalid username or password")
			return resp, nil, true
		})
		s := newSink(t, c.ListenAddrs(), kafka.Config{SASL: kafka.SASL{Mechanism: kafka.SASLPlain, Username: "admin", Password: "Wr0ng-Pa55"}})
		pctx, cancel := ctx()
		defer cancel()
		err := s.Publish(pctx, message("e-1", "room-1"))
		requireClass(t, err, kafka.Unavailable, "e-1", "SASL authentication failed")
		require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.NotContains(t, err.Error(), "Wr0ng-Pa55")
	})
	t.Run("connection closed during SASL (kfake's answer to a wrong password)", func(t *testing.T) {
		c := cluster(t, kfake.EnableSASL(), kfake.Superuser(kafka.SASLScramSHA256, "admin", "admin-pw"))
		s := newSink(t, c.ListenAddrs(), kafka.Config{SASL: kafka.SASL{Mechanism: kafka.SASLScramSHA256, Username: "admin", Password: "Wr0ng-Pa55"}})
		pctx, cancel := ctx()
		defer cancel()
		err := s.Publish(pctx, message("e-1", "room-1"))
		requireClass(t, err, kafka.Retryable, "e-1", "no acknowledgement in time, cannot connect")
		require.NotContains(t, err.Error(), "Wr0ng-Pa55")
	})
	t.Run("certificate of another authority", func(t *testing.T) {
		server, _ := certificates(t)
		_, otherCA := certificates(t)
		c := cluster(t, kfake.TLS(server))
		s := newSink(t, c.ListenAddrs(), kafka.Config{TLS: kafka.TLS{CAFile: otherCA}})
		pctx, cancel := ctx()
		defer cancel()
		err := s.Publish(pctx, message("e-1", "room-1"))
		requireClass(t, err, kafka.Unavailable, "e-1", "TLS: the broker's certificate does not verify")
	})
}

// TestTLSAndSASL: a cluster that takes only TLS and SASL gets the
// message through a sink configured with the CA file and credentials.
func TestTLSAndSASL(t *testing.T) {
	for _, mech := range []string{kafka.SASLPlain, kafka.SASLScramSHA256, kafka.SASLScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			server, ca := certificates(t)
			c := cluster(t, kfake.TLS(server), kfake.EnableSASL(), kfake.Superuser(mech, "admin", "admin-pw"))
			s := newSink(t, c.ListenAddrs(), kafka.Config{TLS: kafka.TLS{CAFile: ca}, SASL: kafka.SASL{Mechanism: mech, Username: "admin", Password: "admin-pw"}})
			require.NoError(t, publish(t, s, message("e-1", "room-1")))
		})
	}
}

// TestMessageFaultsArePermanent: a message the sink can never send as
// stored fails permanently before anything is sent, naming the event.
func TestMessageFaultsArePermanent(t *testing.T) {
	c := cluster(t)
	errUnroutable := errors.New("unroutable")
	for _, tc := range []struct {
		name     string
		topicFor func(outbox.Message) (string, error)
		msg      outbox.Message
		want     string
	}{
		{name: "mapping fails", topicFor: func(outbox.Message) (string, error) { return "", errUnroutable }, want: "topic mapping failed: unroutable"},
		{name: "mapping gives a space", topicFor: func(outbox.Message) (string, error) { return "a b", nil }, want: `message cannot be sent as stored: topic "a b" has ' '`},
		{name: "mapping gives 250 bytes", topicFor: func(outbox.Message) (string, error) { return strings.Repeat("a", 250), nil }, want: "message cannot be sent as stored: topic .* over MaxTopicBytes"},
		{name: "header name not UTF-8", msg: outbox.Message{ID: "e-1", Type: "T", Headers: map[string]string{"a\xff": "v"}}, want: `message cannot be sent as stored: header name "a\\xff" is not valid UTF-8`},
		{name: "over MaxRecordBytes", msg: outbox.Message{ID: "e-1", Type: "T", Payload: make([]byte, kafka.DefaultMaxRecordBytes)}, want: `message cannot be sent as stored: record is \d+ bytes .* over MaxRecordBytes \(1000012\)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSink(t, c.ListenAddrs(), kafka.Config{TopicFor: tc.topicFor})
			if tc.msg.ID == "" {
				tc.msg = message("e-1", "room-1")
			}
			_, rerr := s.Record(tc.msg)
			err := publish(t, s, tc.msg)
			requireClass(t, err, kafka.Permanent, "e-1", tc.want)
			require.Equal(t, err.Error(), rerr.Error(), "Record refuses what Publish refuses")
			if tc.topicFor == nil || tc.name != "mapping fails" {
				require.ErrorIs(t, err, kafka.ErrUnsendable)
			} else {
				require.ErrorIs(t, err, errUnroutable)
			}
		})
	}
	ends, err := endOffsets(context.Background(), adminClient(t, c.ListenAddrs()), topic)
	require.NoError(t, err)
	for p, end := range ends {
		require.Zero(t, end, "partition %d: nothing was sent", p)
	}
}

// TestOutOfTime: a deadline that passes before the acknowledgement is a
// plain, retryable error.
func TestOutOfTime(t *testing.T) {
	c := cluster(t)
	s := newSink(t, c.ListenAddrs(), kafka.Config{})
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	err := s.Publish(ctx, message("e-1", "room-1"))
	requireClass(t, err, kafka.Retryable, "e-1", "no acknowledgement in time")
	require.ErrorIs(t, err, context.DeadlineExceeded)
}
