// kafkajs placed out of range: the group's committed offset (set by the caller) lies outside the log;
// kafkajs must reset as `fromBeginning` says (true: earliest, false: latest). A producer appends one record
// every 50 ms once the consumer has joined, recording when each offset was acknowledged, so a reset to
// latest can be timed too (the log end at the reset was an offset acknowledged after it).
// Usage: node out_of_range.js BOOTSTRAP TOPIC GROUP earliest|latest
// Prints one JSON line: {"first_offset": N, "reset_ms": M} (M: from the group join to the reset, upper bound).
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, topic, groupId, reset] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: "kafkad-oor", brokers: [bootstrap], logLevel: logLevel.NOTHING });
  const producer = kafka.producer();
  await producer.connect();
  const consumer = kafka.consumer({ groupId, sessionTimeout: 10000, maxWaitTimeInMs: 100 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: reset === "earliest" });

  const acked = new Map(); // offset -> ms since join
  let joinedAt = null;
  let stop = false;
  let producing = null;
  consumer.on(consumer.events.GROUP_JOIN, () => {
    joinedAt = Date.now();
    producing = (async () => {
      for (let i = 0; i < 400 && !stop; i++) {
        const [r] = await producer.send({ topic, acks: -1, messages: [{ partition: 0, value: `after-${i}` }] });
        acked.set(Number(r.baseOffset), Date.now() - joinedAt);
        await new Promise((res) => setTimeout(res, 50));
      }
    })();
  });

  const first = new Promise((resolve) => {
    consumer.run({
      eachMessage: async ({ message }) => resolve({ offset: Number(message.offset), at: Date.now() }),
    });
  });
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error("no record within 60 s: kafkajs never reset")), 60000);
  });
  const got = await Promise.race([first, timeout]);
  clearTimeout(timer);
  stop = true;
  if (producing) await producing;
  const resetMs = reset === "earliest" ? got.at - joinedAt : acked.get(got.offset);
  await consumer.disconnect();
  await producer.disconnect();
  console.log(JSON.stringify({ first_offset: got.offset, reset_ms: resetMs === undefined ? null : resetMs }));
}

main().catch((err) => {
  console.error(err && err.stack ? err.stack : String(err));
  process.exit(1);
});
