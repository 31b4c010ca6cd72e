// sarama_check drives Debian's sarama (1.22, GOPATH mode) against a broker with one protocol version:
// admin create/list topics, a synchronous producer, a consumer group reading everything back, its
// committed offsets through the admin client, and the log ends through ListOffsets (v0 below 0.10.1:
// what Burrow sends). With a 6th argument "offsets-only" it does only the last two, as Burrow does, on
// a group an earlier run committed. Prints "ok" and exits 0, or the first failure and exits 1.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/Shopify/sarama"
)

type handler struct {
	want  int
	got   int
	done  chan struct{}
	close bool
}

func (h *handler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *handler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *handler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		s.MarkMessage(m, "")
		h.got++
		if h.got == h.want && !h.close {
			h.close = true
			close(h.done)
		}
	}
	return nil
}

func fail(format string, args ...interface{}) {
	fmt.Printf(format+"\n", args...)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 6 && len(os.Args) != 7 {
		fail("usage: sarama_check BOOTSTRAP KAFKA_VERSION TOPIC GROUP N [offsets-only]")
	}
	offsetsOnly := len(os.Args) == 7 && os.Args[6] == "offsets-only"
	bootstrap, topic, group := os.Args[1], os.Args[3], os.Args[4]
	n, _ := strconv.Atoi(os.Args[5])
	version, err := sarama.ParseKafkaVersion(os.Args[2])
	if err != nil {
		fail("version: %v", err)
	}
	cfg := sarama.NewConfig()
	cfg.Version = version
	cfg.ClientID = "sarama-check"
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.CommitInterval = 100 * time.Millisecond
	brokers := []string{bootstrap}

	admin, err := sarama.NewClusterAdmin(brokers, cfg)
	if err != nil {
		fail("admin: %v", err)
	}
	if !offsetsOnly {
		produceAndConsume(admin, brokers, cfg, topic, group, n)
	}
	checkOffsets(admin, brokers, cfg, topic, group, n)
	admin.Close()
	fmt.Println("ok")
}

func produceAndConsume(admin sarama.ClusterAdmin, brokers []string, cfg *sarama.Config, topic, group string, n int) {
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		fail("create topic: %v", err)
	}
	topics, err := admin.ListTopics()
	if err != nil {
		fail("list topics: %v", err)
	}
	if _, ok := topics[topic]; !ok {
		fail("list topics: %s missing", topic)
	}

	producer, err := sarama.NewSyncProducer(brokers, cfg)
	if err != nil {
		fail("producer: %v", err)
	}
	for i := 0; i < n; i++ {
		if _, _, err := producer.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(fmt.Sprintf("m%d", i))}); err != nil {
			fail("produce %d: %v", i, err)
		}
	}
	producer.Close()

	cg, err := sarama.NewConsumerGroup(brokers, group, cfg)
	if err != nil {
		fail("consumer group: %v", err)
	}
	h := &handler{want: n, done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	go func() {
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{topic}, h); err != nil && ctx.Err() == nil {
				fmt.Printf("consume: %v\n", err)
				time.Sleep(200 * time.Millisecond)
			}
		}
	}()
	select {
	case <-h.done:
	case <-ctx.Done():
		fail("consumed %d of %d", h.got, n)
	}
	cancel()
	if err := cg.Close(); err != nil { // commits the marked offsets
		fail("close group: %v", err)
	}
}

func checkOffsets(admin sarama.ClusterAdmin, brokers []string, cfg *sarama.Config, topic, group string, n int) {
	offsets, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0}})
	if err != nil {
		fail("group offsets: %v", err)
	}
	block := offsets.GetBlock(topic, 0)
	if block == nil || block.Err != sarama.ErrNoError || block.Offset != int64(n) {
		fail("group offsets: %+v", block)
	}
	client, err := sarama.NewClient(brokers, cfg)
	if err != nil {
		fail("client: %v", err)
	}
	newest, err := client.GetOffset(topic, 0, sarama.OffsetNewest)
	if err != nil || newest != int64(n) {
		fail("newest offset: %d %v", newest, err)
	}
	oldest, err := client.GetOffset(topic, 0, sarama.OffsetOldest)
	if err != nil || oldest != 0 {
		fail("oldest offset: %d %v", oldest, err)
	}
	client.Close()
}
