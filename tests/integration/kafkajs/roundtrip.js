// kafkajs against kafkad: create a topic, produce keyed records with headers (none and gzip, the codecs
// kafkajs ships with), consume them back in a consumer group, print one JSON summary line on stdout.
// Usage: node roundtrip.js BOOTSTRAP TOPIC COUNT
const { Kafka, CompressionTypes, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, topic, countArg] = process.argv.slice(2);
  const count = parseInt(countArg, 10);
  const kafka = new Kafka({ clientId: "kafkad-kafkajs", brokers: [bootstrap], logLevel: logLevel.ERROR });

  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 3, replicationFactor: 1 }], waitForLeaders: true });
  await admin.disconnect();

  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const batch = 500;
  for (let start = 0; start < count; start += batch) {
    const messages = [];
    for (let i = start; i < Math.min(count, start + batch); i++) {
      messages.push({
        key: `key-${i % 100}`,
        value: i % 97 === 5 ? null : `value-${i}`,
        partition: i % 3,
        headers: { seq: String(i) },
        timestamp: String(1700000000000 + i),
      });
    }
    const compression = (start / batch) % 2 === 0 ? CompressionTypes.None : CompressionTypes.GZIP;
    await producer.send({ topic, acks: -1, compression, messages });
  }
  await producer.disconnect();

  const consumer = kafka.consumer({ groupId: `kafkajs-${topic}`, sessionTimeout: 10000 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const seen = [];
  const done = new Promise((resolve) => {
    consumer.run({
      eachMessage: async ({ partition, message }) => {
        seen.push({
          partition,
          offset: Number(message.offset),
          key: message.key && message.key.toString(),
          value: message.value && message.value.toString(),
          seq: message.headers.seq && message.headers.seq.toString(),
          timestamp: Number(message.timestamp),
        });
        if (seen.length >= count) resolve();
      },
    });
  });
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error("consume timed out")), 240000); // generous: a loaded machine
  });
  await Promise.race([done, timeout]);
  clearTimeout(timer); // a pending timer would keep node alive for its full minute
  await consumer.disconnect();

  let ok = seen.length === count;
  const bySeq = new Map();
  for (const m of seen) {
    const i = parseInt(m.seq, 10);
    if (bySeq.has(i)) ok = false;
    bySeq.set(i, m);
    const want = i % 97 === 5 ? null : `value-${i}`;
    if (m.key !== `key-${i % 100}` || m.value !== want || m.partition !== i % 3) ok = false;
    if (m.timestamp !== 1700000000000 + i) ok = false;
    if (m.offset !== Math.floor(i / 3)) ok = false;
  }
  console.log(JSON.stringify({ ok, produced: count, consumed: seen.length, distinct: bySeq.size }));
}

main().catch((err) => {
  console.error(err && err.stack ? err.stack : String(err));
  process.exit(1);
});
