// kafkajs's admin on group offsets: set (OffsetCommit through the group's coordinator), fetch, reset.
// Usage: node group_offsets.js BOOTSTRAP GROUP TOPIC[,TOPIC...] OFFSET
// Sets every partition of each topic to OFFSET, fetches them back and prints one JSON line:
// {"fetched": {"topic": {"partition": offset, ...}, ...}}
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, groupId, topicList, offset] = process.argv.slice(2);
  const topics = topicList.split(",");
  const kafka = new Kafka({ clientId: "kafkad-group-offsets", brokers: bootstrap.split(","), logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  try {
    const meta = await admin.fetchTopicMetadata({ topics });
    for (const t of meta.topics) {
      const partitions = t.partitions.map((p) => ({ partition: p.partitionId, offset: String(offset) }));
      await admin.setOffsets({ groupId, topic: t.name, partitions });
    }
    const fetched = {};
    for (const r of await admin.fetchOffsets({ groupId, topics })) {
      fetched[r.topic] = {};
      for (const p of r.partitions) fetched[r.topic][p.partition] = Number(p.offset);
    }
    console.log(JSON.stringify({ fetched }));
  } finally {
    await admin.disconnect();
  }
}

main().catch((err) => {
  console.error(err && err.stack ? err.stack : String(err));
  process.exit(1);
});
