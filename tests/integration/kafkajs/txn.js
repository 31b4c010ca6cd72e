// kafkajs transactions against kafkad. Prints one JSON line on stdout.
// node txn.js produce BOOTSTRAP TOPIC TXN_ID GROUP SOURCE_TOPIC PREFIX COUNT
//   a committed transaction (PREFIX-c-i, offsets 7 of SOURCE_TOPIC-0 for GROUP), an aborted one (PREFIX-a-i,
//   offset 99), a second committed one (PREFIX-d-i); COUNT records each, round-robin over 3 partitions
// node txn.js consume BOOTSTRAP TOPIC COUNT
//   a read_committed consumer (readUncommitted: false) of TOPIC from the beginning until COUNT records
const { Kafka, logLevel } = require("kafkajs");

function records(prefix, count) {
  const out = [];
  for (let i = 0; i < count; i++) out.push({ value: `${prefix}-${i}`, partition: i % 3 });
  return out;
}

async function produce(kafka, topic, transactionalId, group, source, prefix, count) {
  const producer = kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const steps = [
    [`${prefix}-c`, "7", true],
    [`${prefix}-a`, "99", false],
    [`${prefix}-d`, null, true],
  ];
  for (const [p, offset, commit] of steps) {
    const txn = await producer.transaction();
    await txn.send({ topic, messages: records(p, count) });
    if (offset !== null) {
      await txn.sendOffsets({
        consumerGroupId: group,
        topics: [{ topic: source, partitions: [{ partition: 0, offset }] }],
      });
    }
    if (commit) await txn.commit();
    else await txn.abort();
  }
  await producer.disconnect();
  return { ok: true };
}

async function consume(kafka, topic, count) {
  const consumer = kafka.consumer({ groupId: `kafkajs-rc-${topic}-${Date.now()}`, readUncommitted: false });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const seen = [];
  const done = new Promise((resolve) => {
    consumer.run({
      eachMessage: async ({ message }) => {
        seen.push(message.value && message.value.toString());
        if (seen.length >= count) resolve();
      },
    });
  });
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`consume timed out with ${seen.length} of ${count}`)), 120000);
  });
  await Promise.race([done, timeout]);
  clearTimeout(timer);
  await consumer.disconnect();
  return { ok: true, values: seen };
}

async function main() {
  const [mode, bootstrap, topic, ...rest] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: "kafkad-kafkajs-txn", brokers: bootstrap.split(","), logLevel: logLevel.ERROR });
  const out =
    mode === "produce"
      ? await produce(kafka, topic, rest[0], rest[1], rest[2], rest[3], parseInt(rest[4], 10))
      : await consume(kafka, topic, parseInt(rest[0], 10));
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : e);
  process.exit(1);
});
