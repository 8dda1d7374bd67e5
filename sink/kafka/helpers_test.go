package kafka_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/sink/kafka"
)

// topic is the topic the tests' clusters start with, in partitions
// partitions.
const (
	topic      = "events"
	partitions = 3
)

// cluster starts a kfake cluster of three brokers with topic, closed when
// the test ends.
func cluster(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(3), kfake.SeedTopics(partitions, topic)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// newSink is a sink on the cluster at addrs, with cfg's other fields,
// closed when the test ends.
func newSink(t testing.TB, addrs []string, cfg kafka.Config) *kafka.Sink {
	t.Helper()
	if cfg.Client == nil && cfg.Seeds == nil {
		cfg.Seeds = addrs
	}
	if cfg.Topic == "" && cfg.TopicFor == nil {
		cfg.Topic = topic
	}
	if cfg.Logger == nil {
		cfg.Logger = outboxtest.Logger(t)
	}
	s, err := kafka.New(cfg)
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

func message(id, key string) outbox.Message {
	return outbox.Message{ID: id, Key: key, Type: "RoomGiftSent", Payload: []byte(`{"id":"` + id + `"}`),
		Headers: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
}

// publish publishes msg with a deadline that only guards against a hang.
func publish(t testing.TB, s *kafka.Sink, msg outbox.Message) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return s.Publish(ctx, msg)
}

// consume reads every record of topic on the cluster at addrs, from the
// start of each partition to its end as the brokers report it now, in
// partition and offset order.
func consume(t testing.TB, addrs []string, topic string) []*kgo.Record {
	t.Helper()
	recs, err := readTopic(addrs, topic)
	require.NoError(t, err)
	return recs
}

// readTopic is consume, returning its error; opts are the clients'
// (SASL).
func readTopic(addrs []string, topic string, opts ...kgo.Opt) ([]*kgo.Record, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...)}, opts...)...)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	ends, err := endOffsets(ctx, admin, topic)
	if err != nil {
		return nil, err
	}
	var total int64
	offsets := map[int32]kgo.Offset{}
	for p, end := range ends {
		total += end
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets})}, opts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	byPartition := map[int32][]*kgo.Record{}
	for n := int64(0); n < total; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("consumed %d of %d records: %w", n, total, err)
		}
		if errs := fs.Errors(); len(errs) > 0 {
			return nil, errs[0].Err
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < ends[r.Partition] {
				byPartition[r.Partition] = append(byPartition[r.Partition], r)
				n++
			}
		})
	}
	var out []*kgo.Record
	for p := range int32(len(ends)) {
		out = append(out, byPartition[p]...)
	}
	return out, nil
}

// endOffsets are the end offsets of topic's partitions.
func endOffsets(ctx context.Context, cl *kgo.Client, topic string) (map[int32]int64, error) {
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if len(mresp.Topics) != 1 {
		return nil, fmt.Errorf("metadata of %d topics", len(mresp.Topics))
	}
	if err := kerr.ErrorForCode(mresp.Topics[0].ErrorCode); err != nil {
		return nil, err
	}
	req := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = topic
	for _, p := range mresp.Topics[0].Partitions {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition = p.Partition
		lp.Timestamp = -1 // the end
		lt.Partitions = append(lt.Partitions, lp)
	}
	req.Topics = append(req.Topics, lt)
	ends := map[int32]int64{}
	for _, shard := range cl.RequestSharded(ctx, req) {
		if shard.Err != nil {
			return nil, shard.Err
		}
		for _, rt := range shard.Resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					return nil, err
				}
				ends[rp.Partition] = rp.Offset
			}
		}
	}
	return ends, nil
}

// header is the value of the header name in r, and whether it is there
// exactly once.
func header(r *kgo.Record, name string) (string, bool) {
	var v string
	n := 0
	for _, h := range r.Headers {
		if h.Key == name {
			v, n = string(h.Value), n+1
		}
	}
	return v, n == 1
}

// eventID is the event ID of r.
func eventID(t testing.TB, r *kgo.Record) string {
	t.Helper()
	id, ok := header(r, kafka.HeaderEventID)
	require.True(t, ok, "record at %d/%d has one %s header", r.Partition, r.Offset, kafka.HeaderEventID)
	return id
}

// createTopic creates a topic with configs on the cluster at addrs.
func createTopic(t testing.TB, addrs []string, name string, parts int32, configs map[string]string, opts ...kgo.Opt) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...)}, opts...)...)
	require.NoError(t, err)
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, parts, 1
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.NoError(t, kerr.ErrorForCode(resp.Topics[0].ErrorCode), fmt.Sprint(resp.Topics[0].ErrorMessage))
}

// adminClient is a client on the cluster at addrs, closed when the test
// ends.
func adminClient(t testing.TB, addrs []string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// certificates makes a CA and a server certificate it signs for
// 127.0.0.1; it returns the server's TLS config and the path of the CA's
// PEM file.
func certificates(t testing.TB) (*tls.Config, string) {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		return k
	}
	caKey, srvKey := key(), key()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	caCert, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	srv := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kfake"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srv, caCert, &srvKey.PublicKey, caKey)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600))
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}}, MinVersion: tls.VersionTLS12}, path
}
